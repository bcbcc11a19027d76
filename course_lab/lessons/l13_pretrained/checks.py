"""Lesson 13 · real pretrained weights: the exercise checks.

Each check prints a verdict in the notebook's language and returns True / False; none raises, so the notebook
always runs to the end. Each also rejects the shortcut its exercise forbids (calling the library function the
student is asked to write) with a message that says why. The lesson module re-exports them (the notebook calls
``l13.check_...(...)``); this module imports nothing from the lesson module, so there is no import cycle.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import course_utils.pooling
from course_utils.pretrained import SentenceEncoder
from course_utils.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer

from ...exercises import (
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    grad_problem,
    never_raises,
    number_problem,
    passed,
    report,
    say,
    tensor_close,
    tensor_problem,
    watching,
    watching_installed,
)

# Library functions that already pool: calling them is the shortcut of exercises 1 and 2.
_POOLING = [(course_utils.pooling, "masked_mean"), (SentenceEncoder, "pool"), (SentenceEncoder, "encode")]


def _hidden_and_keep(seed: int = 0):
    """A batch of three rows: no padding, right padding, left padding (some tokenizers pad on the left)."""
    g = fresh_generator()                                      # fresh values each run (seed: the case's role)
    hidden = torch.randn(3, 6, 5, generator=g) + seed
    keep = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 1, 1]], dtype=torch.bool)
    hidden[~keep] = 50.0                                       # padding vectors that would dominate any average
    return hidden, keep


def _pooling_shortcut(calls, what_en: str, what_zh: str) -> bool:
    return fail(f"You called {calls[0]} from course_utils: that is the library doing the pooling for you. "
                f"{what_en}",
                f"你调用了 course_utils 里的 {calls[0]}：这是让库替你做池化。{what_zh}")


def _naive_from_masked(mean: torch.Tensor, pad: torch.Tensor, n_real: int, width: int) -> torch.Tensor:
    """The check's reference: ``hidden.mean(1)`` of one sentence (masked mean ``mean``, ``n_real`` real tokens)
    padded to ``width`` positions whose vectors are all ``pad``."""
    return (n_real * mean + (width - n_real) * pad) / width


@never_raises
def check_padded_mean(fn) -> bool:
    """Exercise 1: ``fn(mean (C,), pad (C,), n_real, width) -> (C,)``: what ``hidden.mean(1)`` (padding counted)
    returns for a sentence whose masked mean is ``mean``, padded with vectors ``pad`` to ``width`` positions.
    Several drawn sentences; computing it by building a padded tensor is allowed, the formula is the point."""
    g = fresh_generator()
    cases = [(torch.randn(fresh_int(2, 9, g), generator=g), fresh_int(1, 8, g)) for _ in range(4)]
    cases = [(m, torch.randn(m.shape, generator=g), n, n + fresh_int(0, 25, g)) for m, n in cases]
    cases.append((cases[0][0], cases[0][1], cases[0][2], cases[0][2]))      # no padding: the two means agree
    for mean, pad, n_real, width in cases:
        ok, got = attempt(fn, mean.clone(), pad.clone(), n_real, width)
        if not ok:
            return False
        want = _naive_from_masked(mean, pad, n_real, width)
        if tensor_problem(got, want) is None:
            continue
        if tensor_problem(got, (width * mean + n_real * pad) / (width + n_real)) is None or \
                tensor_problem(got, ((width - n_real) * mean + n_real * pad) / width) is None:
            return fail("The weights are swapped: the n_real real tokens carry the sentence's mean, the "
                        "width − n_real padded positions carry pad, and hidden.mean(1) divides the sum by width.",
                        "权重弄反了：n_real 个真实词元贡献的是句子的平均值，width − n_real 个填充位置贡献的是 pad，"
                        "而 hidden.mean(1) 是用总和除以 width。")
        return report(tensor_problem(got, want), f"for n_real = {n_real}, width = {width}",
                      f"n_real = {n_real}、width = {width} 时")
    mean, pad = cases[0][0], cases[0][1]
    short, long_ = (_naive_from_masked(mean, pad, 4, w) for w in (8, 32))
    cos = float(torch.nn.functional.cosine_similarity(short, long_, dim=0))
    return passed(f"Correct. The same 4-token sentence padded to 8 and to 32 positions gets two naive means with "
                  f"cosine {cos:.3f} (the masked mean gives 1.000): the padding, not the words, decides the vector.",
                  f"正确。同一个 4 个词元的句子，分别填充到 8 个和 32 个位置，两个朴素平均值的余弦相似度是 {cos:.3f}"
                  "（带掩码的平均则是 1.000）：决定这个向量的是填充，而不是句子里的词。")


@never_raises
def check_cls_pool(fn) -> bool:
    """Exercise 2: ``fn(hidden (B, T, C), keep (B, T) bool) -> (B, C)``, the vector of each row's first real token
    ([CLS]), also when the row is padded on the left.

    Forbidden: mean pooling (``masked_mean``, the encoder's ``pool``/``encode``): it is what the experiment compares
    [CLS] with.
    """
    hidden, keep = _hidden_and_keep(1)
    with watching(fn, _POOLING) as calls:
        ok, got = attempt(fn, hidden.clone(), keep.clone())
    if not ok:
        return False
    if calls:
        return _pooling_shortcut(calls, "The experiment compares the [CLS] vector with that mean: take the vector "
                                 "at each row's first real token.",
                                 "这个实验要拿 [CLS] 向量和平均值作比较：请取每行第一个真实词元处的向量。")
    want = hidden[torch.arange(3), keep.int().argmax(1)]                          # (B, C)
    if isinstance(got, torch.Tensor) and got.shape == want.shape:
        if torch.allclose(got.detach().float(), hidden[:, 0]):
            return fail("hidden[:, 0] is right only for right padding: in the third row (padded on the left) "
                        "position 0 is padding. Find each row's first True in keep.",
                        "hidden[:, 0] 只在右侧填充时才对：第三行是左侧填充，位置 0 是填充。"
                        "请在 keep 里找到每行的第一个 True。")
        last = hidden[torch.arange(3), 5 - keep.flip(1).int().argmax(1)]
        if torch.allclose(got.detach().float(), last):
            return fail("That is each row's LAST real token ([SEP]); [CLS] is the first one.",
                        "这是每行**最后一个**真实词元（[SEP]）；[CLS] 是第一个。")
    if not tensor_close(got, want, "[CLS] pooling", "[CLS] 池化"):
        return False
    return passed("Correct: the first real token of every row, wherever the padding is. Now run the experiment.",
                  "正确：不论填充在哪一边，取到的都是每行第一个真实词元。现在运行下面的实验。")


def _symmetric_loss(a: torch.Tensor, b: torch.Tensor, scale: float) -> torch.Tensor:
    logits = scale * a @ b.T                                                       # (n, n)
    diag = logits.diagonal()
    a_to_b = (torch.logsumexp(logits, dim=1) - diag).mean()
    b_to_a = (torch.logsumexp(logits, dim=0) - diag).mean()
    return (a_to_b + b_to_a) / 2


@never_raises
def check_symmetric_loss(fn) -> bool:
    """Exercise 3: ``fn(a (n, C), b (n, C), scale) -> scalar``, the in-batch contrastive loss taken both ways
    (a_i picks b_i among the b's, and b_i picks a_i among the a's), averaged; written from its formula with
    ``torch.logsumexp``.

    Forbidden: ``F.cross_entropy`` / ``nn.CrossEntropyLoss`` / ``course_utils.losses.cross_entropy``, which the
    exercise asks to write out.
    """
    g = fresh_generator()
    a = F.normalize(torch.randn(6, 8, generator=g, dtype=torch.float64), dim=-1)
    b = F.normalize(a + 0.8 * torch.randn(6, 8, generator=g, dtype=torch.float64), dim=-1)
    b[0] = b[1]                                        # a duplicate: the two directions now differ clearly
    from course_utils import losses  # the course's own cross-entropy is the same function

    targets = [(torch.nn.functional, "cross_entropy"), (torch.nn.CrossEntropyLoss, "forward"),
               (torch.nn.functional, "nll_loss"), (losses, "cross_entropy")]
    for scale in (20.0, 5.0):
        with watching(fn, targets) as calls:
            a_in = a.clone().requires_grad_(True)           # the loss must train the encoder: a gradient to a
            ok, got = attempt(fn, a_in, b.clone(), scale)
        if not ok:
            return False
        if calls:
            return fail(f"You called {calls[0]}: that is the function this exercise asks you to write. Use the "
                        "formula: logsumexp of each row (or column) of the logits minus its diagonal entry, "
                        "averaged.",
                        f"你调用了 {calls[0]}：这正是本练习要你自己写的函数。请按公式来：logits 每一行（或每一列）"
                        "的 logsumexp 减去对角线上的那一项，再取平均。")
        want = _symmetric_loss(a, b, scale)
        logits = scale * a @ b.T
        one_way = {"a → b": (torch.logsumexp(logits, 1) - logits.diagonal()).mean(),
                   "b → a": (torch.logsumexp(logits, 0) - logits.diagonal()).mean()}
        for name, value in one_way.items():
            if number_problem(got, float(value)) is None:
                return fail(f"That is only the {name} direction. The symmetric loss also asks each b_i to pick "
                            "its a_i among all the a's (the columns of the logits), and averages the two.",
                            f"这只是 {name} 一个方向。对称的损失还要求每个 b_i 在所有 a 中挑出自己的 a_i"
                            "（即 logits 的各列），再把两个方向取平均。")
        if not report(number_problem(got, float(want)), f"loss (scale={scale})", f"损失（scale={scale}）"):
            return False
        if not report(grad_problem(got), "gradient", "梯度"):
            return False
        a_ref = a.clone().requires_grad_(True)
        (want_grad,) = torch.autograd.grad(_symmetric_loss(a_ref, b, scale), a_ref)
        (grad,) = torch.autograd.grad(got, a_in, allow_unused=True)
        if grad is None or not torch.allclose(grad.double(), want_grad, atol=1e-6):
            return fail("The loss has the right value but not the right gradient with respect to a: compute it "
                        "from a and b with torch operations only.",
                        "损失的数值对了，但关于 a 的梯度不对：请只用 torch 运算从 a 和 b 算出它。")
    return passed("Correct: this is CLIP's symmetric contrastive loss, with in-batch negatives both ways.",
                  "正确：这就是 CLIP 的对称对比损失，两个方向都用了批内负例。")


_TOY_VOCAB = {"[UNK]", "un", "una", "##ff", "##ffa", "##able", "##ble", "##a", "play", "##ing", "##s", "p",
              "##l", "##ay", "token", "##ization", "##ize", "##r"}
_TOY_WORDS = {"unaffable": ["una", "##ffa", "##ble"], "playing": ["play", "##ing"], "plays": ["play", "##s"],
              "tokenization": ["token", "##ization"], "tokenizer": ["token", "##ize", "##r"],
              "plx": ["[UNK]"], "xplay": ["[UNK]"], "p": ["p"]}


_INSTALLED_WORDPIECE = (("tokenizers", ("Tokenizer.encode", "Tokenizer.encode_batch")),
                        ("tokenizers.implementations", ("BertWordPieceTokenizer",)),
                        ("transformers.models.bert.tokenization_bert", ("WordpieceTokenizer", "BertTokenizer")),
                        ("transformers", ("BertTokenizer", "BertTokenizerFast")))


@never_raises
def check_wordpiece(fn) -> bool:
    """Exercise 4: ``fn(word, vocab) -> list of pieces``, greedy longest match first, ``##`` for continuations,
    ``["[UNK]"]`` for the whole word when some rest matches nothing.

    Forbidden: the course's tokenizer (``WordPieceTokenizer.wordpiece`` / ``tokenize``), which implements it.
    """
    targets = [(WordPieceTokenizer, "wordpiece"), (WordPieceTokenizer, "tokenize")]
    # The WordPiece of installed packages (the Rust `tokenizers`, transformers' BERT tokenizer), watched once
    # imported: the answer runs once first, so a package it imports inside is loaded by then.
    fn_first = (next(iter(_TOY_WORDS)), set(_TOY_VOCAB))
    g = fresh_generator()                                      # one word drawn afresh: no table of the words passes
    pieces = sorted(p.removeprefix("##") for p in _TOY_VOCAB if p != "[UNK]")
    drawn = "".join(pieces[fresh_int(0, len(pieces), g)] for _ in range(fresh_int(1, 4, g)))
    # The drawn word's answer comes from the course's tokenizer over the same vocabulary (before any watching).
    reference = WordPieceTokenizer([*SPECIAL_TOKENS, *sorted(_TOY_VOCAB - set(SPECIAL_TOKENS))])
    for word, want in [*_TOY_WORDS.items(), (drawn, reference.wordpiece(drawn))]:
        with watching_installed(fn, fn_first, targets, _INSTALLED_WORDPIECE) as calls:
            ok, got = attempt(fn, word, set(_TOY_VOCAB))
        if not ok:
            return False
        if calls:
            return fail(f"You called {calls[0]}: it implements exactly what you are asked to write, "
                        "with its own vocabulary. Write the greedy search over `vocab` yourself.",
                        f"你调用了 {calls[0]}：它实现的正是要你写的东西，用的还是它自己的词表。"
                        "请针对 `vocab` 自己写出贪心搜索。")
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
