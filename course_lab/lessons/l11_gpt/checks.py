"""Lesson 11 · GPT: the exercise checks (they print a verdict, return True / False and never raise).

The lesson module re-exports them; this module never imports the lesson's ``__init__``."""

from __future__ import annotations

import torch

from course_utils.sampling import top_p_filter

from ...exercises import attempt, fail, never_raises, passed, type_problem, watching

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
    """What counting from a built module goes through: the parameter iterators of every ``nn.Module``."""
    return [(torch.nn.Module, "parameters"), (torch.nn.Module, "named_parameters")]


@never_raises
def check_gpt_block_params(fn) -> bool:
    """Exercise 1: ``fn(d_model, d_ff)`` = the exact parameter count of one GPT block of ``course_utils``, by formula.

    Building a block (or taking the trained model's) and summing ``p.numel()`` over ``.parameters()`` is the
    shortcut ruled out: it is how the answer is *checked*, not derived. The rule of thumb 12·d² (weights only) is
    the common mistake: it forgets biases and norms.
    """
    results = []
    with watching(fn, _counting_targets()) as calls:
        for d, d_ff in ((64, 256), (48, 100), (384, 1536)):
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
            (lesson, "sampling_distribution"), (lesson, "min_p_filter")]


def _called_a_filter(calls) -> bool:
    names = ", ".join(sorted(set(calls)))
    return fail(f"You called {names}: write the filter yourself (softmax, sort / cumsum or amax, masked_fill); a "
                "ready-made filter teaches nothing about how it decides which tokens to keep.",
                f"你调用了 {names}：请自己写出这个过滤器（softmax、sort / cumsum 或 amax、masked_fill）；"
                "直接调用现成的过滤器，学不到它是怎样决定保留哪些词元的。")


def _returned_probabilities(got) -> bool:
    return bool((got >= 0).all()) and torch.allclose(got.float().sum(-1), torch.ones(got.shape[:-1]), atol=1e-4)


def min_p_filter(logits: torch.Tensor, p_base: float) -> torch.Tensor:
    """min-p filtering: keep the tokens whose probability is at least ``p_base`` times the best one's."""
    probs = torch.softmax(logits.float(), dim=-1)
    threshold = p_base * probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(probs < threshold, float("-inf"))


@never_raises
def check_min_p(fn) -> bool:
    """Exercise 2: ``fn(logits, p_base)`` keeps the tokens with probability ≥ p_base · (the largest probability).

    Calling a ready-made filter (``course_utils.sampling``, or this module's ``min_p_filter``) is the shortcut ruled
    out; an absolute threshold (probability ≥ p_base) is the common mistake min-p improves on.
    """
    fixed = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.06, 0.04], [0.9, 0.05, 0.03, 0.01, 0.01]]))
    cases = [(fixed, 0.2), (fixed, 0.1)] + [(logits, 0.1) for logits in _cases_logits(12)]
    results = []
    with watching(fn, _filter_targets()) as calls:
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
        want = min_p_filter(logits, p_base)
        kept, kept_want = torch.isfinite(got), torch.isfinite(want)
        if torch.equal(kept, kept_want) and torch.equal(got[kept], want[kept]):
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


@never_raises
def check_top_p(fn) -> bool:
    """Exercise 3: ``fn(logits, p)`` = nucleus filtering (see :func:`top_p_filter`), written by hand.

    Calling ``course_utils.sampling.top_p_filter`` (or ``sampling_distribution``) is the shortcut ruled out;
    keeping tokens while the cumulative mass *including* the token is ≤ p is the common off-by-one mistake.
    """
    fixed = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    cases = [(fixed, 0.5), (fixed, 0.8), (fixed, 0.81), (fixed, 1.0)]
    cases += [(logits, p) for logits in _cases_logits(13) for p in (0.3, 0.9)]
    results = []
    with watching(fn, _filter_targets()) as calls:
        for logits, p in cases:
            ok, got = attempt(fn, logits.clone(), p)
            if not ok:
                return False
            results.append(got)
    if calls:
        return _called_a_filter(calls)
    for (logits, p), got in zip(cases, results):
        want = top_p_filter(logits, p)
        problem = type_problem(got, logits.shape)
        if problem is not None:
            return fail(f"p = {p}: {problem[0]}", f"p = {p}：{problem[1]}")
        kept, kept_want = torch.isfinite(got), torch.isfinite(want)
        if torch.equal(kept, kept_want) and torch.equal(got[kept], want[kept]):
            continue
        if _returned_probabilities(got):
            return fail("Return filtered *logits* (−inf for the removed tokens), not probabilities.",
                        "请返回过滤后的 *logits*（被去掉的词元设为 −inf），而不是概率。")
        if logits is fixed:
            names = "[0.5, 0.3, 0.15, 0.05]"
            k_want = int(kept_want.sum())
            return fail(f"For probabilities {names} and p = {p} keep the {k_want} best token(s) (the smallest set "
                        f"whose mass reaches p: a token stays while the mass *before* it is below p); yours keeps "
                        f"{int(kept.sum())}.",
                        f"概率为 {names}、p = {p} 时应保留最好的 {k_want} 个词元（累计概率达到 p 的最小集合："
                        f"只要排在它*前面*的概率之和还不到 p，这个词元就保留）；你的结果保留了 {int(kept.sum())} 个。")
        return fail(f"p = {p}: the kept set differs from the nucleus (sort by probability, keep tokens until the "
                    "cumulative probability reaches p; keep logits unchanged, others −inf).",
                    f"p = {p}：保留的集合与核不一致（按概率从大到小排序，累计概率达到 p 之前的词元都保留，"
                    "数值不变，其余设为 −inf）。")
    return passed("Correct: the nucleus grows when the model is unsure and shrinks when it is confident.",
                  "正确：模型没把握时核会变大，有把握时核会变小。")
