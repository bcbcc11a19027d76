"""Lesson 14 · going fast: cost arithmetic, FlashAttention's idea in plain torch, the cost widget, exercise checks.

* :func:`attention_flops`, :func:`kv_cache_bytes` and ``course_utils.speed.attention_weights_bytes``: the numbers
  the lesson derives;
* :func:`load_benchmark_results`: the tables measured by ``benchmarks/bench_attention.py --json`` and
  ``benchmarks/bench_gpt.py --json`` (``course_lab/assets/results/`` and its sub-folders such as ``cpu/``);
* :func:`build_cost_widget` and the ``check_*`` functions of the exercises.

The online-softmax tiling (FlashAttention's idea) is written in the notebook itself, not here.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from course_utils.speed import DTYPE_BYTES as BYTES
from course_utils.speed import attention_weights_bytes as attention_weights_bytes

from .. import i18n, viz
from ..assets import asset
from ..exercises import attempt, fail, never_raises, number_problem, passed, run_check, tensor_close
from ..widgets import LessonWidget, dropdown, slider

RESULTS_DIR = asset("results")  # shipped with the package: course_lab/assets/results/**/*.json


def attention_flops(batch: int, seq_len: int, d_model: int) -> dict[str, int]:
    """Forward FLOPs of one self-attention layer (a multiply-add counts 2).

    projections Q, K, V, O: 4 · 2·B·T·d²;  scores QKᵀ: 2·B·T²·d;  weights·V: 2·B·T²·d  (summed over the heads,
    since h·d_k = d). The T² terms overtake the d² terms when T > 2d.
    """
    proj = 8 * batch * seq_len * d_model**2
    quad = 4 * batch * seq_len**2 * d_model
    return {"projections": proj, "scores_and_mix": quad, "total": proj + quad}


def flash_stats_bytes(batch: int, n_heads: int, seq_len: int) -> int:
    """What a fused (FlashAttention) kernel keeps instead: one float32 log-sum-exp per query and head."""
    return batch * n_heads * seq_len * 4


def kv_cache_bytes(n_layers: int, batch: int, seq_len: int, d_model: int, dtype: str = "float32") -> int:
    """Keys and values of every past token in every layer: 2 · L · B · T · d · bytes."""
    return 2 * n_layers * batch * seq_len * d_model * BYTES[dtype]


def load_benchmark_results(directory: Path | None = None, key: str = "mha") -> list[dict]:
    """Every ``*.json`` under ``directory`` (sub-folders included: ``cpu/attention.json``) that holds ``key``.

    ``key="mha"`` selects the tables of ``benchmarks/bench_attention.py --json``, ``key="rows"`` those of
    ``benchmarks/bench_gpt.py --json``; other results (SST-2, MiniLM) are skipped. An empty list when none exist.
    """
    directory = RESULTS_DIR if directory is None else Path(directory)
    paths = sorted(directory.rglob("*.json")) if directory.is_dir() else []
    tables = [json.loads(p.read_text()) for p in paths]
    return [table for table in tables if isinstance(table, dict) and key in table]


def format_results(result: dict, lang: str | None = None) -> str:
    """One measured table as text: ratio = ours / nn.MultiheadAttention, speed-up = written-out / ours.

    The header is in the notebook's language and padded by display width (:func:`i18n.ljust`), so that the
    Chinese labels, two columns wide per character, stay above their numbers.
    """
    head = i18n.pick({"en": ("nn.MHA ms", "ours ms", "written", "ratio", "speed-up"),
                      "zh": ("nn.MHA 毫秒", "我们的毫秒", "写出权重", "比值", "写出/我们")}, lang)
    times = " ".join(i18n.rjust(h, w) for h, w in zip(head[:3], (11, 10, 9)))
    lines = [f"{result['device']} · {result['dtype']} · d_model={result['d_model']}, h={result['heads']}",
             f"{'B':>4} {'T':>5} | {times} | {i18n.rjust(head[3], 5)} {i18n.rjust(head[4], 9)}"]
    for r in result["mha"]:
        lines.append(f"{r['B']:>4} {r['T']:>5} | {r['torch_ms']:11.2f} {r['ours_ms']:10.2f} {r['written_ms']:9.2f} | "
                     f"{r['ours_ms'] / r['torch_ms']:5.2f} {r['written_ms'] / r['ours_ms']:8.2f}x")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------------
# Widget: what a given model shape costs
# ------------------------------------------------------------------------------------------------------------

SEQ_LENS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def _render_cost(seq_len: int, d_model: int, n_heads: int, n_layers: int, dtype: str):
    if d_model % n_heads:
        raise ValueError(i18n.pick({"en": f"d_model={d_model} is not divisible by h={n_heads}: pick other values",
                                    "zh": f"d_model={d_model} 不能被 h={n_heads} 整除：请换一组取值"}))
    viz.use_language()
    gib = 2.0**30
    mem = {
        i18n.pick({"en": "weights T×T (written-out)", "zh": "T×T 权重（显式写出）"}):
            n_layers * attention_weights_bytes(1, n_heads, seq_len, dtype) / gib,
        i18n.pick({"en": "fused kernel stats", "zh": "融合内核的统计量"}):
            n_layers * flash_stats_bytes(1, n_heads, seq_len) / gib,
        i18n.pick({"en": "KV cache", "zh": "KV 缓存"}): kv_cache_bytes(n_layers, 1, seq_len, d_model, dtype) / gib,
    }
    flops = attention_flops(1, seq_len, d_model)
    fig = viz.new_figure((9, 3.2))
    ax1, ax2 = fig.subplots(1, 2)
    ax1.barh(list(mem), list(mem.values()), color=["tab:red", "tab:green", "tab:blue"])
    ax1.set_xlabel(i18n.pick({"en": "GiB per sequence", "zh": "每条序列占用 GiB"}))
    parts = {i18n.pick({"en": "projections", "zh": "投影"}): flops["projections"] / 1e9,
             i18n.pick({"en": r"$QK^T$ and $\cdot V$", "zh": r"$QK^T$ 与 $\cdot V$"}): flops["scores_and_mix"] / 1e9}
    ax2.bar(list(parts), list(parts.values()), color=["tab:gray", "tab:orange"])
    ax2.set_ylabel(i18n.pick({"en": "GFLOPs per layer (forward)", "zh": "每层前向 GFLOPs"}))
    fig.suptitle(f"T={seq_len}, d_model={d_model}, h={n_heads}, L={n_layers}, {dtype}")
    state = {"memory_gib": mem, "gflops": parts, "quadratic_share": flops["scores_and_mix"] / flops["total"]}
    return fig, state


def build_cost_widget(seq_len: int = 1024, d_model: int = 384, n_heads: int = 6, n_layers: int = 6,
                      dtype: str = "bfloat16") -> LessonWidget:
    """Sliders for T, d_model, h, layers and the dtype → memory bars and the FLOP split."""
    import ipywidgets as widgets

    controls = {
        "seq_len": widgets.SelectionSlider(options=list(SEQ_LENS), value=seq_len, description="T",
                                           continuous_update=False),
        "d_model": slider("d_model", 64, 2048, 64, d_model, label={"en": "d_model", "zh": "d_model"}),
        "n_heads": slider("n_heads", 1, 32, 1, n_heads, label={"en": "heads h", "zh": "头数 h"}),
        "n_layers": slider("n_layers", 1, 48, 1, n_layers, label={"en": "layers L", "zh": "层数 L"}),
        "dtype": dropdown("dtype", list(BYTES), dtype, label={"en": "dtype", "zh": "数据类型"}),
    }
    return LessonWidget(controls, _render_cost, title={"en": "What does attention cost?", "zh": "注意力要花多少？"})


# ------------------------------------------------------------------------------------------------------------
# Exercise checks
# ------------------------------------------------------------------------------------------------------------

def _cross_attention_flops(batch: int, t_q: int, t_k: int, d_model: int) -> int:
    """Forward FLOPs of one cross-attention layer: Q and O over the T_q queries, K and V over the T_k keys.

    4·B·T_q·d² + 4·B·T_k·d² (projections) + 4·B·T_q·T_k·d (scores QKᵀ and weights·V).
    """
    return 4 * batch * t_q * d_model**2 + 4 * batch * t_k * d_model**2 + 4 * batch * t_q * t_k * d_model


@never_raises
def check_cross_attention_flops(fn) -> bool:
    """Exercise 1: ``fn(batch, t_q, t_k, d_model)``, the forward FLOPs of one cross-attention layer.

    The self-attention formula with T = T_q (or T_k) is the shortcut the exercise rules out: it is right only when
    T_q = T_k, so every case has T_q ≠ T_k.
    """
    cases = [(1, 10, 30, 64), (4, 128, 512, 256), (2, 700, 50, 32)]
    for args in cases:
        ok, got = attempt(fn, *args)
        if not ok:
            return False
        b, t_q, t_k, d = args
        if any(number_problem(got, attention_flops(b, t, d)["total"]) is None for t in (t_q, t_k)):
            return fail(f"For T_q={t_q}, T_k={t_k} you return self-attention's count for one length. In "
                        "cross-attention Q and O are projected at the T_q decoder positions, K and V at the T_k "
                        "encoder positions, and the score matrix is T_q × T_k.",
                        f"T_q={t_q}、T_k={t_k} 时，你返回的是自注意力在单一长度下的运算量。"
                        "交叉注意力里，Q 和 O 在 T_q 个解码器位置上做投影，"
                        "K 和 V 在 T_k 个编码器位置上做投影，分数矩阵是 T_q × T_k。")
    return run_check(fn, [(args, _cross_attention_flops(*args)) for args in cases], number_problem)


def _gqa_cache_bytes(n_layers: int, batch: int, seq_len: int, n_heads: int, n_kv_heads: int, d_head: int,
                    bytes_per_number: int) -> int:
    """KV cache with grouped-query attention: 2 · L · B · T · h_kv · d_head · bytes (h_kv = h: multi-head)."""
    return 2 * n_layers * batch * seq_len * n_kv_heads * d_head * bytes_per_number


@never_raises
def check_gqa_cache_bytes(fn) -> bool:
    """Exercise 2: ``fn(n_layers, batch, seq_len, n_heads, n_kv_heads, d_head, bytes_per_number)``.

    The multi-head cache (n_heads instead of n_kv_heads) is the shortcut ruled out; keys only (no factor 2) is the
    classic slip.
    """
    cases = [(80, 1, 4096, 64, 8, 128, 2), (32, 8, 2048, 32, 1, 128, 2), (6, 2, 256, 6, 6, 64, 4)]
    for args in cases:
        ok, got = attempt(fn, *args)
        if not ok:
            return False
        n_layers, batch, seq_len, n_heads, n_kv, d_head, nbytes = args
        if n_kv != n_heads and number_problem(got, _gqa_cache_bytes(*args[:4], n_heads, *args[5:])) is None:
            return fail(f"With n_heads={n_heads}, n_kv_heads={n_kv} you return the multi-head cache. In GQA only "
                        "the n_kv_heads shared heads of keys and values are stored; the query heads are never cached.",
                        f"n_heads={n_heads}、n_kv_heads={n_kv} 时，你返回的是多头注意力的缓存大小。GQA 只存 n_kv_heads "
                        "个共享的键头和值头；查询头从来不需要缓存。")
        if number_problem(got, _gqa_cache_bytes(*args) // 2) is None:
            return fail("Half the right size: the cache holds the keys AND the values of every past token.",
                        "只有正确大小的一半：缓存里既有每个过去词元的键，也有它的值。")
    return run_check(fn, [(args, _gqa_cache_bytes(*args)) for args in cases], number_problem)


def _stats(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, ℓ) of each row: the maximum and Σ exp(s − m)."""
    m = s.amax(-1, keepdim=True)
    return m, torch.exp(s - m).sum(-1, keepdim=True)


