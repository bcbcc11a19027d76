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
    as_number,
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    never_raises,
    passed,
    report,
    type_problem,
    uses_the_generator,
    watching,
)
from .expected import (
    _backoff,
    _level_guesses,
    _near,
    _one_uniform,
    _prose_case,
    _shares_text,
    _three_numbers,
    _two_draws,
)

_V, _SPECIAL = 40, (0, 1, 2, 3, 4)


def _z(count: int, trials: int, q: float) -> float:
    return abs(count - trials * q) / math.sqrt(max(trials * q * (1 - q), 1e-12))


# --- exercise 1: the shares of the corruption, one uniform number or two draws -------------------------------------

def _judge_shares(values, p_mask: float, p_random: float, two_draws: bool) -> bool:
    """True when ``values`` are the shares of this recipe; else print what the mistake looks like."""
    want = (_two_draws if two_draws else _one_uniform)(p_mask, p_random)
    if _near(values, want):
        return True
    case = f"corruption_shares({p_mask:.4g}, {p_random:.4g}, two_draws={two_draws})"
    head_en, head_zh = f"{case} returned {_shares_text(values)}", f"{case} 返回了 {_shares_text(values)}"
    other = (_one_uniform if two_draws else _two_draws)(p_mask, p_random)
    if _near([v / 100 for v in values], want, 1e-4):
        return fail(f"{head_en}: these are percentages; return fractions of the selected tokens (they add up to 1).",
                    f"{head_zh}：这是百分数；请返回占被选中词元的比例（三者之和为 1）。")
    if two_draws and _near(values, other):
        return fail(f"{head_en}: you took p_random of *all* the selected tokens. In the two-draw recipe the second "
                    "draw only sees the tokens the first one did not mask, a share 1 − p_mask of them: random = "
                    "(1 − p_mask) · p_random, and unchanged is what is left of that rest.",
                    f"{head_zh}：你取的是*全部*被选中词元的 p_random。两次抽取的做法里，"
                    "第二次只作用于第一次没有遮盖的词元，它们只占 1 − p_mask：random = (1 − p_mask) · p_random，"
                    "unchanged 是这部分剩下的。")
    if not two_draws and _near(values, other):
        return fail(f"{head_en}: that is the two-draw recipe. With one uniform number u in [0, 1) the cuts are at "
                    "p_mask and p_mask + p_random, so random gets p_random of all the selected tokens.",
                    f"{head_zh}：这是两次抽取的结果。只抽一个 [0, 1) 上的均匀随机数 u 时，切点在 p_mask 和 "
                    "p_mask + p_random，所以 random 占全部被选中词元的 p_random。")
    if sorted(values) == sorted(want) or _near(sorted(values), sorted(want)):
        return fail(f"{head_en}: the right three numbers in the wrong order. Return (mask, random, unchanged), "
                    f"here {_shares_text(want)}.",
                    f"{head_zh}：三个数是对的，但顺序错了。请按 (mask, random, unchanged) 的顺序返回，"
                    f"这里应为 {_shares_text(want)}。")
    if _near(values, want, 0.006):
        return fail(f"{head_en}: close to the exact {_shares_text(want)} but not equal: this looks like a "
                    "simulation (counting random draws) or a rounded answer. Derive the exact shares from p_mask "
                    "and p_random; a simulation is how you check the formula, not the formula.",
                    f"{head_zh}：接近精确值 {_shares_text(want)}，但并不相等：看起来像是模拟（数随机抽样的结果）"
                    "或四舍五入后的结果。请由 p_mask 和 p_random 推导出精确的比例；"
                    "模拟是用来验证公式的，不是公式本身。")
    if abs(sum(values) - 1.0) > 1e-6:
        return fail(f"{head_en}: these add up to {sum(values):.4g}, not 1. Every selected token ends up in exactly one "
                    "of the three groups, so the shares must add up to 1 (is unchanged what is left after mask "
                    "*and* random?).",
                    f"{head_zh}：三者之和是 {sum(values):.4g}，不是 1。每个被选中的词元恰好落在三组中的一组，"
                    "所以三个比例之和必须为 1（unchanged 是不是减去了 mask *和* random 之后剩下的？）。")
    return fail(f"{head_en}; expected {_shares_text(want)} (mask, random, unchanged).",
                f"{head_zh}；应为 {_shares_text(want)} (mask, random, unchanged)。")


