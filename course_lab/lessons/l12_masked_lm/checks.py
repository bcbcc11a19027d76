"""Lesson 12 · masked language modelling: the exercise checks.

Each check prints a verdict in the notebook's language and returns True / False; none raises, so the notebook
always runs to the end. The lesson module re-exports them: the notebook calls ``l12.check_...(...)``.
"""

from __future__ import annotations

import math

import torch

from course_utils.mlm import IGNORE_INDEX

from ...exercises import attempt, fail, never_raises, passed, type_problem

_V, _MASK, _SPECIAL = 40, 4, (0, 1, 2, 3, 4)


def _z(count: int, trials: int, q: float) -> float:
    return abs(count - trials * q) / math.sqrt(max(trials * q * (1 - q), 1e-12))


@never_raises
def check_bert_masking(fn) -> bool:
    """Exercise 1: ``fn(ids, mask_id, vocab_size, special_ids, p, generator) -> (inputs, labels)`` follows BERT:
    p of the ordinary tokens selected; of those 80 % ``<mask>``, 10 % random, 10 % unchanged; labels −100
    elsewhere; special tokens never selected."""
    g = torch.Generator().manual_seed(12)
    ids = torch.randint(5, _V, (128, 64), generator=g)
    ids[:, 0] = 2
    ids[:, 48:] = 0  # padding
    ok, got = attempt(fn, ids.clone(), _MASK, _V, _SPECIAL, 0.15, torch.Generator().manual_seed(0))
    if not ok:
        return False
    if not (isinstance(got, tuple) and len(got) == 2):
        return fail("Return a pair (inputs, labels).", "请返回一个二元组 (inputs, labels)。")
    inputs, labels = got
    for name, t in (("inputs", inputs), ("labels", labels)):
        problem = type_problem(t, ids.shape)
        if problem is not None:
            return fail(f"{name}: {problem[0]}", f"{name}：{problem[1]}")
    special = torch.isin(ids, torch.tensor(_SPECIAL))
    selected = labels != IGNORE_INDEX
    if bool(selected.all()):
        return fail("No label is −100: only the selected positions get their original id as the label; every "
                    "other label must be −100, so that the loss ignores it.",
                    "没有一个标签是 −100：只有被选中的位置以原来的 ID 作为标签，其余位置的标签都必须是 −100，"
                    "这样损失才会忽略它们。")
    if not torch.equal(labels[selected], ids[selected]):
        return fail("At the selected positions the label must be the *original* token id.",
                    "被选中的位置上，标签必须是*原来的*词元 ID。")
    if (selected & special).any():
        return fail("Special tokens (<pad>, <bos>, …) were selected: only ordinary tokens may be.",
                    "特殊词元（<pad>、<bos> 等）被选中了：只有普通词元才能被选中。")
    if not torch.equal(inputs[~selected], ids[~selected]):
        return fail("A position that is not selected was changed: leave it as it is (its label is −100).",
                    "没被选中的位置被改动了：应保持原样（它的标签是 −100）。")
    n_ordinary, n_sel = int((~special).sum()), int(selected.sum())
    if n_sel == 0:
        return fail("Nothing was selected: select each ordinary position with probability p.",
                    "一个位置都没有选中：每个普通位置应以概率 p 被选中。")
    if _z(n_sel, n_ordinary, 0.15) > 5:
        return fail(f"{100 * n_sel / n_ordinary:.1f} % of the ordinary tokens were selected; expected p = 15 % "
                    "(padding and special tokens do not count).",
                    f"普通词元中有 {100 * n_sel / n_ordinary:.1f} % 被选中；应为 p = 15 %（填充和特殊词元不算在内）。")
    masked = int((selected & (inputs == _MASK)).sum())
    unchanged = int((selected & (inputs == ids)).sum())
    replaced = n_sel - masked - unchanged
    if masked == n_sel:
        return fail("Every selected token became <mask>: BERT keeps 10 % unchanged and replaces 10 % by a random "
                    "token, so the model must also care about tokens that look normal.",
                    "被选中的词元全都变成了 <mask>：BERT 会让 10 % 保持不变、10 % 换成随机词元，"
                    "这样模型对看起来正常的词元也得认真对待。")
    for count, q, en, zh in ((masked, 0.8, "<mask>", "<mask>"), (replaced, 0.1, "a random token", "随机词元"),
                             (unchanged, 0.1, "unchanged", "保持不变")):
        if _z(count, n_sel, q) > 5:
            return fail(f"{100 * count / n_sel:.1f} % of the selected tokens are {en}; expected about {100 * q:.0f} %.",
                        f"被选中的词元中有 {100 * count / n_sel:.1f} % 是{zh}；应约为 {100 * q:.0f} %。")
    random_tokens = inputs[selected & (inputs != ids) & (inputs != _MASK)]
    if torch.isin(random_tokens, torch.tensor(_SPECIAL)).any():
        return fail("A random replacement was a special token (e.g. <pad>): draw from the ordinary tokens only.",
                    "随机替换时抽到了特殊词元（比如 <pad>）：只能从普通词元里抽。")
    return passed(f"Correct: {100 * n_sel / n_ordinary:.1f} % selected, of which {100 * masked / n_sel:.0f} % "
                  f"<mask>, {100 * replaced / n_sel:.0f} % random, {100 * unchanged / n_sel:.0f} % unchanged.",
                  f"正确：选中了 {100 * n_sel / n_ordinary:.1f} %，其中 {100 * masked / n_sel:.0f} % 变成 <mask>，"
                  f"{100 * replaced / n_sel:.0f} % 换成随机词元，{100 * unchanged / n_sel:.0f} % 保持不变。")


