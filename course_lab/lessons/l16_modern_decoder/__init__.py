"""Lesson 16 · the modern decoder block (Llama): the RoPE and GQA widgets, the measured comparison, exercise checks.

The notebook types RMSNorm, RoPE, the SwiGLU feed-forward, grouped-query attention and the Llama block itself;
this module holds what would distract from them:

* :func:`rope_scores`: the score ⟨R_m q, R_n k⟩ against the distance n − m (the picture RoPE is known by), and
  :func:`build_rope_widget` over it (head size, base, which vectors);
* :func:`gqa_cache_gib` and :func:`build_gqa_widget`: the KV cache of a Llama-sized model against ``n_kv_heads``;
* :func:`load_comparison` / :func:`format_comparison`: the table written by ``benchmarks/compare_llama_gpt.py``
  (``course_lab/assets/results/cpu/llama_vs_gpt.json``);
* the ``check_*`` functions of the exercises (each refuses the ready-made function the exercise asks to write).
"""

from __future__ import annotations

import json
import shlex

import numpy as np
import torch

from course_utils.speed import DTYPE_BYTES as BYTES

from ... import i18n, viz
from ...assets import asset
from ...widgets import LessonWidget, dropdown, slider
from .checks import check_gqa_attention as check_gqa_attention
from .checks import check_llama_block_params as check_llama_block_params
from .checks import check_rope_at as check_rope_at

RESULTS = "results/cpu/llama_vs_gpt.json"

# ------------------------------------------------------------------------------------------------------------
# RoPE: the score against the relative distance
# ------------------------------------------------------------------------------------------------------------


def rope_scores(q: torch.Tensor, k: torch.Tensor, distances, base: float = 10000.0) -> np.ndarray:
    """⟨R_0 q, R_Δ k⟩ for each Δ in ``distances``: pair i of a (d_k,) vector (dims i and i + d_k/2) turned by Δ·θ_i,
    θ_i = base^(−2i/d_k). By RoPE's property this is also ⟨R_m q, R_(m+Δ) k⟩ for every m."""
    d_k = q.numel()
    if d_k % 2 or k.numel() != d_k:
        raise ValueError(f"q and k need the same even size, got {q.numel()} and {k.numel()}: pick an even d_k")
    theta = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)              # (d_k/2,)
    angles = torch.as_tensor(distances, dtype=torch.float64)[:, None] * theta            # (D, d_k/2)
    q1, q2 = q.double().chunk(2)
    k1, k2 = k.double().chunk(2)
    # ⟨q, R_Δ k⟩ per pair: (q1·k1 + q2·k2) cos Δθ + (q2·k1 − q1·k2) sin Δθ
    return ((q1 * k1 + q2 * k2) * angles.cos() + (q2 * k1 - q1 * k2) * angles.sin()).sum(-1).numpy()


VECTORS = {"ones": {"en": "q = k = (1, …, 1)", "zh": "q = k = (1, …, 1)"},
           "random": {"en": "q = k, random", "zh": "q = k，随机"},
           "independent": {"en": "q, k independent, random", "zh": "q、k 相互独立，随机"}}


def _render_rope(d_k: int, log10_base: float, vectors: str, max_distance: int = 512, lang=None):
    code = viz.use_language(lang)
    if d_k % 2:
        raise ValueError(i18n.pick({"en": f"d_k={d_k} is odd: RoPE turns pairs of dimensions, pick an even d_k",
                                    "zh": f"d_k={d_k} 是奇数：RoPE 按维度对旋转，请选偶数"}, code))
    g = torch.Generator().manual_seed(0)
    if vectors == "ones":
        q = k = torch.ones(d_k)
    elif vectors == "random":
        q = k = torch.randn(d_k, generator=g)
    else:
        q, k = torch.randn(2, d_k, generator=g)
    base = 10.0 ** log10_base
    distances = np.arange(max_distance + 1)
    scores = rope_scores(q, k, distances, base)
    theta = base ** (-np.arange(0, d_k, 2) / d_k)
    fig = viz.new_figure((10, 3.6))
    ax, ax2 = fig.subplots(1, 2, width_ratios=[3, 2])
    ax.plot(distances, scores, color="tab:blue")
    ax.axhline(0, color="gray", lw=0.8)
    ax.set_xlabel(i18n.pick({"en": "relative distance n − m", "zh": "相对距离 n − m"}, code))
    ax.set_ylabel(r"$\langle R_m q,\ R_n k\rangle$")
    ax.set_title(i18n.pick({"en": "score against distance: {v}", "zh": "分数随距离的变化：{v}"}, code)
                 .format(v=i18n.pick(VECTORS[vectors], code)))
    wavelengths = 2 * np.pi / theta
    ax2.semilogy(np.arange(len(theta)), wavelengths, "o-", markersize=3, color="tab:orange")
    ax2.axhline(max_distance, color="gray", ls="--", lw=0.8)
    ax2.set_xlabel(i18n.pick({"en": "pair i", "zh": "第 i 对维度"}, code))
    ax2.set_ylabel(i18n.pick({"en": "wavelength 2π/θ_i (tokens)", "zh": "波长 2π/θ_i（词元）"}, code))
    ax2.set_title(f"d_k = {d_k}, base = {base:,.0f}")
    state = {"scores": scores, "wavelengths": wavelengths, "base": base, "d_k": d_k,
             "pairs_slower_than_window": int((wavelengths > max_distance).sum())}
    return fig, state


