"""Lesson 11 · GPT: the exercise checks (they print a verdict, return True / False and never raise).

The lesson module re-exports them; this module never imports the lesson's ``__init__``."""

from __future__ import annotations

import torch

from ...exercises import (
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    never_raises,
    passed,
    type_problem,
    watching,
    watching_installed,
)

# Ready-made sampling filters of an installed package that a student may reach for (watched once imported).
_INSTALLED_FILTERS = (("transformers.generation.logits_process",
                       ("MinPLogitsWarper", "TopPLogitsWarper", "TopKLogitsWarper", "EpsilonLogitsWarper")),
                      ("transformers", ("MinPLogitsWarper", "TopPLogitsWarper", "TopKLogitsWarper")))

# ------------------------------------------------------------------------------------------------------------
# Exercise checks: print a verdict, return True / False, never raise
# ------------------------------------------------------------------------------------------------------------


def _cases_logits(seed: int):
    g = torch.Generator().manual_seed(seed)
    return [3 * torch.randn(4, 11, generator=g), torch.tensor([[60.0, 58.0, 10.0, -40.0, 0.5]]),
            torch.randn(2, 3, 7, generator=g)]


def _gpt_block_params(d_model: int, d_ff: int) -> int:
    """Parameters of one block of ``course_utils.GPT``, counted on the ``meta`` device (nothing is allocated)."""
    from course_utils.models import GPT

    with torch.device("meta"):
        block = GPT(2, max_len=2, n_layers=1, n_heads=1, d_model=d_model, d_ff=d_ff).blocks.layers[0]
    return sum(p.numel() for p in block.parameters())


def _counting_targets() -> list:
    """What counting from a module goes through: building one (``nn.Module.__init__``, whatever the class), and
    every route to the parameters of an existing one (the trained model's): the parameter iterators,
    ``state_dict``, and the module iterators that lead to each submodule's ``_parameters``."""
    return [(torch.nn, "Module")] + [(torch.nn.Module, name) for name in (
        "parameters", "named_parameters", "state_dict", "modules", "named_modules", "children", "named_children")]


@never_raises
def check_gpt_block_params(fn) -> bool:
    """Exercise 1: ``fn(d_model, d_ff)`` = the exact parameter count of one GPT block of ``course_utils``, by formula.

    Building a block (or taking the trained model's) and summing ``p.numel()`` over ``.parameters()`` is the
    shortcut ruled out: it is how the answer is *checked*, not derived. The rule of thumb 12·d² (weights only) is
    the common mistake: it forgets biases and norms.
    """
    results = []
    with watching(fn, _counting_targets()) as calls:
        g = fresh_generator()
        for d, d_ff in ((64, 256), (48, 100), (384, 1536), (4 * fresh_int(1, 129, g), fresh_int(1, 2049, g))):
            ok, got = attempt(fn, d, d_ff)
            if not ok:
                return False
            results.append((d, d_ff, got))
    if calls:
        return fail("You counted the parameters of a built module (.parameters()): that is how the answer is checked, "
                    "not derived. Write the count as a formula in d_model and d_ff, from the shapes of the weights.",
                    "你数的是一个已构建模块的参数（.parameters()）：那是用来验证答案的办法，不是推导。"
                    "请根据各个权重的形状，写出一个关于 d_model 和 d_ff 的公式。")
    for d, d_ff, got in results:
        want = _gpt_block_params(d, d_ff)
        if got == want:
            continue
        if got in (12 * d * d, 4 * d * d + 2 * d * d_ff):
            return fail(f"d_model={d}, d_ff={d_ff}: {got:,} counts the weight matrices only (the 12·d² rule of "
                        "thumb). Count the biases of the four projections and of the two FFN layers, and the γ and "
                        "β of both LayerNorms.",
                        f"d_model={d}、d_ff={d_ff}：{got:,} 只数了权重矩阵（即 12·d² 这个经验公式）。"
                        "还要数四个投影和两层前馈网络的偏置，以及两个层归一化的 γ 和 β。")
        if got == want - 4 * d:
            return fail("Almost: you forgot the two LayerNorms (γ and β, d numbers each).",
                        "差一点：你漏掉了两个层归一化（γ 和 β，各 d 个数）。")
        return fail(f"d_model={d}, d_ff={d_ff}: expected {want:,}, got {got}. Count Q, K, V, O (d×d + d each), the "
                    "FFN (d×d_ff + d_ff, then d_ff×d + d) and two LayerNorms (2d each).",
                    f"d_model={d}、d_ff={d_ff}：应为 {want:,}，实际是 {got}。数一数 Q、K、V、O（各 d×d + d）、"
                    "前馈网络（d×d_ff + d_ff，再加 d_ff×d + d）和两个层归一化（各 2d）。")
    return passed("Correct: with d_ff = 4d a block has about 12·d² parameters; the biases and norms are the 9d + d_ff.",
                  "正确：d_ff = 4d 时一个块约有 12·d² 个参数；偏置和归一化就是多出来的 9d + d_ff。")


