"""Lesson 10, second half: real English → Chinese sentences (Tatoeba). Helpers the notebook and
``benchmarks/train_translation.py`` share; the training recipe and the decoders are written in the notebook.

* :func:`make_tokenizers`: English words (rare ones become ``<unk>``), Chinese characters;
* :func:`translate_texts`: a trained ``Transformer``, English sentences → Chinese strings (greedy, batched, or beam);
* :func:`nearest_neighbour`: the baseline to beat, answering with the translation of the most similar training
  sentence (cosine of bag-of-words vectors);
* :func:`show_translations`: a small table of source, output, references and sentence BLEU.
"""

from __future__ import annotations

import torch

from course_utils.data.translation import corpus_bleu
from course_utils.decoding import beam_search, greedy_decode
from course_utils.tokenizers import CharTokenizer, WordTokenizer

from ...assets import asset

# What benchmarks/train_translation.py measured on a 2-core CPU (the notebook reads it; it does not rerun it).
BENCHMARK = asset("results/cpu/translation.json")


def make_tokenizers(train_pairs, min_freq: int = 2) -> tuple[WordTokenizer, CharTokenizer]:
    """English: lowercased words seen ≥ ``min_freq`` times; Chinese: every character of the training side."""
    src_tok = WordTokenizer.from_texts([en for en, _ in train_pairs], min_freq=min_freq)
    tgt_tok = CharTokenizer.from_text("".join(zh for _, zh in train_pairs))
    return src_tok, tgt_tok


def _device(model) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def translate_texts(model, sentences, src_tok, tgt_tok, method: str = "greedy", beam_size: int = 4,
                    batch_size: int = 256, max_extra: int = 10) -> list[str]:
    """English sentences -> Chinese strings. Output length is capped at 2 × source length + ``max_extra``."""
    if method not in ("greedy", "beam"):
        raise ValueError(f"method must be 'greedy' or 'beam', got {method!r}")
    was_training = model.training
    model.eval()
    out: list[str] = []
    try:
        for i in range(0, len(sentences), batch_size):
            src = src_tok.encode_batch(list(sentences[i:i + batch_size])).to(_device(model))    # (B, S)
            max_len = 2 * src.size(1) + max_extra
            if method == "greedy":
                ids = greedy_decode(model, src, max_len, tgt_tok.bos_id, tgt_tok.eos_id)
            else:
                ids = beam_search(model, src, beam_size=beam_size, max_len=max_len, bos_id=tgt_tok.bos_id,
                                  eos_id=tgt_tok.eos_id)
            out += [tgt_tok.decode(row.cpu()) for row in ids]
    finally:
        model.train(was_training)
    return out


def _bag_of_words(sentences, tok, vocab_size: int) -> torch.Tensor:
    """Sparse ``(N, V)`` word counts, rows scaled to unit length (so a product is a cosine similarity)."""
    rows, cols = [], []
    for i, s in enumerate(sentences):
        ids = [t for t in tok.encode(s) if t != tok.unk_id]
        rows += [i] * len(ids)
        cols += ids
    x = torch.sparse_coo_tensor(torch.tensor([rows, cols], dtype=torch.long).reshape(2, -1),
                                torch.ones(len(rows)), (len(sentences), vocab_size), check_invariants=True).coalesce()
    norms = torch.zeros(len(sentences)).index_add_(0, x.indices()[0], x.values() ** 2)
    scale = norms.clamp(min=1e-12).rsqrt()                   # an all-<unk> sentence stays a zero row
    return torch.sparse_coo_tensor(x.indices(), x.values() * scale[x.indices()[0]], x.shape,
                                   check_invariants=True).coalesce()


def nearest_neighbour(train_pairs, test_sentences, src_tok) -> list[str]:
    """The baseline: for each test sentence, the Chinese of the training sentence with the most similar words.

    No model, no training: cosine similarity of bag-of-words vectors, ties to the earliest training pair.
    """
    train = _bag_of_words([en for en, _ in train_pairs], src_tok, src_tok.vocab_size)      # (N, V)
    test = _bag_of_words(test_sentences, src_tok, src_tok.vocab_size).to_dense()          # (M, V)
    best = []
    for i in range(0, len(test_sentences), 512):
        sims = torch.sparse.mm(train, test[i:i + 512].T).T                                   # (m, N)
        best += sims.argmax(dim=1).tolist()
    return [train_pairs[j][1] for j in best]


def show_translations(sources, outputs, references, n: int | None = None) -> None:
    """Print ``source | output | reference(s) | sentence BLEU`` for the first ``n`` rows."""
    for src, out, refs in list(zip(sources, outputs, references))[:n]:
        score = corpus_bleu([out], [refs]).score
        print(f"{score:5.1f}  {src}\n       → {out}\n       ≈ {' | '.join(refs)}")