def build_rope_widget(d_k: int = 64, log10_base: float = 4.0, vectors: str = "ones") -> LessonWidget:
    """Head size, log10 of the base and the vectors → the score against the distance, and each pair's wavelength."""
    controls = {
        "d_k": slider("d_k", 8, 256, 8, int(d_k), label={"en": "head size d_k", "zh": "头维度 d_k"}),
        "log10_base": slider("log10_base", 1.0, 7.0, 0.5, float(log10_base),
                             label={"en": "log10(base)", "zh": "log10(底数 base)"}),
        "vectors": dropdown("vectors", [(label, name) for name, label in VECTORS.items()], vectors,
                            label={"en": "vectors", "zh": "向量"}),
    }
    return LessonWidget(controls, _render_rope, title={"en": "RoPE: the score depends on the distance only",
                                                       "zh": "RoPE：分数只取决于距离"})


# ------------------------------------------------------------------------------------------------------------
# GQA: the KV cache against the number of key/value heads
# ------------------------------------------------------------------------------------------------------------


def gqa_cache_gib(n_layers: int, batch: int, seq_len: int, n_kv_heads: int, d_head: int, dtype: str) -> float:
    """KV cache in GiB: 2 · L · B · T · h_kv · d_head · bytes (keys and values of every past token, every layer)."""
    return 2 * n_layers * batch * seq_len * n_kv_heads * d_head * BYTES[dtype] / 2**30


def _render_gqa(n_kv_heads: int, seq_len: int, batch: int, n_heads: int = 32, n_layers: int = 32,
                d_head: int = 128, dtype: str = "bfloat16", lang=None):
    code = viz.use_language(lang)
    if n_heads % n_kv_heads:
        raise ValueError(i18n.pick({"en": "{h} query heads cannot be split into {kv} equal groups: "
                                          "pick a divisor of {h}",
                                    "zh": "{h} 个查询头不能平均分成 {kv} 组：请选 {h} 的约数"}, code)
                         .format(h=n_heads, kv=n_kv_heads))
    options = [h for h in range(1, n_heads + 1) if n_heads % h == 0]
    gib = [gqa_cache_gib(n_layers, batch, seq_len, h, d_head, dtype) for h in options]
    fig = viz.new_figure((8, 3.4))
    ax = fig.add_subplot()
    colors = ["tab:red" if h == n_kv_heads else "tab:blue" for h in options]
    bars = ax.bar([str(h) for h in options], gib, color=colors)
    ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xlabel(i18n.pick({"en": "key/value heads h_kv (1 = multi-query, {h} = multi-head)",
                             "zh": "键/值头数 h_kv（1 = 多查询注意力，{h} = 多头注意力）"}, code).format(h=n_heads))
    ax.set_ylabel(i18n.pick({"en": "KV cache (GiB)", "zh": "KV 缓存（GiB）"}, code))
    ax.set_title(i18n.pick({"en": "{L} layers, {h} query heads of {d}, {dtype}, batch {B} × {T} tokens",
                            "zh": "{L} 层，{h} 个 {d} 维查询头，{dtype}，批次 {B} × {T} 个词元"}, code)
                 .format(L=n_layers, h=n_heads, d=d_head, dtype=dtype, B=batch, T=seq_len))
    chosen = gqa_cache_gib(n_layers, batch, seq_len, n_kv_heads, d_head, dtype)
    state = {"options": options, "gib": gib, "chosen_gib": chosen,
             "saving": gqa_cache_gib(n_layers, batch, seq_len, n_heads, d_head, dtype) / chosen}
    return fig, state


