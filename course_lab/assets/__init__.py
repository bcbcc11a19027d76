"""Files the lessons read, shipped inside the package (``package-data`` in pyproject.toml), so that a lesson runs the
same from a clone, an installed wheel, Colab or Kaggle: no lesson looks in the ``tests/``, ``benchmarks/`` or
``docs/`` folders of a clone. :func:`asset` is the one way to find them.

* ``results/cpu/*.json``: what ``benchmarks/*.py --json`` measured on a 2-core CPU (lessons 09, 10, 13, 14 quote
  them; a run of your own writes here too, e.g. ``--json course_lab/assets/results/gpu.json`` in a clone);
* ``minilm/sentences.json``, ``minilm/embeddings.npy``: the token ids and embeddings sentence-transformers computed
  for 60 sentences (lesson 13's reference; ``tools/make_minilm_fixtures.py`` writes them).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["asset"]


def asset(name: str) -> Path:
    """The shipped file or folder ``name``, e.g. ``asset("results/cpu/translation.json")``.

    FileNotFoundError, with what to do, when this installation of the package lacks it (an old or partial install).
    """
    path = Path(str(resources.files(__name__))) / name
    if not path.exists():
        raise FileNotFoundError(f"{name} is not in this installation of the course package ({path.parent}): "
                                "reinstall it, e.g. pip install -e '.[lessons]' from the course's folder")
    return path
