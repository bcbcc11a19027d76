"""Lesson 14 (going fast): the cost formulas against what torch really does, the online-softmax attention of the
notebook (restated here as the reference) against PyTorch's kernel, the benchmark-table reader, the cost widget and
the exercise checks."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

import course_utils as cu
from course_lab import i18n
from course_lab.lessons import l14_fast as l14

pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


@pytest.mark.parametrize("batch, seq_len, d_model, heads", [(1, 16, 32, 4), (2, 100, 64, 8), (3, 7, 24, 3)])
def test_attention_flops_equals_what_flop_counter_counts(batch, seq_len, d_model, heads):
    mha = cu.MultiHeadAttention(d_model, heads)
    x = torch.randn(batch, seq_len, d_model)
    with FlopCounterMode(display=False) as counter:
        mha(x, need_weights=True)
    assert counter.get_total_flops() == l14.attention_flops(batch, seq_len, d_model)["total"]


def test_quadratic_part_overtakes_projections_at_twice_d_model():
    for d in (64, 384):
        at = l14.attention_flops(1, 2 * d, d)
        assert at["projections"] == at["scores_and_mix"]
        assert l14.attention_flops(1, 2 * d + 1, d)["scores_and_mix"] > l14.attention_flops(1, 2 * d + 1, d)[
            "projections"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_weight_bytes_match_the_tensor_the_written_out_path_keeps(dtype):
    torch_dtype = getattr(torch, dtype)
    q = k = v = torch.randn(2, 4, 33, 8, dtype=torch_dtype)
    _, weights = cu.attention_with_weights(q, k, v)
    assert weights.numel() * weights.element_size() == l14._attention_weights_bytes(2, 4, 33, dtype)
    assert l14.flash_stats_bytes(2, 4, 33) == 2 * 4 * 33 * 4             # one float32 per query and head


def test_kv_cache_bytes_match_a_real_cache():
    gpt = cu.GPT(vocab_size=50, d_model=48, n_heads=4, n_layers=3, d_ff=96, max_len=64, dropout=0.0).eval()
    cache = cu.KVCache()
    with torch.no_grad():
        gpt(torch.randint(0, 50, (2, 21)), cache=cache)
    layers = [block.self_attn for block in gpt.blocks.layers]
    measured = sum(t.numel() * t.element_size() for layer in layers for t in cache.get(layer))
    assert measured == l14.kv_cache_bytes(n_layers=3, batch=2, seq_len=21, d_model=48)


def tiled_attention(q, k, v, block=64):
    """The notebook's online-softmax tiling, restated: running max m, running sum ell, running numerator a."""
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    ell = torch.zeros_like(m)
    a = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block):
        s = q @ k[..., start:start + block, :].transpose(-2, -1) * scale
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        rescale = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        ell = ell * rescale + p.sum(dim=-1, keepdim=True)
        a = a * rescale + p @ v[..., start:start + block, :]
        m = m_new
    return a / ell


def test_notebook_cell_is_the_reference_tiling():
    """The tiling loop lives in the notebook; the copy above must stay the same code."""
    source = (Path(__file__).resolve().parents[1] / "notebooks/source/14_going_fast.md").read_text()
    for line in ("ell = ell * rescale + p.sum(dim=-1, keepdim=True)", "a = a * rescale + p @ v[..., start:start + "
                 "block, :]", "rescale = torch.exp(m - m_new)", "return a / ell"):
        assert line in source


@settings(max_examples=40, deadline=None)
@given(t_q=st.integers(1, 40), t_k=st.integers(1, 70), d=st.sampled_from([4, 8, 16]), block=st.integers(1, 80),
       scale=st.floats(0.1, 30.0), seed=st.integers(0, 2**16))
def test_tiled_attention_equals_sdpa(t_q, t_k, d, block, scale, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, t_q, d, generator=g, dtype=torch.float64) * scale     # large scores: the running max
    k = torch.randn(2, 3, t_k, d, generator=g, dtype=torch.float64)             # must keep exp() finite
    v = torch.randn(2, 3, t_k, d, generator=g, dtype=torch.float64)
    got = tiled_attention(q, k, v, block)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v), atol=1e-10, rtol=1e-10)


