"""Lesson 10, second half: real English → Chinese sentences (Tatoeba). Helpers of the notebook; the
training recipe and the decoders are written in the notebook.

* :func:`make_tokenizers`: English words (rare ones become ``<unk>``), Chinese characters, and
  :func:`nearest_neighbour`, the baseline to beat (both from ``course_utils.data.translation``; translating is
  ``course_utils.decoding.translate``);
* :func:`show_translations`: a small table of source, output, references and sentence BLEU.
"""

from __future__ import annotations

from course_utils.data.translation import corpus_bleu, make_tokenizers, nearest_neighbour

__all__ = ["make_tokenizers", "nearest_neighbour", "show_translations"]

def show_translations(sources, outputs, references, n: int | None = None) -> None:
    """Print ``source | output | reference(s) | sentence BLEU`` for the first ``n`` rows."""
    for src, out, refs in list(zip(sources, outputs, references))[:n]:
        score = corpus_bleu([out], [refs]).score
        print(f"{score:5.1f}  {src}\n       → {out}\n       ≈ {' | '.join(refs)}")
