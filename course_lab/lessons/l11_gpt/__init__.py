"""Lesson 11 · decoder-only GPT: sampling helpers, the temperature / top-k widget, KV-cache timing, exercise checks.

The notebook trains a character-level :class:`course_utils.models.GPT` and writes the causal-LM loss and the
sampling step itself; this module holds what would distract from that:

* :func:`sampling_distribution` (from ``course_utils.sampling``): softmax(logits / τ) restricted to the top k;
* :func:`build_sampling_widget`: a prompt, a temperature and a top-k slider → the next-character distribution as
  a bar chart, plus a continuation sampled with a fixed seed;
* :func:`step_times` / :func:`plot_step_times`: time each generated token with and without a ``KVCache``;
* :func:`plot_layer_histograms` / :func:`plot_lr_range`: the appendix's figures (the notebook computes what they
  draw: the hooks, the ratios and the learning-rate range test are typed in its cells);
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
from course_utils.sampling import sampling_distribution
from course_utils.sampling import top_k_filter as top_k_filter
from course_utils.sampling import top_p_filter as top_p_filter

from ... import i18n, viz
from .checks import check_gpt_block_params as check_gpt_block_params
from .checks import check_min_p as check_min_p
from .checks import check_top_p_range as check_top_p_range

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
    labels = [viz.show_token(tok.itos[i]) for i in order]

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
    from ...widgets import LessonWidget, slider

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
# Appendix: looking inside training (plots only; the notebook computes the values)
# ------------------------------------------------------------------------------------------------------------


def plot_layer_histograms(panels, lang=None, bins: int = 80, log_y: bool = True):
    """One panel per ``(title, {label: values})``: each layer's values as a density line (makemore part 3's
    histograms), its mean and std in the legend; ``log_y``: a log density axis, so that a narrow layer (the
    embeddings) does not flatten the wide ones and the tails show. Titles and labels: strings or
    ``{"en": ..., "zh": ...}`` dicts."""
    code = viz.use_language(lang)
    panels = [(i18n.pick(t, code) if isinstance(t, dict) else str(t),
               {i18n.pick(k, code) if isinstance(k, dict) else str(k): v for k, v in layers.items()})
              for t, layers in panels]
    viz.use_language(code, [t for t, _ in panels], *[list(layers) for _, layers in panels])
    fig = viz.new_figure((5.2 * len(panels), 3.6))
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    for ax, (title, layers) in zip(axes, panels):
        values = {label: viz.to_numpy(v, label).ravel() for label, v in layers.items()}
        # one range per panel, the central 99.8 % of all its values: a few far outliers would squash the rest
        lo, hi = np.percentile(np.concatenate(list(values.values())), [0.1, 99.9])
        for label, v in values.items():
            density, edges = np.histogram(v, bins=bins, range=(lo, hi), density=True)
            ax.plot((edges[:-1] + edges[1:]) / 2, density,
                    label=f"{label}: {i18n.tr('mean', code)} {v.mean():.2f}, {i18n.tr('std', code)} {v.std():.2f}")
        if log_y:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel(i18n.tr("element_value", code))
        ax.set_ylabel(i18n.pick({"en": "density", "zh": "概率密度"}, code))
        ax.legend(fontsize=8)
    return fig


def plot_lr_range(lrs, losses, smoothed, best_lr: float, lesson_lr: float, lang=None):
    """Loss against the learning rate on a log axis (a range test, Smith 2017): each step's loss, its running
    average, the rate where the average is lowest and the rate the lesson trained with."""
    code = viz.use_language(lang)
    lrs = np.asarray(lrs, dtype=float)[:len(losses)]
    fig = viz.new_figure((7, 3.8))
    ax = fig.add_subplot()
    ax.plot(lrs, losses, ".", color="tab:blue", alpha=0.35,
            label=i18n.pick({"en": "loss of each step", "zh": "每一步的损失"}, code))
    ax.plot(lrs, smoothed, color="tab:blue", label=i18n.pick({"en": "running average", "zh": "滑动平均"}, code))
    ax.axvline(best_lr, color="tab:red", linestyle="--",
               label=i18n.pick({"en": "lowest average: lr = {v:.2g}", "zh": "平均最低处：学习率 {v:.2g}"},
                               code).format(v=best_lr))
    ax.axvline(lesson_lr, color="tab:green",
               label=i18n.pick({"en": "the lesson's lr = {v:.2g}", "zh": "本课用的学习率 {v:.2g}"},
                               code).format(v=lesson_lr))
    ax.set_xscale("log")
    ax.set_xlabel(i18n.tr("learning_rate", code))
    ax.set_ylabel(i18n.tr("loss", code))
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(i18n.pick({"en": "Learning-rate range test: one run, the rate grows every step",
                            "zh": "学习率范围测试：只跑一次，每一步都调大学习率"}, code))
    return fig