@never_raises
def check_corruption_shares(fn) -> bool:
    """Exercise 1: ``fn(p_mask, p_random, two_draws) -> (mask, random, unchanged)``, the shares of the selected
    tokens that end up as ``<mask>``, as a random token, and unchanged.

    ``two_draws=False``: one uniform number per selected token, cut at p_mask and p_mask + p_random (BERT's recipe,
    ``mlm.mask_tokens``): ``(p_mask, p_random, 1 − p_mask − p_random)``. ``two_draws=True``: mask with probability
    p_mask, then an independent second draw randomises p_random of the rest: ``(p_mask, (1 − p_mask) p_random,
    (1 − p_mask)(1 − p_random))``, 80 / 2 / 18 for BERT's numbers. Judged at BERT's 0.8 / 0.1 and at rates drawn
    afresh on every run, to 1e-6: a simulation is close but not exact, and is told so. Any three numbers are
    accepted: a tuple or list of floats or 0-d tensors, or a tensor of three values."""
    g = fresh_generator()
    p_mask = round(0.3 + 0.6 * float(torch.rand((), generator=g)), 4)
    p_random = round(0.05 + (0.9 - p_mask) * float(torch.rand((), generator=g)), 4)
    cases = [(0.8, 0.1, False), (0.8, 0.1, True), (p_mask, p_random, True), (p_mask, p_random, False)]
    for pm, pr, two in cases:
        ok, got = attempt(fn, pm, pr, two)
        if not ok:
            return False
        values, problem = _three_numbers(got)
        if problem:
            return report(problem, f"corruption_shares({pm:.4g}, {pr:.4g}, two_draws={two})",
                          f"corruption_shares({pm:.4g}, {pr:.4g}, two_draws={two})")
        if not _judge_shares(values, pm, pr, two):
            return False
    one, two = _one_uniform(0.8, 0.1), _two_draws(0.8, 0.1)
    return passed(f"Correct. At BERT's 0.8 / 0.1, one uniform number gives {_shares_text(one)} and two draws "
                  f"{_shares_text(two)}; also right at p_mask = {p_mask:.4g}, p_random = {p_random:.4g}.",
                  f"正确。按 BERT 的 0.8 / 0.1，只抽一个均匀随机数得到 {_shares_text(one)}，抽两次得到 "
                  f"{_shares_text(two)}；在 p_mask = {p_mask:.4g}、p_random = {p_random:.4g} 时也对。")

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
    # Fresh generator seeds each run: the masks differ every time, so no table of a past run's inputs passes.
    rates, got, seed = (0.15, 0.5), [], fresh_int(0, 2**31, fresh_generator())
    for i, p in enumerate(rates):
        ok, value = attempt(fn, model, windows.clone(), p, torch.Generator().manual_seed(seed + i))
        if not ok:
            return False
        number, problem = as_number(value)
        if problem:
            return report(problem, "Return a number (a float or a 0-d tensor)", "请返回一个数（float 或 0 维张量）")
        got.append(number)
    want = [_scores_at(model, tok, windows, p, seed + i) for i, p in enumerate(rates)]
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


# --- exercise 4: predict, then measure, the context table at K = 4 ----------------------------------------------


def _table_problem(value: float, train, inputs, labels, K: int, guesses, truth) -> bool:
    """The verdict for a wrong accuracy at K: which plausible mistake gives exactly that number."""
    want = _backoff(guesses, K, truth)
    head_en, head_zh = f"K = {K}: you measured {value:.4f}", f"K = {K}：你测得 {value:.4f}"
    for k in range(K):
        if abs(value - _backoff(guesses, k, truth)) < 1e-6:
            if k == 0 and abs(value - _backoff(guesses, K, truth, upwards=True)) < 1e-6:
                return fail(f"{head_en}, the unigram guess: the back-off ran upwards, and k = 0 (which always "
                            "answers) came first. Go from K down to 0: range(K, -1, -1).",
                            f"{head_zh}，也就是一元基线的猜法：你的回退是从小往大走的，k = 0（它总能给出答案）"
                            "排在了最前面。应该从 K 往下退到 0：range(K, -1, -1)。")
            return fail(f"{head_en}, the accuracy of the {k} + {k} table, not of {K} + {K}: start the back-off at K "
                        f"(range(K, -1, -1)) and build the table for k = K too (the lesson's tables stop at 3).",
                        f"{head_zh}，这是 {k} + {k} 计数表的准确率，不是 {K} + {K} 的：回退要从 K 开始"
                        f"（range(K, -1, -1)），k = K 的计数表也要建（本课的 tables 只到 3）。")
    if abs(value - float((guesses[K] == truth).float().mean())) < 1e-6:
        return fail(f"{head_en}: only the positions whose {K} + {K} context occurred in the training text got a guess. "
                    "The others must back off to K − 1, ..., 0, as in the lesson's loop.",
                    f"{head_zh}：只有 {K} + {K} 上下文在训练文本里出现过的位置才得到了猜测。"
                    "其余位置必须像本课的循环那样退到 K − 1、……、0。")
    original = torch.where(labels != IGNORE_INDEX, labels, inputs)
    if abs(value - _backoff(_level_guesses(train, original, labels, K)[0], K, truth)) < 1e-6:
        return fail(f"{head_en}: you read the neighbours from the original text. A neighbour that is itself hidden "
                    "behind <mask> must stay hidden (read them from inputs, as the model does).",
                    f"{head_zh}：你是从原始文本里读邻居的。本身也被换成 <mask> 的邻居必须保持遮住（要像模型一样从 "
                    "inputs 里读）。")
    return fail(f"{head_en}; expected {want:.4f} (the {K} + {K} table with back-off, on the positions whose label "
                "is not −100, neighbours read from inputs).",
                f"{head_zh}；应为 {want:.4f}（带回退的 {K} + {K} 计数表，在标签不等于 −100 的位置上，"
                "邻居从 inputs 里读）。")