@never_raises
def check_masked_accuracy(fn) -> bool:
    """Exercise 2: ``fn(logits (B, T, V), labels (B, T))`` = accuracy over the positions whose label != −100."""
    g = torch.Generator().manual_seed(13)
    logits = torch.randn(4, 9, 12, generator=g)
    labels = torch.full((4, 9), IGNORE_INDEX)
    chosen = torch.rand(4, 9, generator=g) < 0.3
    labels[chosen] = torch.randint(0, 12, (int(chosen.sum()),), generator=g)
    argmax = logits.argmax(-1)
    right = chosen & (torch.arange(9) % 2 == 0)
    labels[right] = argmax[right]  # about half of the scored positions are right
    keep = labels != IGNORE_INDEX
    want = float((argmax[keep] == labels[keep]).float().mean())
    ok, got = attempt(fn, logits.clone(), labels.clone())
    if not ok:
        return False
    try:
        value = float(got)
    except (TypeError, ValueError, RuntimeError):
        return fail(f"Return a number (a float or a 0-d tensor), got {type(got).__name__}.",
                    f"请返回一个数（float 或 0 维张量），实际得到的是 {type(got).__name__}。")
    if abs(value - want) < 1e-6:
        return passed(f"Correct: {value:.3f} on the {int(keep.sum())} scored positions.",
                      f"正确：在 {int(keep.sum())} 个计分位置上准确率为 {value:.3f}。")
    everywhere = float((argmax == labels).float().mean())
    if abs(value - everywhere) < 1e-6:
        return fail("You averaged over every position: keep only those whose label is not −100.",
                    "你对所有位置都求了平均：只应保留标签不等于 −100 的位置。")
    return fail(f"Expected {want:.4f}, got {value:.4f}: argmax over the vocabulary, compare with the label, "
                "average over the positions with label != −100.",
                f"应为 {want:.4f}，实际是 {value:.4f}：在词表维度上取 argmax，与标签比较，"
                "只在标签不等于 −100 的位置上求平均。")


@never_raises
def check_unigram_baseline(fn) -> bool:
    """Exercise 3: ``fn(train_ids, labels, special_ids) -> accuracy`` of always guessing the most frequent
    ordinary training token."""
    train = torch.tensor([0, 0, 0, 0, 2, 7, 7, 7, 8, 8, 9, 3, 3, 3, 3, 3])  # <pad> and <eos> are the most frequent
    labels = torch.tensor([[7, IGNORE_INDEX, 8, 7, IGNORE_INDEX], [9, 7, IGNORE_INDEX, IGNORE_INDEX, 8]])
    ok, got = attempt(fn, train.clone(), labels.clone(), _SPECIAL)
    if not ok:
        return False
    try:
        value = float(got)
    except (TypeError, ValueError, RuntimeError):
        return fail(f"Return a number, got {type(got).__name__}.", f"请返回一个数，实际得到的是 {type(got).__name__}。")
    if abs(value - 0.5) < 1e-6:
        return passed("Correct: the context-free best guess is the most frequent ordinary token.",
                      "正确：不看上下文时，最好的猜法就是最常见的普通词元。")
    if abs(value - 0.0) < 1e-6:
        return fail("0 %: probably you guessed a special token (<pad> or <eos> are the most frequent ids here); "
                    "a masked position is never special, so skip them.",
                    "准确率为 0 %：你大概猜的是特殊词元（这里最常见的 ID 是 <pad> 和 <eos>）；"
                    "被遮住的位置永远不会是特殊词元，所以要跳过它们。")
    if abs(value - 0.3) < 1e-6:
        return fail("You averaged over every position: only those with label != −100 count.",
                    "你对所有位置都求了平均：只有标签不等于 −100 的位置才算数。")
    return fail(f"Expected 0.5, got {value:.4f}: find the most frequent non-special id in train_ids, then the "
                "fraction of the scored labels equal to it.",
                f"应为 0.5，实际是 {value:.4f}：先在 train_ids 里找出最常见的非特殊 ID，"
                "再算计分位置的标签中有多大比例等于它。")
