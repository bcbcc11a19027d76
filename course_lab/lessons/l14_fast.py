"""Lesson 14 · going fast: cost arithmetic, FlashAttention's idea in plain torch, the cost widget, exercise checks.

* :func:`attention_flops`, :func:`attention_weights_bytes`, :func:`kv_cache_bytes`: the numbers the lesson derives;
* :func:`tiled_attention`: attention computed block by block with an *online softmax* (running max and sum), the
  trick FlashAttention uses to never store the T×T weight matrix — checked against ``F.scaled_dot_product_attention``;
* :func:`load_benchmark_results`: the GPU table measured with ``benchmarks/bench_attention.py --json``;
* :func:`build_cost_widget` and the ``check_*`` functions of the exercises.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from .. import i18n, viz
from ..exercises import attempt, fail, is_tensor, never_raises, number_problem, passed, run_check, tensor_close
from ..widgets import LessonWidget, dropdown, slider

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def attention_flops(batch: int, seq_len: int, d_model: int) -> dict[str, int]:
    """Forward FLOPs of one self-attention layer (a multiply-add counts 2).

    projections Q, K, V, O: 4 · 2·B·T·d²;  scores QKᵀ: 2·B·T²·d;  weights·V: 2·B·T²·d  (summed over the heads,
    since h·d_k = d). The T² terms overtake the d² terms when T > 2d.
    """
    proj = 8 * batch * seq_len * d_model**2
    quad = 4 * batch * seq_len**2 * d_model
    return {"projections": proj, "scores_and_mix": quad, "total": proj + quad}


def attention_weights_bytes(batch: int, seq_len: int, n_heads: int, dtype: str = "float32") -> int:
    """Memory of the (B, h, T, T) weight matrix that the written-out path keeps for the backward pass."""
    return batch * n_heads * seq_len**2 * BYTES[dtype]


def flash_stats_bytes(batch: int, seq_len: int, n_heads: int) -> int:
    """What a fused (FlashAttention) kernel keeps instead: one float32 log-sum-exp per query and head."""
    return batch * n_heads * seq_len * 4


def kv_cache_bytes(n_layers: int, batch: int, seq_len: int, d_model: int, dtype: str = "float32") -> int:
    """Keys and values of every past token in every layer: 2 · L · B · T · d · bytes."""
    return 2 * n_layers * batch * seq_len * d_model * BYTES[dtype]


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int = 64) -> torch.Tensor:
    """softmax(q kᵀ/√d) v over key blocks of size ``block`` with an online softmax; never forms all T_k scores.

    For each block the running row maximum m, the running denominator l and the running numerator acc are
    rescaled by exp(m_old − m_new) so that, at the end, acc / l equals the full softmax-weighted sum exactly.
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype, device=q.device)    # (…, T_q, 1)
    l = torch.zeros_like(m)                                                                  # noqa: E741
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype, device=q.device)        # (…, T_q, d_v)
    for start in range(0, k.shape[-2], block):
        s = (q @ k[..., start: start + block, :].transpose(-2, -1)) * scale                 # (…, T_q, block)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        correction = torch.exp(m - m_new)                    # how much the old partial sums shrink
        p = torch.exp(s - m_new)
        l = l * correction + p.sum(dim=-1, keepdim=True)     # noqa: E741
        acc = acc * correction + p @ v[..., start: start + block, :]
        m = m_new
    return acc / l


def load_benchmark_results(directory: Path | None = None) -> list[dict]:
    """Every ``*.json`` written by ``benchmarks/bench_attention.py --json`` (an empty list when none exist).

    Other JSON files in the folder (results of other benchmarks) are skipped: only attention tables have ``mha``.
    """
    directory = RESULTS_DIR if directory is None else Path(directory)
    tables = [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))] if directory.is_dir() else []
    return [table for table in tables if isinstance(table, dict) and "mha" in table]


def format_results(result: dict) -> str:
    """One measured table as text: ratio = ours / nn.MultiheadAttention, speed-up = written-out / ours."""
    lines = [f"{result['device']} · {result['dtype']} · d_model={result['d_model']}, h={result['heads']}",
             f"{'B':>4} {'T':>5} | {'nn.MHA ms':>9} {'ours ms':>8} {'written':>8} | {'ratio':>5} {'speed-up':>8}"]
    for r in result["mha"]:
        lines.append(f"{r['B']:>4} {r['T']:>5} | {r['torch_ms']:9.2f} {r['ours_ms']:8.2f} {r['written_ms']:8.2f} | "
                     f"{r['ours_ms'] / r['torch_ms']:5.2f} {r['written_ms'] / r['ours_ms']:7.2f}x")
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
            n_layers * attention_weights_bytes(1, seq_len, n_heads, dtype) / gib,
        i18n.pick({"en": "fused kernel stats", "zh": "融合内核的统计量"}):
            n_layers * flash_stats_bytes(1, seq_len, n_heads) / gib,
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

@never_raises
def check_attention_flops(fn) -> bool:
    """Exercise 1: ``fn(batch, seq_len, d_model)`` returns the total forward FLOPs of one attention layer."""
    cases = [(args, attention_flops(*args)["total"]) for args in ((1, 128, 64), (4, 1000, 512))]
    return run_check(fn, cases, number_problem)


@never_raises
def check_kv_cache_bytes(fn) -> bool:
    """Exercise 2: ``fn(n_layers, batch, seq_len, d_model, bytes_per_number)``."""
    cases = [(args, math.prod(args) * 2) for args in ((6, 1, 256, 384, 2), (32, 8, 4096, 4096, 2))]
    return run_check(fn, cases, number_problem)


@never_raises
def check_merge_softmax_blocks(fn) -> bool:
    """Exercise 3: ``fn(s1, s2)`` merges two score blocks' (max, sum-of-exp) and returns softmax(cat(s1, s2))."""
    g = torch.Generator().manual_seed(14)
    s1, s2 = torch.randn(3, 5, generator=g) * 20, torch.randn(3, 7, generator=g) * 20
    want = torch.softmax(torch.cat([s1, s2], -1), -1)
    ok, got = attempt(fn, s1, s2)
    if not ok or not is_tensor(got, want.shape, "softmax", "softmax"):
        return False
    if not torch.isfinite(got).all():
        return fail("Your result has inf/NaN: subtract the running maximum before exp.",
                    "结果里有 inf/NaN：取 exp 之前先减去当前最大值。")
    if not tensor_close(got, want, "softmax", "softmax", 1e-6):
        return False
    return passed()