@never_raises
def check_table_accuracy(fn, train_ids: torch.Tensor | None = None, inputs: torch.Tensor | None = None,
                         labels: torch.Tensor | None = None) -> bool:
    """Exercise 4: ``fn(K, train_ids, inputs, labels) -> accuracy`` of the K + K context table with back-off (K,
    K − 1, ..., 0) trained on ``train_ids``, scored where ``labels != −100``, neighbours read from ``inputs`` (each
    row its own window).

    Judged at K = 4 on the notebook's data (without them: a drawn case of the bundled prose) against the check's own
    computation (:func:`_level_guesses`), then on a slice of the training text and a subset of the windows drawn
    afresh on every run, at a drawn K in 1..3: an answer that reads the notebook's tables or dev_in instead of its
    arguments is told so. On success it prints the measurement the prediction was about: 4 + 4 against 3 + 3, and
    how many positions found their whole context."""
    K = 4
    g = fresh_generator()
    if train_ids is None or inputs is None or labels is None:
        train_ids, inputs, labels = _prose_case(g)
    ok, got = attempt(fn, K, train_ids, inputs, labels)
    if not ok:
        return False
    value, problem = as_number(got)
    if problem:
        return report(problem, "Return the accuracy (a number)", "请返回准确率（一个数）")
    guesses, truth = _level_guesses(train_ids, inputs, labels, K)
    if abs(value - _backoff(guesses, K, truth)) > 1e-6:
        return _table_problem(value, train_ids, inputs, labels, K, guesses, truth)
    for _ in range(20):  # redrawn until the slice's answer differs from the whole data's at that K (small data)
        rows = torch.randperm(inputs.size(0), generator=g)[:max(1, inputs.size(0) // 2)]
        if not bool((labels[rows] != IGNORE_INDEX).any()):
            rows = torch.arange(inputs.size(0))
        length = fresh_int(len(train_ids) // 4, len(train_ids) // 2 + 1, g)
        start = fresh_int(0, len(train_ids) - length + 1, g)
        k2 = fresh_int(1, K, g)
        args = (k2, train_ids[start:start + length].clone(), inputs[rows].clone(), labels[rows].clone())
        guesses2, truth2 = _level_guesses(*args[1:], k2)
        want2 = _backoff(guesses2, k2, truth2)
        if abs(want2 - _backoff(guesses, k2, truth)) > 1e-6:  # guesses: every level 0..K of the whole data
            break
    ok, got2 = attempt(fn, *args)
    if not ok:
        return False
    value2, problem = as_number(got2)
    if problem:
        return report(problem, "Return the accuracy (a number)", "请返回准确率（一个数）")
    if abs(value2 - want2) > 1e-6:
        if abs(value2 - value) < 1e-9:
            return fail(f"Right at K = 4 on the notebook's data, but the same {value:.4f} again for K = {k2} on "
                        f"{length:,} other training characters and {len(rows)} of the windows: use the arguments "
                        "(K, train_ids, inputs, labels), not the notebook's tables, dev_in, rows or cols.",
                        f"在笔记本的数据上 K = 4 是对的，但换成 K = {k2}、另取 {length:,} 个训练字符和其中 {len(rows)} "
                        f"个窗口后，结果仍是 {value:.4f}：请用参数（K、train_ids、inputs、labels）来算，"
                        "不要用笔记本里的 tables、dev_in、rows 或 cols。")
        return fail(f"Right at K = 4 on the notebook's data, but for K = {k2} on {length:,} other training characters "
                    f"and {len(rows)} of the windows you measured {value2:.4f}, expected {want2:.4f}: use the "
                    "arguments (K, train_ids, inputs, labels) everywhere, not the notebook's tables, dev_in, rows or "
                    "cols.",
                    f"在笔记本的数据上 K = 4 是对的，但换成 K = {k2}、另取 {length:,} 个训练字符和其中 {len(rows)} "
                    f"个窗口后，你测得 {value2:.4f}，应为 {want2:.4f}：请处处使用参数（K、train_ids、inputs、labels），"
                    "不要用笔记本里的 tables、dev_in、rows 或 cols。")
    three = _backoff(guesses, 3, truth)
    whole = [float((guesses[k] >= 0).float().mean()) for k in (3, 4)]
    return passed(f"Correct: 4 + 4 fills {value:.1%} of the {len(truth):,} blanks, 3 + 3 {three:.1%}. Why so close? "
                  f"Only {whole[1]:.1%} of them find their 8 neighbours in the training text (6 neighbours: "
                  f"{whole[0]:.1%}); the rest back off to a shorter context.",
                  f"正确：4 + 4 填对了 {len(truth):,} 个空中的 {value:.1%}，3 + 3 填对了 {three:.1%}。为什么这么接近？"
                  f"只有 {whole[1]:.1%} 的位置能在训练文本里找到它的 8 个邻居（6 个邻居：{whole[0]:.1%}）；"
                  "其余的都退回了更短的上下文。")