def build_gqa_widget(n_kv_heads: int = 8, seq_len: int = 8192, batch: int = 8) -> LessonWidget:
    """Llama-3-8B-like shapes (32 layers, 32 query heads of 128, bfloat16): cache GiB for every h_kv, one chosen."""
    import ipywidgets as widgets

    controls = {
        "n_kv_heads": slider("n_kv_heads", 1, 32, 1, int(n_kv_heads),
                             label={"en": "key/value heads h_kv", "zh": "键/值头数 h_kv"}),
        "seq_len": widgets.SelectionSlider(options=[512, 1024, 2048, 4096, 8192, 16384, 32768, 131072],
                                           value=seq_len, description="T", continuous_update=False),
        "batch": slider("batch", 1, 64, 1, int(batch), label={"en": "batch B", "zh": "批次 B"}),
    }
    return LessonWidget(controls, _render_gqa, title={"en": "Grouped-query attention: the cache it saves",
                                                      "zh": "分组查询注意力省下的缓存"})


# ------------------------------------------------------------------------------------------------------------
# The measured comparison (benchmarks/compare_llama_gpt.py)
# ------------------------------------------------------------------------------------------------------------


def load_comparison(path=None) -> dict | None:
    """The JSON written by ``benchmarks/compare_llama_gpt.py``, or None when it has not been run."""
    try:
        path = asset(RESULTS) if path is None else path
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


MODEL_NAMES = {"gpt": {"en": "GPT (lesson 11)", "zh": "GPT（第 11 课）"},
               "gpt_rope": {"en": "GPT + RoPE", "zh": "GPT + RoPE"},
               "llama": {"en": "Llama block", "zh": "Llama 块"}}


def _cell(stats: dict | None) -> str:
    """mean ± half the range over the seeds (a spread, not a confidence interval), or a dash where the model
    cannot run."""
    if not stats:
        return "—"
    if stats["n"] == 1:
        return f"{stats['mean']:.3f}"
    return f"{stats['mean']:.3f}±{(stats['max'] - stats['min']) / 2:.3f}"


def command(result: dict) -> str:
    """The command that made ``result``, without its ``--note`` (a remark in English, kept in the JSON)."""
    words = shlex.split(result["command"])
    if "--note" in words:
        at = words.index("--note")
        del words[at: at + 2]
    return shlex.join(words)


COLUMNS = ("val_nll_T", "beyond_T_at_2T_sliding", "beyond_T_at_2T_full", "beyond_T_at_4T_sliding",
           "beyond_T_at_4T_full")


def format_comparison(result: dict, lang: str | None = None) -> str:
    """The benchmark's table: per model its parameters and the held-out NLL (nats per character), mean ± half the
    range over the seeds: at the training context T; then on the positions beyond T of 2T and 4T windows, read
    with sliding windows of T ("slide") or, RoPE only, as one whole window ("whole")."""
    head = i18n.pick({"en": ("model", "params", "at T", "2T slide", "2T whole", "4T slide", "4T whole"),
                      "zh": ("模型", "参数", "长度 T", "2T 滑动", "2T 整段", "4T 滑动", "4T 整段")}, lang)
    lines = [i18n.pick({"en": "{seeds} seeds · {steps} steps · T = {T} · batch {B} · d = {d}, {L} layers, {h} heads "
                              "· {chars:,} held-out characters",
                        "zh": "{seeds} 个随机种子 · {steps} 步 · T = {T} · 批次 {B} · d = {d}，{L} 层，{h} 个头 "
                              "· {chars:,} 个留出字符"}, lang)
             .format(seeds=len(result["seeds"]), steps=result["steps"], T=result["context"], B=result["batch_size"],
                     d=result["d_model"], L=result["layers"], h=result["heads"], chars=result["eval_chars"])]
    widths = (16, 8) + (12,) * len(COLUMNS)
    lines.append(" ".join(i18n.ljust(h, w) for h, w in zip(head, widths)))
    for name, stats in result["summary"].items():
        runs = [r for r in result["runs"] if r["model"] == name]
        cells = (i18n.pick(MODEL_NAMES.get(name, {"en": name, "zh": name}), lang), f"{runs[0]['params']:,}",
                 *(_cell(stats.get(key)) for key in COLUMNS))
        lines.append(" ".join(i18n.ljust(c, w) for c, w in zip(cells, widths)))
    return "\n".join(lines)
