"""Lesson 13 · real pretrained weights: the exercise checks.

Each check prints a verdict in the notebook's language and returns True / False; none raises, so the notebook
always runs to the end. The lesson module re-exports them (the notebook calls ``l13.check_...(...)``); this module
imports nothing from the lesson module, so there is no import cycle.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_utils.pooling import masked_mean

from ...exercises import attempt, fail, never_raises, passed, say, tensor_close


def _hidden_and_mask(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(3, 6, 5, generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]])
    return hidden, mask


@never_raises
def check_mean_pool(fn) -> bool:
    """Exercise 1: ``fn(hidden (B, T, C), mask (B, T) of 1/0) -> (B, C)``, the mean over the real tokens."""
    hidden, mask = _hidden_and_mask()
    ok, got = attempt(fn, hidden.clone(), mask.clone())
    if not ok:
        return False
    want = masked_mean(hidden, mask)
    if not tensor_close(got, want, "mean pooling", "平均池化"):
        if isinstance(got, torch.Tensor) and got.shape == want.shape and \
                torch.allclose(got.detach().float(), hidden.mean(1), atol=1e-5):
            say("Hint: you averaged over all T positions, padding included. Multiply by the mask and divide by "
                 "the number of real tokens (mask.sum(1)), not by T.",
                 "提示：你对全部 T 个位置取了平均，把填充也算进去了。先乘以掩码，再除以真实词元的个数"
                 "（mask.sum(1)），而不是 T。")
        return False
    return passed("Correct: padding does not change a sentence's vector.", "正确：填充不会改变句子的向量。")


@never_raises
def check_cosine_matrix(fn) -> bool:
    """Exercise 2: ``fn(a (N, C), b (M, C)) -> (N, M)`` with entry (i, j) = cos(a_i, b_j)."""
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(4, 7, generator=g) * 3, torch.randn(5, 7, generator=g)
    ok, got = attempt(fn, a.clone(), b.clone())
    if not ok:
        return False
    want = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T
    if not tensor_close(got, want, "cosine matrix", "余弦相似度矩阵"):
        if isinstance(got, torch.Tensor) and got.shape == want.shape and \
                torch.allclose(got.detach().float(), a @ b.T, atol=1e-4):
            say("Hint: these are plain dot products. Divide each row by its length first (F.normalize), so that "
                 "only the direction counts.",
                 "提示：这只是点积。先把每一行除以它的长度（F.normalize），这样只有方向起作用。")
        elif isinstance(got, torch.Tensor) and got.shape == (5, 4):
            say("Hint: rows must be the sentences of a, columns those of b.",
                 "提示：行对应 a 中的句子，列对应 b 中的句子。")
        return False
    return passed("Correct: every entry lies in [-1, 1], and cos(x, x) = 1.",
                  "正确：每个元素都在 [-1, 1] 之间，且 cos(x, x) = 1。")


_TOY_VOCAB = {"[UNK]", "un", "una", "##ff", "##ffa", "##able", "##ble", "##a", "play", "##ing", "##s", "p",
              "##l", "##ay", "token", "##ization", "##ize", "##r"}
_TOY_WORDS = {"unaffable": ["una", "##ffa", "##ble"], "playing": ["play", "##ing"], "plays": ["play", "##s"],
              "tokenization": ["token", "##ization"], "tokenizer": ["token", "##ize", "##r"],
              "plx": ["[UNK]"], "xplay": ["[UNK]"], "p": ["p"]}


@never_raises
def check_wordpiece(fn) -> bool:
    """Exercise 3: ``fn(word, vocab) -> list of pieces``, greedy longest match first, ``##`` for continuations,
    ``["[UNK]"]`` for the whole word when some rest matches nothing."""
    for word, want in _TOY_WORDS.items():
        ok, got = attempt(fn, word, set(_TOY_VOCAB))
        if not ok:
            return False
        if not isinstance(got, (list, tuple)) or list(got) != want:
            fail(f"{word!r}: expected {want}, got {got!r}.", f"{word!r}：应该得到 {want}，实际是 {got!r}。")
            if isinstance(got, (list, tuple)) and word == "unaffable" and list(got)[:1] == ["un"]:
                say("Hint: take the LONGEST piece in the vocabulary first (try the whole rest, then shorten it).",
                     "提示：每次先取词表里**最长**的片段（先试剩下的整段，再一个字符一个字符地缩短）。")
            elif isinstance(got, (list, tuple)) and "[UNK]" in got and len(got) > 1:
                say("Hint: when a rest matches nothing, the whole word becomes a single [UNK].",
                     "提示：只要有一段匹配不上，整个词就变成一个 [UNK]。")
            elif isinstance(got, (list, tuple)) and len(got) > 1 and not str(got[1]).startswith("##"):
                say("Hint: pieces after the first are looked up with the '##' prefix.",
                     "提示：除第一个片段外，其余片段查词表时都要加上前缀 '##'。")
            return False
    return passed("Correct: this is exactly BERT's WordPiece (plus the 100-character limit).",
                  "正确：这正是 BERT 的 WordPiece（它另外还限制每个词最多 100 个字符）。")
