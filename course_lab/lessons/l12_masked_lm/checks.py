"""Lesson 12 · masked language modelling: the exercise checks.

Each check prints a verdict in the notebook's language and returns True / False; none raises, so the notebook
always runs to the end. The lesson module re-exports them: the notebook calls ``l12.check_...(...)``.
"""

from __future__ import annotations

import math

import torch

from course_utils import mlm
from course_utils.mlm import IGNORE_INDEX
from course_utils.modes import evaluating

from ...exercises import (
    also_right_for,
    as_number,
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    never_raises,
    number_problem,
    passed,
    report,
    type_problem,
    uses_the_generator,
    watching,
)

_V, _MASK, _SPECIAL = 40, 4, (0, 1, 2, 3, 4)


def _z(count: int, trials: int, q: float) -> float:
    return abs(count - trials * q) / math.sqrt(max(trials * q * (1 - q), 1e-12))


# Statistical power of exercise 1's check. A batch of 256 rows × 128 tokens holds about 24,300 ordinary tokens
# (a quarter of each row is padding, one <bos>). At p = 0.15 about 3,650 are selected: the binomial standard error
# of a 10 % share is sqrt(0.1·0.9/3650) = 0.50 points and of the 80 % share 0.66 points, so an 85/7.5/7.5 split is
# 5.0 and 7.6 standard errors away; at p = 0.4 (about 9,700 selected) 8.2 and 12. A selection rate that ignores p
# misses one of the two rates by far more. A correct answer lands beyond Z_MAX = 4.5 with probability about 1e-5
# per share (8 shares and 2 rates are tested).
Z_MAX = 4.5


