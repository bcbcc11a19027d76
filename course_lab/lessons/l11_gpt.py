"""Lesson 11 · decoder-only GPT: sampling helpers, the temperature / top-k widget, KV-cache timing, exercise checks.

The notebook trains a character-level :class:`course_utils.models.GPT` and writes the causal-LM loss and the
sampling step itself; this module holds what would distract from that:

* :func:`sampling_distribution`: softmax(logits / τ) restricted to the top k (τ = 0: greedy, one-hot);
* :func:`build_sampling_widget`: a prompt, a temperature and a top-k slider → the next-character distribution as
  a bar chart, plus a continuation sampled with a fixed seed;
* :func:`step_times` / :func:`plot_step_times`: time each generated token with and without a ``KVCache``;
* :func:`top_p_filter` (the reference of exercise 3) and the ``check_*`` functions of the exercises.
"""

from __future__ import annotations

import textwrap
import time

import ipywidgets as widgets
import numpy as np
import torch

from course_utils.attention import KVCache
from course_utils.decoding import generate, top_k_filter

from .. import i18n, viz
from ..exercises import attempt, fail, never_raises, passed, tensor_problem, type_problem

# Characters that would be invisible on an axis: shown by a visible stand-in.
_VISIBLE = {"\n": "↵", " ": "' '", "\t": "⇥"}


def show_char(token: str) -> str:
    """A printable label for one character token (newline → ↵, space → ' ')."""
    return _VISIBLE.get(token, token)


# ------------------------------------------------------------------------------------------------------------
# Sampling
# ------------------------------------------------------------------------------------------------------------


def sampling_distribution(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None) -> torch.Tensor:
    """The distribution ``generate`` samples from: softmax(top_k(logits / τ)); τ = 0 gives the argmax one-hot.

    ``top_k`` None or 0 means no filtering. ``logits (..., V)`` -> probabilities ``(..., V)``.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    logits = logits.float()
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.size(-1)).float()
    return torch.softmax(top_k_filter(logits / temperature, top_k or None), dim=-1)


def entropy_bits(probs: torch.Tensor) -> float:
    """Entropy of one distribution in bits (0 for a one-hot, log2 V for a uniform one)."""
    p = probs[probs > 0]
    return float(-(p * p.log2()).sum())


@torch.no_grad()
def next_token_probs(model, tok, prompt: str, temperature: float = 1.0, top_k: int | None = None):
    """``(raw, shaped)``: P(next char | prompt) at τ = 1 and after temperature / top-k, both ``(V,)``."""
    ids = encode_prompt(tok, prompt)
    logits = model(ids[:, -model.block_size:])[0, -1]  # (V,)
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

    model.eval()
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


@torch.no_grad()
def step_times(model, ids: torch.Tensor, n_new: int, use_cache: bool) -> tuple[torch.Tensor, list[float]]:
    """Greedy generation that times every step: ``(ids (B, T + n_new), seconds per new token)``.

    With the cache each step feeds only the newest token (its query meets all cached keys); without it each step
    runs the whole sequence again. The sequence must fit the model's window: ``T + n_new <= block_size``.
    """
    if ids.size(1) + n_new > model.block_size:
        raise ValueError(f"{ids.size(1)} + {n_new} tokens exceed the model's window of {model.block_size}: "
                         "generate fewer tokens or use a model with a larger block_size")
    model.eval()
    cache = KVCache() if use_cache else None
    out, times = ids, []
    feed = ids
    for _ in range(n_new):
        t0 = time.perf_counter()
        logits = model(feed, cache=cache)
        nxt = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        times.append(time.perf_counter() - t0)
        out = torch.cat([out, nxt], dim=1)
        feed = nxt if use_cache else out
    return out, times


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


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filtering (Holtzman et al., 2020): keep the smallest set of most probable tokens whose
    probabilities add up to at least ``top_p``; every other logit becomes −inf. The best token always stays."""
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    before = probs.cumsum(-1) - probs  # probability mass of the better tokens
    drop_sorted = before >= top_p  # already enough mass without this token
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def _cases_logits(seed: int):
    g = torch.Generator().manual_seed(seed)
    return [3 * torch.randn(4, 11, generator=g), torch.tensor([[60.0, 58.0, 10.0, -40.0, 0.5]]),
            torch.randn(2, 3, 7, generator=g)]


