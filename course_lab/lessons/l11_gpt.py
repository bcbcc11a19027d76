"""Lesson 11 · decoder-only GPT: sampling helpers, the temperature / top-k widget, KV-cache timing, exercise checks.

The notebook trains a character-level :class:`course_utils.models.GPT` and writes the causal-LM loss and the
sampling step itself; this module holds what would distract from that:

* :func:`sampling_distribution` (from ``course_utils.sampling``): softmax(logits / τ) restricted to the top k;
* :func:`build_sampling_widget`: a prompt, a temperature and a top-k slider → the next-character distribution as
  a bar chart, plus a continuation sampled with a fixed seed;
* :func:`step_times` / :func:`plot_step_times`: time each generated token with and without a ``KVCache``;
* the ``check_*`` functions of the exercises (each refuses the ready-made function the exercise asks to write).
"""

from __future__ import annotations

import textwrap
import time

import ipywidgets as widgets
import numpy as np
import torch

from course_utils.decoding import generate, stream_tokens
from course_utils.modes import evaluating
from course_utils.sampling import sampling_distribution, top_k_filter, top_p_filter  # noqa: F401 (lesson API)

from .. import i18n, viz
from ..exercises import (
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    never_raises,
    passed,
    type_problem,
    watching,
)

# Characters that would be invisible on an axis: shown by a visible stand-in.
_VISIBLE = {"\n": "↵", " ": "' '", "\t": "⇥"}


def show_char(token: str) -> str:
    """A printable label for one character token (newline → ↵, space → ' ')."""
    return _VISIBLE.get(token, token)


# ------------------------------------------------------------------------------------------------------------
# Sampling
# ------------------------------------------------------------------------------------------------------------


def entropy_bits(probs: torch.Tensor) -> float:
    """Entropy of one distribution in bits (0 for a one-hot, log2 V for a uniform one)."""
    p = probs[probs > 0]
    return float(-(p * p.log2()).sum())


def next_token_probs(model, tok, prompt: str, temperature: float = 1.0, top_k: int | None = None):
    """``(raw, shaped)``: P(next char | prompt) at τ = 1 and after temperature / top-k, both ``(V,)``."""
    ids = encode_prompt(tok, prompt)
    with evaluating(model):
        logits = model(ids[:, -model.max_len:])[0, -1]  # (V,)
    return torch.softmax(logits.float(), -1), sampling_distribution(logits, temperature, top_k)


def encode_prompt(tok, prompt: str) -> torch.Tensor:
    """``(1, T)`` ids of the prompt; characters outside the vocabulary are an error, not a silent ``<unk>``."""
    if not prompt:
        raise ValueError(i18n.pick({"en": "type at least one character as the prompt",
                                    "zh": "提示文本至少要有一个字符"}))
    unknown = sorted({c for c in prompt if c not in tok.stoi})
    if unknown:
        raise ValueError(i18n.pick({"en": "characters not in the vocabulary: {u}",
                                    "zh": "这些字符不在词表里：{u}"}).format(u=" ".join(map(repr, unknown))))
    return torch.tensor([tok.encode(prompt)], dtype=torch.long)