def test_benchmark_reader_keeps_attention_tables_and_skips_other_results(tmp_path):
    assert l14.load_benchmark_results(tmp_path / "missing") == []
    table = {"device": "Fake GPU", "dtype": "torch.bfloat16", "d_model": 256, "heads": 8,
             "mha": [{"B": 64, "T": 1024, "torch_ms": 2.0, "ours_ms": 1.5, "written_ms": 6.0}], "encoder_layer": []}
    (tmp_path / "gpu.json").write_text(json.dumps(table))
    (tmp_path / "minilm_sst2.json").write_text(json.dumps({"dev_after": 0.877}))    # another benchmark's result
    (tmp_path / "list.json").write_text("[1, 2]")
    assert l14.load_benchmark_results(tmp_path) == [table]
    (tmp_path / "cpu").mkdir()                                                         # results/cpu/ is read too
    gpt = {"device": "CPU", "rows": [{"amp": "off", "compile": False, "tokens_per_s": 10}]}
    (tmp_path / "cpu" / "attention.json").write_text(json.dumps({**table, "device": "CPU"}))
    (tmp_path / "cpu" / "gpt.json").write_text(json.dumps(gpt))
    assert [t["device"] for t in l14.load_benchmark_results(tmp_path)] == ["CPU", "Fake GPU"]
    assert l14.load_benchmark_results(tmp_path, key="rows") == [gpt]
    text = l14.format_results(table)
    assert "Fake GPU" in text and "0.75" in text and "4.00x" in text                  # ratio and speed-up
    spread = {**table, "mha": [{**table["mha"][0], "ours_ms_min": 1.25, "ours_ms_max": 1.75}]}
    for lang in ("en", "zh"):                         # the columns line up by display width, with a spread or not
        for t in (table, spread):
            rows = l14.format_results(t, lang).splitlines()[1:]
            assert len({i18n.width(r[:r.rindex("|")]) for r in rows}) == 1, rows
    assert "1.50 [1.25–1.75]" in l14.format_results(spread) and "4.00×" in l14.format_results(table, "zh")


def test_cost_widget_state_and_divisibility_message():
    fig, state = l14._render_cost(seq_len=4096, d_model=384, n_heads=6, n_layers=6, dtype="bfloat16")
    assert state["quadratic_share"] > 0.5                               # T > 2d: the T² terms dominate
    written, fused, cache = state["memory_gib"].values()
    assert written == 6 * l14._attention_weights_bytes(1, 6, 4096, "bfloat16") / 2**30
    assert fused < written and cache > 0
    with pytest.raises(ValueError, match="not divisible"):
        l14._render_cost(seq_len=128, d_model=100, n_heads=3, n_layers=1, dtype="float32")
    w = l14.build_cost_widget()
    w.controls["seq_len"].value = 128
    assert w.state["quadratic_share"] < 0.5 and not w.error
    w.controls["n_heads"].value = 5                                     # 384 is not divisible by 5
    assert w.error and "divisible" in w.error


def test_repository_cpu_tables_are_found():
    tables = l14.load_benchmark_results()
    cpu = [t for t in tables if t["device"] == "CPU"]
    assert cpu, "course_lab/assets/results/cpu/attention.json is not read"
    slow = [r["written_ms"] / r["ours_ms"] for r in sorted(cpu[0]["mha"], key=lambda r: r["T"])]
    assert slow == sorted(slow) and slow[-1] > 2               # what the lesson says: the gap grows with T
    assert all(r["ours_ms_min"] <= r["ours_ms"] <= r["ours_ms_max"] for r in cpu[0]["mha"])   # the spread is kept


def test_cross_attention_flops_equal_what_flop_counter_counts():
    mha = cu.MultiHeadAttention(32, 4)
    q, kv = torch.randn(2, 7, 32), torch.randn(2, 19, 32)
    with FlopCounterMode(display=False) as counter:
        mha(q, kv, kv, need_weights=True)
    assert counter.get_total_flops() == l14._cross_attention_flops(2, 7, 19, 32)


def test_gqa_cache_equals_a_real_cache_when_kv_heads_equal_heads():
    assert l14._gqa_cache_bytes(3, 2, 21, 4, 4, 12, 4) == l14.kv_cache_bytes(3, 2, 21, 48)
    assert l14._gqa_cache_bytes(80, 1, 4096, 64, 8, 128, 2) == 1.25 * 2**30    # the figure in the solution


def test_the_checks_tiling_loop_is_exact_and_its_bug_shows_only_when_the_maximum_moves():
    s = torch.randn(40, 23, dtype=torch.float64) * 5
    v = torch.randn(23, 4, dtype=torch.float64)
    for block in (1, 5, 23):
        torch.testing.assert_close(l14._tiled_rows(s, v, block, True), torch.softmax(s, -1) @ v)
        exact = (l14._tiled_rows(s, v, block, False) - torch.softmax(s, -1) @ v).abs().amax(-1) < 1e-9
        assert torch.equal(exact, s[:, :block].amax(-1) == s.amax(-1))