@never_raises
def check_temperature_softmax(fn) -> bool:
    """Exercise 1: ``fn(logits, temperature)`` = softmax(logits / τ) over the last dimension, for τ > 0."""
    for logits in _cases_logits(11):
        for tau in (1.0, 0.5, 2.0, 0.05):
            ok, got = attempt(fn, logits.clone(), tau)
            if not ok:
                return False
            problem = type_problem(got, logits.shape)
            if problem is not None:
                return fail(f"τ = {tau}: {problem[0]}", f"τ = {tau}：{problem[1]}")
            if not torch.isfinite(got).all():
                return fail(f"Not finite at τ = {tau}: logits / τ can be huge, so exp() overflows; "
                            "torch.softmax subtracts the maximum for you.",
                            f"τ = {tau} 时出现了 inf 或 nan：logits / τ 可能非常大，exp() 会溢出；"
                            "torch.softmax 会替你先减去最大值。")
            want = torch.softmax(logits / tau, dim=-1)
            problem = tensor_problem(got, want, atol=1e-5)
            if problem is None:
                continue
            if torch.allclose(got.float(), torch.softmax(logits * tau, -1), atol=1e-5):
                return fail("You multiplied by τ: divide the logits by the temperature.",
                            "你乘上了 τ：应该用 logits 除以温度。")
            if torch.allclose(got.float(), torch.softmax(logits / tau, 0), atol=1e-5):
                return fail("Normalised along the wrong dimension: use dim=-1 (one distribution per row).",
                            "归一化的维度不对：要用 dim=-1（每一行是一个分布）。")
            return fail(f"τ = {tau}: {problem[0]}", f"τ = {tau}：{problem[1]}")
    return passed("Correct: τ < 1 sharpens the distribution, τ > 1 flattens it, the argmax never moves.",
                  "正确：τ < 1 让分布更尖锐，τ > 1 让分布更平坦，而概率最大的那个词元始终不变。")


@never_raises
def check_top_k(fn) -> bool:
    """Exercise 2: ``fn(logits, k)`` keeps the k largest logits of each row and sets the others to −inf."""
    for logits in _cases_logits(12):
        for k in (1, 3, logits.size(-1)):
            ok, got = attempt(fn, logits.clone(), k)
            if not ok:
                return False
            want = top_k_filter(logits, k)
            problem = type_problem(got, logits.shape)
            if problem is not None:
                return fail(f"k = {k}: {problem[0]}", f"k = {k}：{problem[1]}")
            kept, kept_want = torch.isfinite(got), torch.isfinite(want)
            if torch.equal(kept, kept_want) and torch.equal(got[kept], want[kept]):
                continue
            if torch.allclose(got.float().sum(-1), torch.ones(got.shape[:-1]), atol=1e-4) and (got >= 0).all():
                return fail("Return filtered *logits*, not probabilities: the softmax comes afterwards.",
                            "请返回过滤后的 *logits*，而不是概率：softmax 在之后才做。")
            if (got == 0).any() and not (~torch.isfinite(got)).any():
                return fail("Use −inf (float('-inf')), not 0, for the removed tokens: a logit of 0 still gets "
                            "probability after the softmax.",
                            "被去掉的词元要设成 −inf（float('-inf')），不能设成 0："
                            "logit 为 0 在 softmax 之后仍有概率。")
            n_kept = kept.sum(-1).flatten().tolist()
            return fail(f"k = {k}: each row should keep exactly {k} finite logits (unchanged), yours keeps "
                        f"{n_kept}.",
                        f"k = {k}：每一行应当恰好保留 {k} 个有限的 logit（数值不变），你的结果保留了 {n_kept} 个。")
    return passed("Correct: sampling can now only pick one of the k best tokens.",
                  "正确：现在采样只会在最好的 k 个词元里挑选。")


@never_raises
def check_top_p(fn) -> bool:
    """Exercise 3: ``fn(logits, p)`` = nucleus filtering (see :func:`top_p_filter`)."""
    fixed = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    cases = [(fixed, 0.5), (fixed, 0.8), (fixed, 0.81), (fixed, 1.0)]
    cases += [(logits, p) for logits in _cases_logits(13) for p in (0.3, 0.9)]
    for logits, p in cases:
        ok, got = attempt(fn, logits.clone(), p)
        if not ok:
            return False
        want = top_p_filter(logits, p)
        problem = type_problem(got, logits.shape)
        if problem is not None:
            return fail(f"p = {p}: {problem[0]}", f"p = {p}：{problem[1]}")
        kept, kept_want = torch.isfinite(got), torch.isfinite(want)
        if torch.equal(kept, kept_want) and torch.equal(got[kept], want[kept]):
            continue
        if logits is fixed:
            names = "[0.5, 0.3, 0.15, 0.05]"
            k_want = int(kept_want.sum())
            return fail(f"For probabilities {names} and p = {p} keep the {k_want} best token(s) (the smallest set "
                        f"whose mass reaches p); yours keeps {int(kept.sum())}.",
                        f"概率为 {names}、p = {p} 时应保留最好的 {k_want} 个词元（累计概率达到 p 的最小集合）；"
                        f"你的结果保留了 {int(kept.sum())} 个。")
        return fail(f"p = {p}: the kept set differs from the nucleus (sort by probability, keep tokens until the "
                    "cumulative probability reaches p; keep logits unchanged, others −inf).",
                    f"p = {p}：保留的集合与核不一致（按概率从大到小排序，累计概率达到 p 之前的词元都保留，"
                    "数值不变，其余设为 −inf）。")
    return passed("Correct: the nucleus grows when the model is unsure and shrinks when it is confident.",
                  "正确：模型没把握时核会变大，有把握时核会变小。")