def _bert_batch(g: torch.Generator, rows: int = 256, cols: int = 128) -> torch.Tensor:
    ids = torch.randint(5, _V, (rows, cols), generator=g)
    ids[:, 0] = 2                                     # <bos>
    ids[:, 3 * cols // 4:] = 0                        # padding
    return ids


def _judge_bert(ids: torch.Tensor, p: float, got) -> tuple[bool, str, str]:
    """Judge one result of exercise 1 at rate ``p``: ``(ok, summary en, summary zh)``; prints the verdict if not."""
    if not (isinstance(got, tuple) and len(got) == 2):
        return fail("Return a pair (inputs, labels).", "请返回一个二元组 (inputs, labels)。"), "", ""
    inputs, labels = got
    for name, t in (("inputs", inputs), ("labels", labels)):
        problem = type_problem(t, ids.shape)
        if problem is not None:
            return fail(f"{name}: {problem[0]}", f"{name}：{problem[1]}"), "", ""
    special = torch.isin(ids, torch.tensor(_SPECIAL))
    selected = labels != IGNORE_INDEX
    if bool(selected.all()):
        return fail("No label is −100: only the selected positions get their original id as the label; every "
                    "other label must be −100, so that the loss ignores it.",
                    "没有一个标签是 −100：只有被选中的位置以原来的 ID 作为标签，其余位置的标签都必须是 −100，"
                    "这样损失才会忽略它们。"), "", ""
    if not torch.equal(labels[selected], ids[selected]):
        return fail("At the selected positions the label must be the *original* token id.",
                    "被选中的位置上，标签必须是*原来的*词元 ID。"), "", ""
    if (selected & special).any():
        return fail("Special tokens (<pad>, <bos>, …) were selected: only ordinary tokens may be.",
                    "特殊词元（<pad>、<bos> 等）被选中了：只有普通词元才能被选中。"), "", ""
    if not torch.equal(inputs[~selected], ids[~selected]):
        return fail("A position that is not selected was changed: leave it as it is (its label is −100).",
                    "没被选中的位置被改动了：应保持原样（它的标签是 −100）。"), "", ""
    n_ordinary, n_sel = int((~special).sum()), int(selected.sum())
    if n_sel == 0:
        return fail("Nothing was selected: select each ordinary position with probability p.",
                    "一个位置都没有选中：每个普通位置应以概率 p 被选中。"), "", ""
    if _z(n_sel, n_ordinary, p) > Z_MAX:
        return fail(f"{100 * n_sel / n_ordinary:.1f} % of the ordinary tokens were selected; expected p = "
                    f"{100 * p:.0f} % (padding and special tokens do not count).",
                    f"普通词元中有 {100 * n_sel / n_ordinary:.1f}% 被选中；应为 p = {100 * p:.0f}%"
                    "（填充和特殊词元不算在内）。"), "", ""
    masked = int((selected & (inputs == _MASK)).sum())
    unchanged = int((selected & (inputs == ids)).sum())
    replaced = n_sel - masked - unchanged
    if masked == n_sel:
        return fail("Every selected token became <mask>: BERT keeps 10 % unchanged and replaces 10 % by a random "
                    "token, so the model must also care about tokens that look normal.",
                    "被选中的词元全都变成了 <mask>：BERT 会让 10% 保持不变、10% 换成随机词元，"
                    "这样模型对看起来正常的词元也得认真对待。"), "", ""
    random_tokens = inputs[selected & (inputs != ids) & (inputs != _MASK)]
    if torch.isin(random_tokens, torch.tensor(_SPECIAL)).any():
        return fail("A random replacement was a special token (e.g. <pad>): draw from the ordinary tokens only.",
                    "随机替换时抽到了特殊词元（比如 <pad>）：只能从普通词元里抽。"), "", ""
    for count, q, en, zh in ((masked, 0.8, "<mask>", "<mask>"), (replaced, 0.1, "a random token", "随机词元"),
                             (unchanged, 0.1, "unchanged", "保持不变")):
        if _z(count, n_sel, q) > Z_MAX:
            return fail(f"At p = {p}: {100 * count / n_sel:.1f} % of the {n_sel} selected tokens are {en}; expected "
                        f"about {100 * q:.0f} % (more than {Z_MAX} standard errors away).",
                        f"p = {p} 时：{n_sel} 个被选中的词元中有 {100 * count / n_sel:.1f}% 是{zh}；应约为 "
                        f"{100 * q:.0f}%（偏离超过 {Z_MAX} 个标准误）。"), "", ""
    return (True, f"{100 * n_sel / n_ordinary:.1f} % selected, of which {100 * masked / n_sel:.0f} % <mask>, "
                  f"{100 * replaced / n_sel:.0f} % random, {100 * unchanged / n_sel:.0f} % unchanged",
            f"选中了 {100 * n_sel / n_ordinary:.1f}%，其中 {100 * masked / n_sel:.0f}% 变成 <mask>，"
            f"{100 * replaced / n_sel:.0f}% 换成随机词元，{100 * unchanged / n_sel:.0f}% 保持不变")


@never_raises
def check_bert_masking(fn) -> bool:
    """Exercise 1: ``fn(ids, mask_id, vocab_size, special_ids, p, generator) -> (inputs, labels)`` follows BERT:
    p of the ordinary tokens selected; of those 80 % ``<mask>``, 10 % random, 10 % unchanged; labels −100
    elsewhere; special tokens never selected; every random number drawn from ``generator``. Judged at two rates
    on a drawn batch (power: see :data:`Z_MAX`)."""
    g = fresh_generator()
    ids = _bert_batch(g)
    summaries = []
    for p in (0.15, 0.4):
        with watching(fn, [(mlm, "mask_tokens")]) as calls:
            ok, got = attempt(fn, ids.clone(), _MASK, _V, _SPECIAL, p, torch.Generator().manual_seed(fresh_int(
                0, 2**31, g)))
        if not ok:
            return False
        if calls:
            return fail("You called mlm.mask_tokens: that is the library function this exercise asks you to write. "
                        "Draw the selection and the 80/10/10 split yourself with torch.rand and torch.where.",
                        "你调用了 mlm.mask_tokens：本题要你自己写的正是这个库函数。"
                        "请用 torch.rand 和 torch.where 自己抽取被选中的位置，并完成 80/10/10 的划分。")
        ok, en, zh = _judge_bert(ids, p, got)
        if not ok:
            return False
        summaries.append((p, en, zh))
    small = _bert_batch(g, 8, 32)
    if not uses_the_generator(fn, lambda gen: (small.clone(), _MASK, _V, _SPECIAL, 0.3, gen)):
        return False
    return passed("Correct: " + "; ".join(f"p = {p}: {en}" for p, en, _ in summaries) + ".",
                  "正确：" + "；".join(f"p = {p}：{zh}" for p, _, zh in summaries) + "。")


def _unigram_accuracy(train: torch.Tensor, labels: torch.Tensor) -> float:
    """The check's reference: accuracy on the scored labels of the most frequent ordinary training id (ties: the
    smallest id, as torch.bincount().argmax())."""
    counts = torch.bincount(train, minlength=_V).float()
    counts[list(_SPECIAL)] = -1
    scored = labels[labels != IGNORE_INDEX]
    return float((scored == counts.argmax()).float().mean())


@never_raises
def check_unigram_baseline(fn) -> bool:
    """Exercise 4: ``fn(train_ids, labels, special_ids) -> accuracy`` of always guessing the most frequent
    ordinary **training** token.

    The fixed case makes the most frequent *label* (8) differ from the most frequent training token (7), so that
    guessing from the evaluation labels (a peek at the answers) is told apart from the baseline."""
    train = torch.tensor([0, 0, 0, 0, 2, 7, 7, 7, 8, 8, 9, 3, 3, 3, 3, 3])  # <pad> and <eos> are the most frequent
    labels = torch.tensor([[7, IGNORE_INDEX, 8, 8, IGNORE_INDEX], [9, 8, IGNORE_INDEX, IGNORE_INDEX, 8]])
    with watching(fn, [(mlm, "unigram_baseline")]) as calls:
        ok, got = attempt(fn, train.clone(), labels.clone(), _SPECIAL)
    if not ok:
        return False
    if calls:
        return fail("You called mlm.unigram_baseline: count the tokens yourself (torch.bincount), leave out the "
                    "special ids, and score the labels that are not −100.",
                    "你调用了 mlm.unigram_baseline：请自己数词元（torch.bincount），去掉特殊 ID，"
                    "再在标签不等于 −100 的位置上计分。")
    value, problem = as_number(got)
    if problem:
        return report(problem, "Return a number", "请返回一个数")
    want = _unigram_accuracy(train, labels)                       # 1/6: the guess is 7
    if abs(value - want) < 1e-6:
        g = fresh_generator()                                  # one drawn case too: no table of the case passes
        while True:                                            # ... whose answer is not 1/6 (a table's fallback)
            n, favourite = fresh_int(20, 200, g), fresh_int(5, _V, g)    # a planted favourite: no tie for the top
            other = 5 + (favourite - 5 + fresh_int(1, _V - 5, g)) % (_V - 5)   # an ordinary id, not the favourite
            train2 = torch.cat([torch.randint(0, _V, (n,), generator=g), torch.full((n // 5 + 3,), favourite)])
            labels2 = torch.randint(5, _V, (fresh_int(1, 4, g), 8), generator=g)
            labels2[:, ::2] = other                            # the most frequent label is not the favourite
            labels2[torch.rand(labels2.shape, generator=g) < 0.3] = IGNORE_INDEX
            labels2[0, 1] = favourite
            if abs(_unigram_accuracy(train2, labels2) - want) > 1e-6:
                break
        if not also_right_for(fn, (train2, labels2, _SPECIAL), _unigram_accuracy(train2, labels2), number_problem):
            return False
        return passed("Correct: the context-free best guess is the most frequent ordinary token.",
                      "正确：不看上下文时，最好的猜法就是最常见的普通词元。")
    scored = labels[labels != IGNORE_INDEX]
    if abs(value - float((scored == 8).float().mean())) < 1e-6:
        return fail("You guessed the most frequent *label*: that peeks at the answers. The baseline guesses the most "
                    "frequent ordinary token of train_ids, without looking at the evaluation labels.",
                    "你猜的是最常见的*标签*：这等于偷看了答案。基线猜的是 train_ids 里最常见的普通词元，"
                    "不看评估用的标签。")
    if abs(value - 0.0) < 1e-6:
        return fail("0 %: probably you guessed a special token (<pad> or <eos> are the most frequent ids here); "
                    "a masked position is never special, so skip them.",
                    "准确率为 0%：你大概猜的是特殊词元（这里最常见的 ID 是 <pad> 和 <eos>）；"
                    "被遮住的位置永远不会是特殊词元，所以要跳过它们。")
    if abs(value - float((labels == 7).float().mean())) < 1e-6:
        return fail("You averaged over every position: only those with label != −100 count.",
                    "你对所有位置都求了平均：只有标签不等于 −100 的位置才算数。")
    return fail(f"Expected {want:.4f}, got {value:.4f}: find the most frequent non-special id in train_ids, then the "
                "fraction of the scored labels equal to it.",
                f"应为 {want:.4f}，实际是 {value:.4f}：先在 train_ids 里找出最常见的非特殊 ID，"
                "再算计分位置的标签中有多大比例等于它。")


# --- exercise 2: whole-word masking -----------------------------------------------------------------------------

_SPACE = 5


def _word_rows(seed: int, rows: int = 256, length: int = 64) -> torch.Tensor:
    """Rows of ``<bos>`` + words of 1-8 letters separated by one space, right-padded with ``<pad>`` (id 0)."""
    g = torch.Generator().manual_seed(seed)
    out = torch.zeros(rows, length, dtype=torch.long)
    for r in range(rows):
        end = int(torch.randint(40, length + 1, (), generator=g))
        row = [2]
        while len(row) < end:
            n = int(torch.randint(1, 9, (), generator=g))
            row += torch.randint(_SPACE + 1, _V, (n,), generator=g).tolist() + [_SPACE]
        out[r, :end] = torch.tensor(row[:end])
    return out


def _word_numbers(ids: torch.Tensor, space_id: int, special_ids) -> tuple[torch.Tensor, torch.Tensor]:
    """``(in_word (B, T) bool, word (B, T))``: which positions are letters, and the number of their word in the row."""
    in_word = ~torch.isin(ids, torch.tensor([space_id, *special_ids]))
    starts = in_word & ~torch.cat([torch.zeros_like(in_word[:, :1]), in_word[:, :-1]], dim=1)
    return in_word, starts.cumsum(dim=1)


@never_raises
def check_whole_word_masking(fn) -> bool:
    """Exercise 2: ``fn(ids, p, space_id, special_ids, generator) -> (B, T) bool``: each word (a run of letters
    between spaces) is selected with probability p, and then all of its letters; spaces and specials never.

    Selecting characters one by one (BERT's original per-token masking, or ``mlm.mask_tokens``) is the shortcut
    ruled out; selecting a word when any of its letters is drawn is the common mistake (long words win).
    """
    ids, p = _word_rows(21), 0.3
    with watching(fn, [(mlm, "mask_tokens")]) as calls:
        ok, got = attempt(fn, ids.clone(), p, _SPACE, _SPECIAL, torch.Generator().manual_seed(0))
        ok_all, got_all = (attempt(fn, ids.clone(), 1.0, _SPACE, _SPECIAL, torch.Generator().manual_seed(1))
                           if ok else (False, None))
    if not (ok and ok_all):
        return False
    if calls:
        return fail("You called mlm.mask_tokens: it selects single characters. Whole-word masking makes one "
                    "decision per word: number the words, draw one number per word, hide all of its letters.",
                    "你调用了 mlm.mask_tokens：它逐个字符地选择。整词遮盖对每个单词只做一次决定："
                    "先给单词编号，每个单词抽一个随机数，再把它的所有字母都遮住。")
    for result in (got, got_all):
        problem = type_problem(result, ids.shape, torch.bool)
        if problem is not None:
            return fail(f"selection: {problem[0]}", f"选择结果：{problem[1]}")
    in_word, word = _word_numbers(ids, _SPACE, _SPECIAL)
    if (got & ~in_word).any() or (got_all & ~in_word).any():
        return fail("A space or a special token (<bos>, <pad>, ...) was selected: only the letters of a word may be "
                    "hidden; the space after a word belongs to no word.",
                    "空格或特殊词元（<bos>、<pad> 等）被选中了：只能遮住单词里的字母；单词后面的空格不属于任何单词。")
    if not torch.equal(got_all, in_word):
        return fail("With p = 1 every letter of every word must be selected.",
                    "p = 1 时，每个单词的每个字母都必须被选中。")
    if not uses_the_generator(fn, lambda gen: (ids.clone(), p, _SPACE, _SPECIAL, gen)):
        return False
    # per word: how many of its letters are selected, out of how many
    key = (torch.arange(ids.size(0))[:, None] * (ids.size(1) + 1) + word)[in_word]
    size = torch.bincount(key)
    hidden = torch.bincount(key, weights=got[in_word].float())
    real = size > 0
    size, hidden = size[real], hidden[real]
    if ((hidden > 0) & (hidden < size)).any():
        return fail("Some words are only partly hidden: you made one decision per character (BERT's original "
                    "per-token masking, like select_positions above). Whole-word masking makes one decision per "
                    "word and hides all of its letters, so the model cannot spell a word from its visible half.",
                    "有些单词只被遮住了一部分：你是逐个字符做决定的（BERT 最初的逐词元遮盖，和上面的 select_positions "
                    "一样）。整词遮盖对每个单词只做一次决定，并遮住它的所有字母，这样模型就不能靠看得见的半个单词把它拼出来。")
    chosen = hidden == size
    n_words, n_chosen = len(size), int(chosen.sum())
    if _z(n_chosen, n_words, p) > 5:
        long_bias = float(size[chosen].float().mean()) - float(size.float().mean())
        if long_bias > 0.5:
            return fail(f"{100 * n_chosen / n_words:.1f} % of the words were hidden (expected p = {100 * p:.0f} %), "
                        "and the hidden ones are longer than average: long words are selected more often. Draw one "
                        "number per word, not one per letter.",
                        f"被遮住的单词占 {100 * n_chosen / n_words:.1f}%（应为 p = {100 * p:.0f}%），而且被遮住的单词"
                        "比平均更长：长单词被选中的机会更多。应该每个单词抽一个随机数，而不是每个字母抽一个。")
        return fail(f"{100 * n_chosen / n_words:.1f} % of the words were hidden; expected p = {100 * p:.0f} %.",
                    f"被遮住的单词占 {100 * n_chosen / n_words:.1f}%；应为 p = {100 * p:.0f}%。")
    return passed(f"Correct: {n_chosen} of {n_words} words hidden ({100 * n_chosen / n_words:.1f} %), each one "
                  "entirely.",
                  f"正确：{n_words} 个单词中遮住了 {n_chosen} 个（{100 * n_chosen / n_words:.1f}%），每个都整个遮住。")


# --- exercise 3: accuracy at a chosen mask rate ---------------------------------------------------------------------


def _specials(tok) -> list[int]:
    return [tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.mask_id]


def _scores_at(model, tok, windows, p, seed) -> tuple[float, float]:
    """``(accuracy on the selected positions, accuracy over every position)`` with the windows masked at rate p."""
    inputs, labels = mlm.mask_tokens(windows, tok.vocab_size, tok.mask_id, _specials(tok), p=p,
                                     generator=torch.Generator().manual_seed(seed))
    with evaluating(model):
        guess = model(inputs).argmax(-1)                                   # (B, T)
    keep = labels != IGNORE_INDEX
    return float((guess[keep] == labels[keep]).float().mean()), float((guess == windows).float().mean())


class _CopyModel(torch.nn.Module):
    """Predicts the token it sees: a stand-in model when the check is called without one."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return 5.0 * torch.nn.functional.one_hot(ids, self.vocab_size).float()      # (B, T, V)


@never_raises
def check_accuracy_at(fn, model=None, windows: torch.Tensor | None = None, tok=None) -> bool:
    """Exercise 3: ``fn(model, windows, p, generator)`` masks ``windows`` at rate p with ``mlm.mask_tokens`` (that
    generator) and returns the accuracy on the selected positions.

    Ignoring p (reusing the validation batch masked once at 15 %, or ``evaluate``) is the shortcut ruled out;
    scoring every position is the common mistake of the lesson.
    """
    if tok is None:
        from course_utils.tokenizers import CharTokenizer

        tok = CharTokenizer.from_text("to be, or not to be: that is the question")
    if model is None:
        model = _CopyModel(tok.vocab_size)
    if windows is None:
        windows = torch.randint(5, tok.vocab_size, (32, 24), generator=fresh_generator())
    rates, got = (0.15, 0.5), []
    for i, p in enumerate(rates):
        ok, value = attempt(fn, model, windows.clone(), p, torch.Generator().manual_seed(100 + i))
        if not ok:
            return False
        number, problem = as_number(value)
        if problem:
            return report(problem, "Return a number (a float or a 0-d tensor)", "请返回一个数（float 或 0 维张量）")
        got.append(number)
    want = [_scores_at(model, tok, windows, p, 100 + i) for i, p in enumerate(rates)]
    if all(abs(g - w[0]) < 1e-6 for g, w in zip(got, want)):
        return passed(f"Correct: {got[0]:.1%} at p = 0.15, {got[1]:.1%} at p = 0.5 on these windows.",
                      f"正确：在这些窗口上，p = 0.15 时为 {got[0]:.1%}，p = 0.5 时为 {got[1]:.1%}。")
    if abs(got[0] - got[1]) < 1e-9 and abs(got[1] - want[1][0]) > 1e-6:
        return fail("Your answer does not change with p: mask the windows you are given, at the rate p, with the "
                    "generator you are given (reusing dev_in or evaluate(), masked once at 15 %, measures nothing "
                    "new).",
                    "你的结果不随 p 变化：要用给定的 generator，按比例 p 遮盖传进来的窗口"
                    "（直接用只按 15% 遮盖过一次的 dev_in 或 evaluate()，什么新东西也测不出来）。")
    for g, (p, w) in zip(got, zip(rates, want)):
        if abs(g - w[1]) < 1e-6 and abs(g - w[0]) > 1e-6:
            return fail(f"p = {p}: you scored every position ({g:.1%}): most of them are visible and only need "
                        "copying. Score the positions whose label is not −100.",
                        f"p = {p}：你在所有位置上计分（{g:.1%}）：其中大多数位置看得见，照抄就行。"
                        "只应在标签不等于 −100 的位置上计分。")
    return fail(f"Expected {want[0][0]:.4f} at p = 0.15 and {want[1][0]:.4f} at p = 0.5, got {got[0]:.4f} and "
                f"{got[1]:.4f}: mask with mlm.mask_tokens(windows, tok.vocab_size, tok.mask_id, SPECIAL, p=p, "
                "generator=generator), run the model, and compare the argmax with the labels where they are not −100.",
                f"p = 0.15 时应为 {want[0][0]:.4f}，p = 0.5 时应为 {want[1][0]:.4f}，"
                f"实际是 {got[0]:.4f} 和 {got[1]:.4f}："
                "用 mlm.mask_tokens(windows, tok.vocab_size, tok.mask_id, SPECIAL, p=p, generator=generator) 遮盖，"
                "运行模型，再在标签不等于 −100 的位置上比较 argmax 与标签。")