def _render_sampling(model, tok, n_new: int, n_show: int, prompt: str, temperature: float, top_k: int,
                     seed: int, lang=None):
    code = viz.use_language(lang)
    ids = encode_prompt(tok, prompt)
    raw, probs = next_token_probs(model, tok, prompt, temperature, top_k)
    # the n_show most probable characters after shaping (ties, e.g. all zeros, broken by the raw probability)
    order = sorted(range(len(probs)), key=lambda i: (-float(probs[i]), -float(raw[i])))[:n_show]
    g = torch.Generator().manual_seed(int(seed))
    out = generate(model, ids, n_new, temperature=float(temperature), top_k=top_k or None, generator=g)
    continuation = tok.decode(out[0, ids.size(1):])
    labels = [show_char(tok.itos[i]) for i in order]

    fig = viz.new_figure((9, 5.6))
    ax, ax_text = fig.subplots(2, 1, height_ratios=[3, 2])
    xs = np.arange(len(order))
    ax.bar(xs, probs[order].numpy(), color="tab:blue",
           label=i18n.pick({"en": "sampled from (τ, top-k)", "zh": "实际采样的分布（τ、top-k）"}, code))
    ax.plot(xs, raw[order].numpy(), "_", color="black", markersize=14, markeredgewidth=2,
            label=i18n.pick({"en": "model, τ = 1", "zh": "模型原始分布（τ = 1）"}, code))
    ax.set_xticks(xs, labels=labels)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(i18n.tr("probability", code))
    ax.legend(loc="upper right")
    k_text = str(top_k) if top_k else i18n.pick({"en": "off", "zh": "关"}, code)
    ax.set_title(i18n.pick({"en": "P(next character | prompt): τ = {t:g}, top-k = {k}, entropy {h:.2f} bits",
                            "zh": "P(下一个字符 | 提示)：τ = {t:g}，top-k = {k}，熵 {h:.2f} 比特"}, code)
                 .format(t=temperature, k=k_text, h=entropy_bits(probs)))
    shown = (prompt + "|" + continuation).replace("\n", "↵\n")
    wrapped = "\n".join(textwrap.fill(line, 90) if line else "" for line in shown.split("\n")[:9])
    ax_text.axis("off")
    ax_text.set_title(i18n.pick({"en": "sampled continuation (seed {s}); the prompt ends at |",
                                 "zh": "采样得到的续写（随机种子 {s}）；| 之前是提示文本"}, code).format(s=seed),
                      loc="left", fontsize=10)
    ax_text.text(0.0, 1.0, wrapped, va="top", ha="left", family="monospace", fontsize=9,
                 transform=ax_text.transAxes)
    state = {"raw_probs": raw.numpy(), "probs": probs.numpy(), "shown": [tok.itos[i] for i in order],
             "continuation": continuation, "entropy_bits": entropy_bits(probs),
             "n_candidates": int((probs > 0).sum()), "temperature": float(temperature), "top_k": int(top_k),
             "seed": int(seed)}
    return fig, state


def build_sampling_widget(model, tok, prompt: str = "ROMEO:\n", temperature: float = 1.0, top_k: int = 0,
                          seed: int = 0, n_new: int = 160, n_show: int = 20):
    """Prompt text, temperature τ (0 = greedy), top-k (0 = off) and seed → next-character bars + a sample."""
    from ..widgets import LessonWidget, slider

    vocab = tok.vocab_size
    controls = {
        "prompt": widgets.Textarea(value=prompt, rows=2, continuous_update=False,
                                   description=i18n.pick({"en": "prompt", "zh": "提示文本"}),
                                   style={"description_width": "initial"}),
        "temperature": slider("temperature", 0.0, 2.0, 0.05, float(temperature),
                              label={"en": "temperature τ (0 = greedy)", "zh": "温度 τ（0 = 贪心）"}),
        "top_k": slider("top_k", 0, vocab, 1, int(top_k), label={"en": "top-k (0 = off)", "zh": "top-k（0 = 关）"}),
        "seed": slider("seed", 0, 20, 1, int(seed), label={"en": "random seed", "zh": "随机种子"}),
    }

    def render(prompt, temperature, top_k, seed):
        return _render_sampling(model, tok, n_new, n_show, prompt, temperature, top_k, seed)

    return LessonWidget(controls, render, title={"en": "Temperature and top-k sampling",
                                                 "zh": "温度与 top-k 采样"})


# ------------------------------------------------------------------------------------------------------------
# KV cache: time per generated token
# ------------------------------------------------------------------------------------------------------------