def test_measured_figures_in_the_text_are_the_json_ones():
    """The CPU speed figures the lesson quotes come from course_lab/assets/results/cpu/*.json, not from memory."""
    text = (Path(__file__).resolve().parents[1] / "notebooks/source/14_going_fast.md").read_text()
    attention = next(t for t in l14.load_benchmark_results() if t["device"] == "CPU")
    # The lesson prints the attention table from the file and its text quotes no ratio; the READMEs quote its rows.
    assert not re.search(r"\d\.\d× (slower )?at\s+T = \d+|\d\.\d×, \d\.\d× and", text)
    for readme in ("README.md", "README_zh.md"):
        quoted = (Path(__file__).resolve().parents[1] / readme).read_text()
        for r in attention["mha"]:
            assert (f"| B={r['B']}, T={r['T']} | {r['torch_ms']:.1f} ms | {r['ours_ms']:.1f} ms | "
                    f"{r['written_ms']:.1f} ms | {r['ours_ms'] / r['torch_ms']:.2f} | "
                    f"{r['written_ms'] / r['ours_ms']:.2f}× |") in quoted, (readme, r["T"])
    # the GPT table is printed by the lesson from the file; the READMEs quote its medians, ranges and matmul ratios
    gpt = next(t for t in l14.load_benchmark_results(key="rows") if t["device"] == "CPU")
    root = Path(__file__).resolve().parents[1]
    for readme in ("README.md", "README_zh.md"):
        quoted = (root / readme).read_text()
        for r in gpt["rows"]:
            assert f"{r['tokens_per_s']:,} [{r['tokens_per_s_min']:,}–{r['tokens_per_s_max']:,}]" in quoted
        for key in ("bf16_speedup", "autocast_speedup"):
            assert f"{gpt['matmul'][key]['median']:.2f}" in quoted
    assert "tokens_per_s_runs" not in text and "0.86×" not in text        # no single-run figure in the prose


def test_exercises_have_a_heading_a_check_and_a_solution_each():
    text = (Path(__file__).resolve().parents[1] / "notebooks/source/14_going_fast.md").read_text()
    for n, check in enumerate(("check_cross_attention_flops", "check_gqa_cache_bytes", "check_tiling_bug"), 1):
        section = text.split(f"## Exercise {n} ·")[1].split("## Exercise")[0].split("## Summary")[0]
        assert f"l14.{check}(" in section and section.count("<details>") == 2      # EN and ZH solution


def test_committed_gpt_benchmark_has_repeats_and_a_spread():
    """The CPU table lesson 14 reads: every row repeated (>= 3 runs, kept), median inside [min, max], the matmul
    alone measured in the same run, the command, seed and data that made it recorded, and torch.compile rows."""
    import statistics

    result = json.loads((Path(l14.RESULTS_DIR) / "cpu" / "gpt.json").read_text())
    assert "python benchmarks/bench_gpt.py" in result["command"] and isinstance(result["seed"], int)
    assert result["data"].startswith("tiny-shakespeare")                # not the bundled sample
    assert {(row["amp"], row["compile"]) for row in result["rows"]} >= {("off", False), ("off", True)}
    assert result["note"]                                                # the machine's conditions, in words
    load = result["load_average_1min"]                                   # ... with the load it recorded
    assert f"load average {load['start']:.1f} at the start, {load['end']:.1f} at the end" in result["note"]
    assert {row["amp"] for row in result["rows"]} >= {"off", "bf16"}
    for row in result["rows"]:
        runs = row["tokens_per_s_runs"]
        assert row["repeats"] == len(runs) >= 3
        assert (row["tokens_per_s_min"], row["tokens_per_s_max"]) == (min(runs), max(runs))
        assert row["tokens_per_s"] == round(statistics.median(runs))
        assert row["tokens_per_s_max"] > row["tokens_per_s_min"]        # a real spread, not one run copied
    for spread in [*result["matmul"]["ms"].values(), result["matmul"]["bf16_speedup"],
                   result["matmul"]["autocast_speedup"]]:
        assert len(spread["runs"]) >= 3 and spread["min"] <= spread["median"] <= spread["max"]
        assert spread["median"] == statistics.median(spread["runs"])


def test_exercise_3_title_agrees_with_its_check():
    """Issue 39 §1: the title says what the check does (the lesson's own check sees the bug some rows hide)."""
    text = (Path(__file__).resolve().parents[1] / "notebooks/source/14_going_fast.md").read_text(encoding="utf-8")
    assert "## Exercise 3 · a bug that only some rows hide" in text and "did not see" not in text