def _filter_targets() -> list:
    """The ready-made filters a student might call instead of writing one: the library's and the lesson's."""
    import sys

    from course_utils import sampling

    lesson = sys.modules[__package__]    # the names the notebook reaches as l11.*, looked up when the check runs
    return [(sampling, "top_k_filter"), (sampling, "top_p_filter"), (sampling, "sampling_distribution"),
            (sampling, "sample_next"), (lesson, "top_k_filter"), (lesson, "top_p_filter"),
            (lesson, "sampling_distribution"), (sys.modules[__name__], "_min_p_filter")]


def _called_a_filter(calls) -> bool:
    names = ", ".join(sorted(set(calls)))
    return fail(f"You called {names}: write the filter yourself (softmax, sort / cumsum or amax, masked_fill); a "
                "ready-made filter teaches nothing about how it decides which tokens to keep.",
                f"你调用了 {names}：请自己写出这个过滤器（softmax、sort / cumsum 或 amax、masked_fill）；"
                "直接调用现成的过滤器，学不到它是怎样决定保留哪些词元的。")


def _returned_probabilities(got) -> bool:
    return bool((got >= 0).all()) and torch.allclose(got.float().sum(-1), torch.ones(got.shape[:-1]), atol=1e-4)


def _min_p_filter(logits: torch.Tensor, p_base: float) -> torch.Tensor:
    """min-p filtering: keep the tokens whose probability is at least ``p_base`` times the best one's."""
    probs = torch.softmax(logits.float(), dim=-1)
    threshold = p_base * probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(probs < threshold, float("-inf"))


@never_raises
def check_min_p(fn) -> bool:
    """Exercise 2: ``fn(logits, p_base)`` keeps the tokens with probability ≥ p_base · (the largest probability).

    Calling a ready-made filter (``course_utils.sampling``, or this module's reference) is the shortcut ruled
    out; an absolute threshold (probability ≥ p_base) is the common mistake min-p improves on.
    """
    # No probability sits on a threshold p_base × max p (0.4 × 0.1 = 0.04 would, and float rounding then decides).
    fixed = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.065, 0.035], [0.9, 0.05, 0.03, 0.01, 0.01]]))
    drawn = _cases_logits(fresh_int(0, 2**31, fresh_generator()))          # fresh values each run
    cases = [(fixed, 0.2), (fixed, 0.1)] + [(logits, 0.1) for logits in drawn]
    results = []
    with watching_installed(fn, (fixed.clone(), 0.1), _filter_targets(), _INSTALLED_FILTERS) as calls:
        for logits, p_base in cases:
            ok, got = attempt(fn, logits.clone(), p_base)
            if not ok:
                return False
            results.append(got)
    if calls:
        return _called_a_filter(calls)
    for (logits, p_base), got in zip(cases, results):
        problem = type_problem(got, logits.shape)
        if problem is not None:
            return fail(f"p_base = {p_base}: {problem[0]}", f"p_base = {p_base}：{problem[1]}")
        want = _min_p_filter(logits, p_base)
        kept, kept_want = torch.isfinite(got), torch.isfinite(want)
        # A token within float rounding of the threshold may go either way (log-space and probability-space
        # answers round differently); every other token must match.
        probs = torch.softmax(logits.double(), -1)
        near = (probs - p_base * probs.amax(-1, keepdim=True)).abs() <= 1e-6 * probs.amax(-1, keepdim=True)
        if torch.equal(kept | near, kept_want | near) and torch.equal(got[kept & kept_want], want[kept & kept_want]):
            continue
        absolute = torch.softmax(logits.float(), -1) >= p_base
        if torch.equal(kept, absolute):
            return fail(f"p_base = {p_base}: you kept the tokens with probability ≥ {p_base}. min-p scales the "
                        "threshold with the best token's probability: p_base × max p, so a confident row keeps "
                        "fewer tokens and an unsure row more.",
                        f"p_base = {p_base}：你保留的是概率 ≥ {p_base} 的词元。min-p 的阈值要随最好词元的概率缩放："
                        "p_base × max p，这样有把握的行保留得少，没把握的行保留得多。")
        if _returned_probabilities(got):
            return fail("Return filtered *logits* (−inf for the removed tokens), not probabilities.",
                        "请返回过滤后的 *logits*（被去掉的词元设为 −inf），而不是概率。")
        return fail(f"p_base = {p_base}: the kept set differs: keep a token when softmax(logits) ≥ p_base × the "
                    "row's largest probability, logits unchanged, others −inf.",
                    f"p_base = {p_base}：保留的集合不对：softmax(logits) ≥ p_base × 该行最大概率时保留，"
                    "数值不变，其余设为 −inf。")
    return passed("Correct: the cut-off follows the model's confidence.", "正确：截断线随模型的把握程度而变。")


