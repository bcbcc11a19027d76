"""Lesson 09 · encoder-only classifier: the exercise checks.

Each check prints a verdict in the notebook's language and returns True / False; none raises, so the notebook
always runs to the end. The lesson module re-exports them (the notebook calls ``l09.check_...(...)``); this module
imports nothing from the lesson module, so there is no import cycle.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import torch

from ...exercises import (
    as_number,
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    is_tensor,
    never_raises,
    number_problem,
    passed,
    report,
)


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of rows whose highest logit is the label: ``(N, C), (N,) -> float`` (the lesson's metric)."""
    if logits.dim() != 2 or labels.shape != logits.shape[:1]:
        raise ValueError(f"expected logits (N, C) and labels (N,), got {tuple(logits.shape)} and {tuple(labels.shape)}")
    return (logits.argmax(dim=-1) == labels).float().mean().item()


def _masked_max_pool(h: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Reference of exercise 1: the largest value of each channel over the real positions, ``(B, T, C) -> (B, C)``."""
    return h.masked_fill(~keep[..., None], float("-inf")).amax(dim=1)


def _pool_case():
    g = fresh_generator()
    h = torch.randn(3, 5, 4, generator=g) - 3.0               # mostly negative values
    keep = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    h[~keep] = 10.0                                            # padding holds large garbage
    return h, keep


@never_raises
def check_max_pool(fn) -> bool:
    """Exercise 1: ``fn(h (B, T, C), keep (B, T) bool) -> (B, C)``, the max over real positions only."""
    h, keep = _pool_case()
    ok, got = attempt(fn, h.clone(), keep.clone())
    if not ok or not is_tensor(got, (3, 4), "pooled", "池化结果"):
        return False
    want = _masked_max_pool(h, keep)
    got = got.detach().float()
    if torch.allclose(got, want):
        return passed("Correct: padding can never win the max, whatever it holds.",
                      "正确：无论填充位置上是什么值，它都不可能成为最大值。")
    if torch.allclose(got, h.amax(1)):
        return fail("The padding won: it holds 10.0 here. Fill the padded positions with -inf before the max.",
                    "填充位置赢了：这里它的值是 10.0。求最大值之前，先把填充位置填成 -inf。")
    if torch.allclose(got, (h * keep[..., None]).amax(1)):
        return fail("Multiplying by the mask turns padding into 0, which beats every negative value. "
                    "Use masked_fill(~keep, -inf) instead.",
                    "乘以掩码会把填充变成 0，而 0 比所有负数都大。请改用 masked_fill(~keep, -inf)。")
    err = float((got - want).abs().max())
    return fail(f"Wrong values (largest difference {err:.3g}): take the max over dim=1 (the positions).",
                f"数值不对（最大差值 {err:.3g}）：应在 dim=1（位置维度）上取最大值。")


def _prepend_cls(ids: torch.Tensor, cls_id: int) -> torch.Tensor:
    """Reference of exercise 2: ``cls_id`` inserted in front of every row, ``(B, T) -> (B, T + 1)``."""
    return torch.cat([torch.full((ids.size(0), 1), cls_id, dtype=ids.dtype), ids], dim=1)


@never_raises
def check_prepend_cls(fn) -> bool:
    """Exercise 2: ``fn(ids (B, T), cls_id) -> (B, T + 1)``, the ``[CLS]`` id in front, every token kept."""
    ids = torch.tensor([[2, 5, 1, 7, 0, 0], [1, 3, 3, 2, 6, 4], [4, 1, 2, 0, 0, 0]])   # 0 = <pad>, at the end
    cls_id = 12
    g = fresh_generator()                                  # then a drawn batch and [CLS] id: no fixed answer passes
    drawn = torch.randint(1, 50, (fresh_int(1, 6, g), fresh_int(1, 9, g)), generator=g)
    drawn_cls = fresh_int(50, 100, g)
    ok, got = attempt(fn, drawn.clone(), drawn_cls)
    if not ok:
        return False
    if not isinstance(got, torch.Tensor) or not torch.equal(got, _prepend_cls(drawn, drawn_cls)):
        shown = f"ids of shape {tuple(drawn.shape)}, cls_id={drawn_cls}"
        ok_fixed, got_fixed = attempt(fn, ids.clone(), cls_id)
        if not ok_fixed:
            return False
        if isinstance(got_fixed, torch.Tensor) and torch.equal(got_fixed, _prepend_cls(ids, cls_id)):
            return fail(f"Not yet for {shown}: row b must be [cls_id, ids[b, 0], ..., ids[b, T-1]] for any batch "
                        "size, length and cls_id.",
                        f"输入为形状 {tuple(drawn.shape)} 的 ids、cls_id={drawn_cls} 时还不对：对任意批大小、长度和 "
                        "cls_id，第 b 行都应为 [cls_id, ids[b, 0], ..., ids[b, T-1]]。")
    ok, got = attempt(fn, ids.clone(), cls_id)
    if not ok or not is_tensor(got, None, "ids with [CLS]", "加上 [CLS] 的 ID"):
        return False
    overwritten = ids.clone()
    overwritten[:, 0] = cls_id
    if tuple(got.shape) == tuple(ids.shape) and torch.equal(got, overwritten):
        return fail("You overwrote the first token instead of inserting one: here it is often A or B, and the "
                    "model can no longer see it. Insert a new column: (B, T) -> (B, T + 1).",
                    "你把第一个词元覆盖掉了，而不是插入一个新词元：在这个任务里它常常就是 A 或 B，模型再也看不到它了。"
                    "请插入新的一列：(B, T) -> (B, T + 1)。")
    if not is_tensor(got, (3, 7), "ids with [CLS]", "加上 [CLS] 的 ID", dtype=ids.dtype):
        return False
    if torch.equal(got, torch.cat([ids, torch.full((3, 1), cls_id)], dim=1)):
        return fail("[CLS] goes in front: pool='cls' reads position 0. At the end it would also sit after the "
                    "padding, at a different position in every row.",
                    "[CLS] 要放在最前面：pool='cls' 读取的是第 0 个位置。放在末尾的话，它还会落在填充之后，"
                    "每一行的位置都不一样。")
    if not torch.equal(got, _prepend_cls(ids, cls_id)):
        return fail("Not yet: row b must be [cls_id, ids[b, 0], ..., ids[b, T-1]], padding still at the end.",
                    "还不对：第 b 行应为 [cls_id, ids[b, 0], ..., ids[b, T-1]]，填充仍然在末尾。")
    return passed("Correct: every row starts with [CLS] and keeps all its tokens. Now run the experiment below.",
                  "正确：每一行都以 [CLS] 开头，并保留了全部词元。现在运行下面的实验。")


def _constant_loss(train_labels: Sequence[int], eval_labels: Sequence[int]) -> float:
    """Reference of exercise 3: the mean cross-entropy (nats) on ``eval_labels`` of the best constant predictor
    fitted on ``train_labels``, which outputs the training frequencies π for every input: −mean log π[y]."""
    if not train_labels or not eval_labels:
        raise ValueError("both label lists must be non-empty")
    counts = Counter(train_labels)
    return -sum(math.log(counts[y] / len(train_labels)) for y in eval_labels) / len(eval_labels)


def _constant_loss_cases() -> list[tuple[list[int], list[int]]]:
    cases = [([1] * 56 + [0] * 44, [1] * 51 + [0] * 49),     # SST-2's shares: above log 2
             ([1] * 9 + [0] * 5, [0] * 6 + [1] * 4),
             ([0, 1, 2, 2, 2, 1, 0, 2], [2, 2, 1, 0, 2])]
    g = fresh_generator()                                   # drawn lists: no fixed answer to copy
    while len(cases) < 6:
        n_classes = fresh_int(2, 6, g)
        train = torch.randint(n_classes, (fresh_int(8, 40, g),), generator=g).tolist()
        dev = torch.randint(n_classes, (fresh_int(3, 30, g),), generator=g).tolist()
        if set(dev) <= set(train) and Counter(train) != Counter(dev):
            cases.append((train, dev))
    return cases


def _is_infinite(got) -> bool:
    """``inf`` as a float or a one-number tensor (what a probability of 0 under a log gives)."""
    if isinstance(got, torch.Tensor):
        return got.numel() == 1 and bool(torch.isinf(got.detach()).all())
    return isinstance(got, float) and math.isinf(got)


@never_raises
def check_constant_loss(fn) -> bool:
    """Exercise 3: ``fn(train_labels, eval_labels) -> float`` (lists of ints), the dev cross-entropy of the best
    input-blind predictor fitted on the training labels; the usual wrong derivations are named."""
    for train, dev in _constant_loss_cases():
        ok, got = attempt(fn, list(train), list(dev))
        if not ok:
            return False
        want = _constant_loss(train, dev)
        problem = number_problem(got, want, rel=1e-6)
        if problem is None:
            continue
        value, _ = as_number(got)
        dev_counts, n_classes = Counter(dev), len(set(train) | set(dev))
        peeked = -sum(c / len(dev) * math.log(c / len(dev)) for c in dev_counts.values())
        on_train = _constant_loss(train, train)
        if _is_infinite(got):
            return fail("Infinite: your constant puts probability 0 on some label, and −log 0 = ∞ for every example "
                        "of it (a one-hot 'always the majority' does that). Under cross-entropy the best constant "
                        "is a distribution: minimise −Σ_c n_c log π_c with Σ_c π_c = 1.",
                        "结果是无穷大：你的常数给某个标签的概率是 0，而这个标签的每个样本都要付出 −log 0 = ∞"
                        "（独热的“永远回答多数类”就是这样）。在交叉熵下，最好的常数是一个分布："
                        "在 Σ_c π_c = 1 的约束下最小化 −Σ_c n_c log π_c。")
        if value is not None and math.isclose(value, peeked, rel_tol=1e-6):
            return fail("You fitted π on the evaluation labels: that is their entropy, a number no model fitted on "
                        "the training set is promised. Fit π on train_labels, then score it on eval_labels.",
                        "你是用评估集标签拟合的 π：这得到的是评估集标签的熵，只在训练集上拟合的模型拿不到这个数。"
                        "请在 train_labels 上拟合 π，再在 eval_labels 上评分。")
        if value is not None and math.isclose(value, on_train, rel_tol=1e-6):
            return fail("That is the loss on the training labels. The baseline is fitted on train_labels and scored "
                        "on eval_labels, as the model's dev loss is.",
                        "这是在训练集标签上的损失。基线要在 train_labels 上拟合、在 eval_labels 上评分，"
                        "和模型的开发集损失一样。")
        if value is not None and math.isclose(value, math.log(n_classes), rel_tol=1e-6):
            return fail("That is the uniform guess, log C: a constant, but not the best one. Which π minimises "
                        "the training cross-entropy −Σ_c n_c log π_c?",
                        "这是均匀猜测 log C：它是常数，但不是最好的常数。"
                        "哪个 π 能让训练集上的交叉熵 −Σ_c n_c log π_c 最小？")
        if value is not None and math.isclose(value, want / math.log(2), rel_tol=1e-6):
            return fail("That is in bits (log base 2). The training losses of this lesson are in nats: use the "
                        "natural log.",
                        "这是以比特为单位（以 2 为底的对数）。本课的训练损失以奈特为单位：请用自然对数。")
        return report(problem, f"for {len(train)} training and {len(dev)} evaluation labels",
                      f"训练标签 {len(train)} 个、评估标签 {len(dev)} 个时")
    return passed("Correct: the best input-blind predictor outputs the training frequencies, and a dev loss above "
                  "its number means the model has learned nothing usable from the sentences.",
                  "正确：不看输入的最佳预测器输出的就是训练集中各类的频率；开发集损失如果不低于这个数，"
                  "说明模型还没从句子里学到任何能用的东西。")


def _early_stop(dev_losses: Sequence[float], patience: int) -> tuple[int, int]:
    """Reference of exercise 4: ``(stop, keep)``, the evaluation at which early stopping ends training (the first
    one after ``patience`` evaluations in a row without a new best; the last one if that never happens) and the
    evaluation whose weights it keeps (the best seen up to ``stop``)."""
    if patience < 1 or not dev_losses:
        raise ValueError("need at least one dev loss and patience >= 1")
    best, waited = 0, 0
    for i, loss in enumerate(dev_losses):
        if loss < dev_losses[best] or i == 0:
            best, waited = i, 0
        else:
            waited += 1
            if waited == patience:
                return i, best
    return len(dev_losses) - 1, best


def _early_stop_on_ties(dev_losses: Sequence[float], patience: int) -> tuple[int, int]:
    """The usual slip of exercise 4: a loss equal to the best counts as a new best (``<=``)."""
    best, waited = 0, 0
    for i, loss in enumerate(dev_losses):
        if loss <= dev_losses[best]:
            best, waited = i, 0
        else:
            waited += 1
            if waited == patience:
                return i, best
    return len(dev_losses) - 1, best


EARLY_STOP_CASES = (([1.0, 0.8, 0.9, 0.95, 0.97, 0.99, 0.7], 2),  # the best point comes after the stop
                    ([0.493, 0.459, 0.451, 0.471, 0.467], 1),       # the dev losses of this lesson's CPU run
                    ([0.493, 0.459, 0.451, 0.471, 0.467], 2),
                    ([3.0, 2.0, 1.0], 1),                           # never stops early
                    ([1.0, 0.5, 0.9, 0.8, 0.7, 0.6], 2),            # better than the previous, never the best
                    ([1.0, 0.8, 0.8, 0.9, 0.8], 1))                 # a tie with the best is not a new best


@never_raises
def check_early_stop(fn) -> bool:
    """Exercise 4: ``fn(dev_losses, patience) -> (stop, keep)``, deciding as training goes (no look at later losses)."""
    g = fresh_generator()                                   # drawn curves too: no table of the cases passes
    drawn = [([round(float(v), 3) for v in 1 + torch.rand(fresh_int(4, 13, g), generator=g)], fresh_int(1, 4, g))
             for _ in range(6)]
    for losses, patience in EARLY_STOP_CASES + tuple(drawn):
        ok, got = attempt(fn, list(losses), patience)
        if not ok:
            return False
        want = _early_stop(losses, patience)
        try:
            got = tuple(int(v) for v in got)
        except (TypeError, ValueError):
            return fail("Return a pair of indices (stop, keep).", "请返回一对下标 (stop, keep)。")
        if got == want:
            continue
        if got == _early_stop_on_ties(losses, patience):
            return fail(f"For {losses} (patience {patience}) you counted a loss equal to the best as a new best "
                        f"(<= instead of <). A tie is no improvement: expected (stop, keep) = {want}, got {got}.",
                        f"对 {losses}（patience {patience}），你把与最好成绩相等的损失也算成了新的最好成绩"
                        f"（用了 <= 而不是 <）。持平不算改进：(stop, keep) 应为 {want}，实际是 {got}。")
        hindsight = min(range(len(losses)), key=losses.__getitem__)
        if got[1] == hindsight != want[1]:
            return fail(f"For {losses} (patience {patience}) you kept evaluation {hindsight}, the best point in "
                        f"hindsight. Early stopping decides while training: it stops at evaluation {want[0]} and "
                        "never sees the losses after it.",
                        f"对 {losses}（patience {patience}），你保留的是第 {hindsight} 次评估，那是事后看来最好的一点。"
                        f"早停是在训练过程中做决定的：它在第 {want[0]} 次评估时就停了，看不到之后的损失。")
        return fail(f"For {losses} with patience {patience}: expected (stop, keep) = {want}, got {got}. Stop at the "
                    "first evaluation that completes `patience` evaluations in a row without a new best.",
                    f"对 {losses}、patience {patience}：(stop, keep) 应为 {want}，实际是 {got}。"
                    "在连续 patience 次评估都没有刷新最好成绩的那一次停下。")
    return passed("Correct. With the dev losses of our CPU run, patience 1 stops at evaluation 3 (step 480) and "
                  "keeps the weights of evaluation 2 (step 360, 81.3 % dev accuracy).",
                  "正确。按我们在 CPU 上运行得到的开发集损失，patience 为 1 时在第 3 次评估（第 480 步）停下，"
                  "保留第 2 次评估（第 360 步，开发集准确率 81.3%）的权重。")