def step_times(model, ids: torch.Tensor, n_new: int, use_cache: bool) -> tuple[torch.Tensor, list[float]]:
    """Greedy generation (the library's ``stream_tokens`` at τ = 0) timing every step: ``(ids (B, T + n_new),
    seconds per new token)``.

    With the cache each step feeds only the newest token (its query meets all cached keys); without it each step
    runs the whole sequence again. The sequence must fit the model's window: ``T + n_new <= max_len``.
    """
    if ids.size(1) + n_new > model.max_len:
        raise ValueError(f"{ids.size(1)} + {n_new} tokens exceed the model's window of {model.max_len}: "
                         "generate fewer tokens or use a model with a larger max_len")
    out, times = [ids], []
    t0 = time.perf_counter()
    for nxt in stream_tokens(model, ids, n_new, temperature=0, use_cache=use_cache):
        times.append(time.perf_counter() - t0)
        out.append(nxt)
        t0 = time.perf_counter()
    return torch.cat(out, dim=1), times


def plot_step_times(with_cache, without_cache, lang=None):
    """Milliseconds per generated token against the sequence length, with and without the KV cache."""
    code = viz.use_language(lang)
    fig = viz.new_figure((7, 3.8))
    ax = fig.add_subplot()
    for times, color, name in ((without_cache, "tab:red", {"en": "without cache", "zh": "不用缓存"}),
                               (with_cache, "tab:green", {"en": "with KV cache", "zh": "使用 KV 缓存"})):
        ms = 1000 * np.asarray(times, dtype=float)
        # a running median over 9 steps: single steps jitter with whatever else the machine is doing
        smooth = np.array([np.median(ms[max(0, i - 4): i + 5]) for i in range(len(ms))])
        ax.plot(np.arange(1, len(ms) + 1), ms, ".", color=color, alpha=0.25, markersize=3)
        ax.plot(np.arange(1, len(ms) + 1), smooth, color=color,
                label=f"{i18n.pick(name, code)}: {ms.sum() / 1000:.2f} s")
    ax.set_xlabel(i18n.pick({"en": "new token number t", "zh": "第 t 个新词元"}, code))
    ax.set_ylabel(i18n.pick({"en": "ms for this token", "zh": "生成这个词元的毫秒数"}, code))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(i18n.pick({"en": "Cost per generated token", "zh": "每生成一个词元的耗时"}, code))
    return fig


# ------------------------------------------------------------------------------------------------------------
# Exercise checks: print a verdict, return True / False, never raise
# ------------------------------------------------------------------------------------------------------------


def _cases_logits(seed: int):
    g = torch.Generator().manual_seed(seed)
    return [3 * torch.randn(4, 11, generator=g), torch.tensor([[60.0, 58.0, 10.0, -40.0, 0.5]]),
            torch.randn(2, 3, 7, generator=g)]


def _gpt_block_params(d_model: int, d_ff: int) -> int:
    """Parameters of one pre-norm GPT block: two LayerNorms (γ, β), Q/K/V/O with biases, the FFN with biases.

    4d (norms) + 4d² + 4d (attention) + 2·d·d_ff + d_ff + d (FFN) = 4d² + 2·d·d_ff + 9d + d_ff.
    """
    return 4 * d_model**2 + 2 * d_model * d_ff + 9 * d_model + d_ff


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
    """The ready-made filters a student might call instead of writing one: the library's and this module's."""
    import sys

    from course_utils import sampling

    here = sys.modules[__name__]
    return [(sampling, "top_k_filter"), (sampling, "top_p_filter"), (sampling, "sampling_distribution"),
            (sampling, "sample_next"), (here, "top_k_filter"), (here, "top_p_filter"),
            (here, "sampling_distribution"), (here, "_min_p_filter")]


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
    fixed = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.06, 0.04], [0.9, 0.05, 0.03, 0.01, 0.01]]))
    drawn = _cases_logits(fresh_int(0, 2**31, fresh_generator()))          # fresh values each run
    cases = [(fixed, 0.2), (fixed, 0.1)] + [(logits, 0.1) for logits in drawn]
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
        want = _min_p_filter(logits, p_base)
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
    cases += [(logits, p) for logits in _cases_logits(fresh_int(0, 2**31, fresh_generator())) for p in (0.3, 0.9)]
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