@never_raises
def check_merge_softmax_stats(fn) -> bool:
    """Exercise 3: ``fn(m1, l1, m2, l2)`` returns the merged ``(m, l)`` of two blocks of the same rows.

    Scores of ±1000 make a merge that exponentiates a maximum (e^1000 = inf) fail, and a merge that adds ℓ1 + ℓ2
    without rescaling gives a wrong ℓ; only the statistics are passed, so softmax(cat(s1, s2)) is not available.
    """
    g = torch.Generator().manual_seed(14)
    s1 = torch.randn(4, 5, generator=g, dtype=torch.float64) + torch.tensor([[1000.0], [-1000.0], [3.0], [0.0]],
                                                                            dtype=torch.float64)
    s2 = torch.randn(4, 7, generator=g, dtype=torch.float64) + torch.tensor([[-1000.0], [1000.0], [0.0], [2.0]],
                                                                            dtype=torch.float64)
    m1, l1 = _stats(s1)
    m2, l2 = _stats(s2)
    m_want, l_want = _stats(torch.cat([s1, s2], -1))
    ok, got = attempt(fn, m1, l1, m2, l2)
    if not ok:
        return False
    if not (isinstance(got, tuple | list) and len(got) == 2):
        return fail(f"Return the pair (m, l), got {type(got).__name__}.",
                    f"应返回二元组 (m, l)，实际得到 {type(got).__name__}。")
    m, ell = (torch.as_tensor(x, dtype=torch.float64) for x in got)
    if not (torch.isfinite(m).all() and torch.isfinite(ell).all()):
        return fail("inf/NaN for scores near ±1000: never take exp of a maximum (e^1000 = inf). Multiply each sum by "
                    "exp(m_i − m), the difference between its own maximum and the new one.",
                    "分数在 ±1000 附近时出现了 inf/NaN：不要对最大值本身取 exp（e^1000 = inf）。"
                    "每个和都乘以 exp(m_i − m)，即它自己的最大值与新最大值之差。")
    if not tensor_close(m, m_want, "m", "m", 1e-9):
        return False
    if ell.shape == l_want.shape and torch.allclose(ell, l1 + l2):
        return fail("l = l1 + l2 adds sums taken relative to two different maxima: rescale each by exp(m_i − m) first.",
                    "l = l1 + l2 把相对于两个不同最大值求出的和直接相加了：要先把每个和乘以 exp(m_i − m)。")
    if not tensor_close(ell, l_want, "l", "l", 1e-9):
        return False
    return passed("Correct: exp(s − m) / l is now the softmax of the whole row, computed from two summaries.",
                  "正确：现在 exp(s − m) / l 就是整行的 softmax，而它只用到了两块的摘要。")