def _p_range(probs: torch.Tensor, k: int) -> tuple[float, float]:
    """The check's reference: top-p keeps exactly ``k`` tokens for p in (mass of the best k − 1, mass of the best k]
    (a token is kept while the mass of the tokens before it is below p)."""
    mass = torch.cat([torch.zeros(1, dtype=torch.float64), probs.double().sort(descending=True).values.cumsum(0)])
    return float(mass[k - 1]), float(mass[k])


def _range_cases(g: torch.Generator) -> list[tuple[torch.Tensor, int]]:
    """A sure model, a flat one and drawn ones, with drawn k: several vectors the check draws afresh."""
    sure = torch.softmax(torch.tensor([6.0, 2.0, 1.5, 1.0, 0.5, 0.0]), -1)
    flat = torch.softmax(0.3 * torch.randn(6, generator=g), -1)
    drawn = [torch.softmax(2 * torch.randn(fresh_int(3, 12, g), generator=g), -1) for _ in range(3)]
    return [(sure, 3), (flat, 3), (sure, 1)] + [(v, fresh_int(1, len(v) + 1, g)) for v in drawn]


@never_raises
def check_top_p_range(fn) -> bool:
    """Exercise 3: ``fn(probs (V,), k) -> (low, high)``: top-p keeps exactly k tokens for low < p ≤ high.

    Derived, not searched: calling the library's filters (e.g. trying many p with ``top_p_filter``) is the shortcut
    ruled out; the mass *including* the k-th token as the lower end is the common off-by-one."""
    g = fresh_generator()
    cases = _range_cases(g)
    results = []
    with watching(fn, _filter_targets()) as calls:
        for probs, k in cases:
            ok, got = attempt(fn, probs.clone(), k)
            if not ok:
                return False
            results.append(got)
    if calls:
        return fail(f"You called {', '.join(sorted(set(calls)))}: searching for p by running the filter is not "
                    "the derivation. Which tokens does top-p keep for a given p? Write the two ends from the "
                    "sorted, cumulated probabilities.",
                    f"你调用了 {'、'.join(sorted(set(calls)))}：靠反复运行过滤器去搜索 p 不算推导。"
                    "对给定的 p，top-p 保留哪些词元？请由排序后的累计概率直接写出区间的两端。")
    for (probs, k), got in zip(cases, results):
        try:
            low, high = (float(v) for v in got)
        except (TypeError, ValueError, RuntimeError):
            return fail(f"Return a pair (low, high), got {type(got).__name__}.",
                        f"请返回一对数 (low, high)，实际返回的是 {type(got).__name__}。")
        want = _p_range(probs, k)
        if abs(low - want[0]) < 1e-6 and abs(high - want[1]) < 1e-6:
            continue
        shown = ", ".join(f"{float(p):.3f}" for p in probs)
        if k < len(probs) and abs(low - want[1]) < 1e-6 and abs(high - _p_range(probs, k + 1)[1]) < 1e-6:
            return fail(f"For probabilities ({shown}) and k = {k} you gave the range that keeps k + 1 tokens: a token "
                        "is kept while the mass *before* it is below p, so the k-th token stays as soon as p is "
                        "above the mass of the k − 1 better ones.",
                        f"概率为 ({shown})、k = {k} 时，你给出的是保留 k + 1 个词元的区间：只要排在一个词元*前面*"
                        "的概率之和还小于 p，它就被保留，所以 p 一旦超过前 k − 1 个词元的概率之和，"
                        "第 k 个词元就留下了。")
        unsorted = torch.cat([torch.zeros(1, dtype=torch.float64), probs.double().cumsum(0)])
        if abs(low - float(unsorted[k - 1])) < 1e-6 and abs(high - float(unsorted[k])) < 1e-6:
            return fail(f"For probabilities ({shown}): you added them up in vocabulary order. Top-p sorts first: "
                        "the best tokens are kept first.",
                        f"概率为 ({shown}) 时：你是按词表顺序累加的。top-p 要先排序：先保留概率最大的词元。")
        return fail(f"For probabilities ({shown}) and k = {k}: expected ({want[0]:.4f}, {want[1]:.4f}], got "
                    f"({low:.4f}, {high:.4f}].",
                    f"概率为 ({shown})、k = {k} 时：应为 ({want[0]:.4f}, {want[1]:.4f}]，"
                    f"实际是 ({low:.4f}, {high:.4f}]。")
    sure, flat = cases[0][0], cases[1][0]
    (s_low, s_high), (f_low, f_high) = _p_range(sure, 3), _p_range(flat, 3)
    return passed(f"Correct. Three tokens are kept for {s_low:.3f} < p ≤ {s_high:.3f} when the model is sure, but "
                  f"for {f_low:.3f} < p ≤ {f_high:.3f} when it is unsure: one p keeps few tokens in the first case "
                  "and many in the second, which is what a fixed k cannot do.",
                  f"正确。模型有把握时，{s_low:.3f} < p ≤ {s_high:.3f} 保留 3 个词元；没把握时则是 "
                  f"{f_low:.3f} < p ≤ {f_high:.3f}：同一个 p，在前一种情况下保留的词元少，在后一种情况下多，"
                  "这正是固定的 k 做不到的。")
