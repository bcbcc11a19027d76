"""Lesson 14 · going fast: cost arithmetic, FlashAttention's idea in plain torch, the cost widget, exercise checks.

* :func:`attention_flops`, :func:`kv_cache_bytes`: the numbers the lesson derives (the weights' memory is
  ``course_utils.speed.attention_weights_bytes``, which lesson 00's exercise 3 asks for);
* :func:`load_benchmark_results`: the tables measured by ``benchmarks/bench_attention.py --json`` and
  ``benchmarks/bench_gpt.py --json`` (``course_lab/assets/results/`` and its sub-folders such as ``cpu/``);
* :func:`build_cost_widget` and the ``check_*`` functions of the exercises.

The online-softmax tiling (FlashAttention's idea) is written in the notebook; Exercise 3's check keeps a private copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from course_utils.speed import DTYPE_BYTES as BYTES
from course_utils.speed import attention_weights_bytes as _attention_weights_bytes  # lesson 00's Ex 3 answer

from .. import i18n, viz
from ..assets import asset
from ..exercises import (
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    is_tensor,
    never_raises,
    number_problem,
    passed,
    run_check,
    watching_installed,
)
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
    """One measured table as text: ratio = ours / nn.MultiheadAttention, speed-up = written-out / ours. A time is
    the median of the repeats, shown as ``median [min–max]`` where the file records the spread (``torch_ms_min``,
    ``torch_ms_max``, ...: ``benchmarks/bench_attention.py --json`` writes them). Padded by display width
    (:func:`i18n.rjust`), so that the Chinese labels, two columns wide per character, stay above their numbers.
    """
    head = i18n.pick({"en": ("nn.MHA ms", "ours ms", "written", "ratio", "speed-up"),
                      "zh": ("nn.MHA（毫秒）", "本课实现（毫秒）", "写出权重", "比值", "加速比")}, lang)
    spread = lambda r, k: f" [{r[k + '_min']:.2f}–{r[k + '_max']:.2f}]" if k + "_max" in r else ""  # noqa: E731
    cells = [[f"{r[k]:.2f}{spread(r, k)}" for k in ("torch_ms", "ours_ms", "written_ms")] for r in result["mha"]]
    widths = [max(w, i18n.width(h), *(len(c[i]) for c in cells)) for i, (h, w) in enumerate(zip(head, (11, 10, 9)))]
    times = " ".join(i18n.rjust(h, w) for h, w in zip(head[:3], widths))
    lines = [f"{result['device']} · {result['dtype']} · d_model={result['d_model']}, h={result['heads']}",
             f"{'B':>4} {'T':>5} | {times} | {i18n.rjust(head[3], 5)} {i18n.rjust(head[4], 9)}"]
    for r, row in zip(result["mha"], cells):
        lines.append(f"{r['B']:>4} {r['T']:>5} | {' '.join(c.rjust(w) for c, w in zip(row, widths))} | "
                     f"{r['ours_ms'] / r['torch_ms']:5.2f} {r['written_ms'] / r['ours_ms']:8.2f}"
                     + i18n.pick({"en": "x", "zh": "×"}, lang))
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
            n_layers * _attention_weights_bytes(1, n_heads, seq_len, dtype) / gib,
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

    if seq_len not in SEQ_LENS:  # the slider's own TraitError says only "Invalid selection: value not found"
        raise ValueError(f"seq_len={seq_len!r} is not one of the slider's values {SEQ_LENS}: pick one of them")
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
    import torch.profiler
    import torch.utils.flop_counter

    g = fresh_generator()                               # the last case is drawn afresh: no table passes
    cases = [(1, 10, 30, 64), (4, 128, 512, 256), (2, 700, 50, 32),
             (fresh_int(1, 9, g), fresh_int(1, 2049, g), fresh_int(1, 2049, g), fresh_int(1, 1025, g))]
    # Measuring is not deriving: a FLOP counter run around a real attention module gives the number without the
    # formula the exercise asks for.
    counters = [(torch.utils.flop_counter, "FlopCounterMode"), (torch.profiler, "profile")]
    for args in cases:
        with watching_installed(fn, args, counters, ()) as calls:   # a first call loads what fn imports
            ok, got = attempt(fn, *args)
        if not ok:
            return False
        if calls:
            return fail(f"You measured with {calls[0]} around a module: that counts, it does not derive. Write the "
                        "count as a formula in batch, T_q, T_k and d_model, term by term.",
                        f"你用 {calls[0]} 围着一个模块测了一下：那是计数，不是推导。"
                        "请把运算量写成关于 batch、T_q、T_k、d_model 的公式，一项一项地写。")
        b, t_q, t_k, d = args
        for t_proj, where_en, where_zh in ((t_q, "the T_q decoder positions", "T_q 个解码器位置"),
                                           (t_k, "the T_k encoder positions", "T_k 个编码器位置")):
            if number_problem(got, 8 * b * t_proj * d * d + 4 * b * t_q * t_k * d) is None:
                return fail(f"For T_q={t_q}, T_k={t_k}: the score terms are right, but you projected all four of Q, K, "
                            f"V, O at {where_en}. K and V are projections of the encoder output (T_k rows), Q and "
                            "O of the decoder states (T_q rows).",
                            f"T_q={t_q}、T_k={t_k} 时：分数那几项对了，但你把 Q、K、V、O 四个投影都放在了{where_zh}上。"
                            "K 和 V 是对编码器输出（T_k 行）做投影，Q 和 O 是对解码器状态（T_q 行）做投影。")
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
    g = fresh_generator()                               # the last case is drawn afresh: no table passes
    h = fresh_int(1, 33, g)
    limit = fresh_int(1, h + 1, g)
    kv = max(d for d in range(1, limit + 1) if h % d == 0)          # a divisor of h: the groups share a head
    cases = [(80, 1, 4096, 64, 8, 128, 2), (32, 8, 2048, 32, 1, 128, 2), (6, 2, 256, 6, 6, 64, 4),
             (fresh_int(1, 97, g), fresh_int(1, 17, g), fresh_int(1, 8193, g), h, kv, 16 * fresh_int(1, 17, g),
              (1, 2, 4)[fresh_int(0, 3, g)])]
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


def _tiled_rows(s: torch.Tensor, v: torch.Tensor, block: int, rescale_ell: bool) -> torch.Tensor:
    """The lesson's tiled loop on given scores ``s (T_q, T_k)``; ``rescale_ell=False`` is Exercise 3's planted bug."""
    m = torch.full((s.shape[0], 1), float("-inf"), dtype=s.dtype)
    ell, a = torch.zeros_like(m), torch.zeros(s.shape[0], v.shape[-1], dtype=s.dtype)
    for start in range(0, s.shape[-1], block):
        sb = s[:, start:start + block]
        m_new = torch.maximum(m, sb.amax(-1, keepdim=True))
        rescale, p = torch.exp(m - m_new), torch.exp(sb - m_new)
        ell = (ell * rescale if rescale_ell else ell) + p.sum(-1, keepdim=True)
        a, m = a * rescale + p @ v[start:start + block], m_new
    return a / ell


def _bug_cases(g: torch.Generator) -> list[tuple[torch.Tensor, int]]:
    """Integer scores (ties on purpose) with drawn sizes; blocks of 1, in between, and one block for the whole row."""
    cases = []
    for kind in ("one", "some", "some", "all"):
        t_k = fresh_int(6, 21, g)
        block = {"one": 1, "some": fresh_int(2, t_k, g), "all": t_k + fresh_int(0, 3, g)}[kind]
        cases.append((torch.randint(-3, 4, (fresh_int(16, 33, g), t_k), generator=g).double(), block))
    return cases


@never_raises
def check_tiling_bug(fn) -> bool:
    """Exercise 3: ``fn(scores (T_q, T_k), block) -> bool (T_q,)``: the rows for which the tiled loop that forgets to
    rescale ℓ still returns softmax(scores) @ V. The check runs the buggy loop itself on drawn integer scores (ties
    included) and random V; the answer is a prediction about rows, not a number to copy."""
    g = fresh_generator()
    for s, block in _bug_cases(g):
        v = torch.randn(s.shape[1], 3, generator=g, dtype=torch.float64)
        want = (_tiled_rows(s, v, block, False) - torch.softmax(s, -1) @ v).abs().amax(-1) < 1e-9
        ok, got = attempt(fn, s.clone(), block)
        if not ok or not is_tensor(got, want.shape, "rows still right", "仍然正确的行", dtype=torch.bool):
            return False
        if torch.equal(got, want):
            continue
        row = int((got != want).nonzero()[0])
        shown = ", ".join(f"{int(x)}" for x in s[row])
        first, rest = float(s[row, :block].max()), float(s[row, block:].max()) if block < s.shape[1] else None
        if rest is not None and first == rest and bool(want[row]):
            return fail(f"Row ({shown}) with block = {block}: a later block that only ties the maximum does not move "
                        "m, so rescale = exp(0) = 1 and the missing factor does no harm: this row is still right.",
                        f"分数为 ({shown})、block = {block} 的这一行：后面的块只是追平了最大值，m 不变，"
                        "rescale = exp(0) = 1，漏掉这个因子没有影响：这一行仍然正确。")
        if not bool(got.any()):
            return fail("No row is right, you say: yet here the buggy loop is exact on some rows (on all of them "
                        "when one block holds the whole row). Which ones?",
                        "你认为没有一行是对的：可是这里有些行，有缺陷的循环算得完全正确"
                        "（一块就装下整行时，所有行都对）。是哪些行？")
        verdict_en, verdict_zh = ("still right", "仍然正确") if bool(want[row]) else ("wrong", "是错的")
        return fail(f"Row ({shown}) with block = {block}: the buggy loop's output is {verdict_en} here, you said the "
                    "opposite. When is exp(m − m_new) different from 1, after the first block?",
                    f"分数为 ({shown})、block = {block} 的这一行：有缺陷的循环在这里的输出{verdict_zh}，"
                    "你的判断正好相反。第一块之后，exp(m − m_new) 什么时候不等于 1？")
    return passed("Correct: the bug is invisible exactly when the row's maximum is in the first block, so the running "
                  "maximum never moves. A test on one block, or on rows whose largest score comes first, never sees "
                  "it. The fix: ell = ell * rescale + p.sum(dim=-1, keepdim=True).",
                  "正确：只有当这一行的最大值落在第一块里、当前最大值从此不再变化时，这个缺陷才看不出来。只用一块做测试，"
                  "或者测试的行恰好最大分数排在最前面，都发现不了它。"
                  "修正：ell = ell * rescale + p.sum(dim=-1, keepdim=True)。")
