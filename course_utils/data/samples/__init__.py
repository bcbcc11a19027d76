"""Tiny bundled stand-ins, used with a warning when the real data cannot be had (docs/data.md); public domain but
``tatoeba_cmn_sample.tsv``: 413 pairs of Tatoeba (CC BY 2.0 FR) via https://www.manythings.org/anki/."""

from __future__ import annotations

import warnings
from importlib import resources

#: Rows ``i`` with ``i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1`` form the held-out split of a sentiment sample.
HOLDOUT_EVERY = 5


class SampleDataWarning(UserWarning):
    """The tiny bundled sample is being used instead of the real dataset."""


def _read(name: str) -> str:
    # importlib.resources also works when the package is installed as a zip or wheel
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def sample_location(name: str) -> str:
    """Human-readable location of a bundled sample, for messages."""
    return f"course_utils/data/samples/{name}"


def sample_text() -> str:
    """The bundled English prose, used instead of tiny-shakespeare."""
    return _read("prose_en.txt")


def sample_sentiment(split: str = "all") -> list[tuple[str, int]]:
    """Bundled English ``(text, label)`` pairs standing in for SST-2: ``split="train"`` 4 rows out of 5, ``"dev"`` /
    ``"test"`` / ``"validation"`` the 5th, ``"all"`` every row; labels alternate, so both parts stay balanced."""
    if split not in ("train", "dev", "test", "validation", "all"):
        raise ValueError(f"split must be 'train', 'dev', 'test' or 'all', got {split!r}")
    lines = _read("sentiment_en.tsv").splitlines()[1:]  # first line is the header
    rows = [(text, int(label)) for label, text in (line.split("\t", 1) for line in lines if line.strip())]
    held_out = split in ("dev", "test", "validation")
    return [row for i, row in enumerate(rows) if split == "all" or (i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1) == held_out]


def warn_sample(title: str, sample: str, size: str, reason: Exception, stacklevel: int = 3) -> None:
    """Warn once that a tiny sample replaces ``title`` and why; ``stacklevel`` reaches the lesson's own line."""
    warnings.warn(f"Using the tiny bundled sample {sample_location(sample)} ({size}) instead of {title}: results on "
                  f"it say little about a real model. Pass fallback=False to get an error instead.\n{reason}",
                  SampleDataWarning, stacklevel=stacklevel)
