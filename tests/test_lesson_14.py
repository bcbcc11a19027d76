"""Lesson 14 (going fast): the cost formulas against what torch really does, the online-softmax attention against
PyTorch's kernel, the benchmark-table reader, the cost widget and the exercise checks."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

import course_utils as cu
from course_lab import i18n
from course_lab.lessons import l14_fast as l14


@pytest.fixture(autouse=True)
def _english():
    i18n.set_language("en")
    yield
    i18n.set_language(None)


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
    _, weights = cu.scaled_dot_product_attention(q, k, v)
    assert weights.numel() * weights.element_size() == l14.attention_weights_bytes(2, 33, 4, dtype)
    assert l14.flash_stats_bytes(2, 33, 4) == 2 * 4 * 33 * 4             # one float32 per query and head


def test_kv_cache_bytes_match_a_real_cache():
    gpt = cu.GPT(vocab_size=50, d_model=48, n_heads=4, n_layers=3, d_ff=96, block_size=64, dropout=0.0).eval()
    cache = cu.KVCache()
    with torch.no_grad():
        gpt(torch.randint(0, 50, (2, 21)), cache=cache)
    layers = [block.self_attn for block in gpt.blocks.layers]
    measured = sum(t.numel() * t.element_size() for layer in layers for t in cache.get(layer))
    assert measured == l14.kv_cache_bytes(n_layers=3, batch=2, seq_len=21, d_model=48)


@settings(max_examples=40, deadline=None)
@given(t_q=st.integers(1, 40), t_k=st.integers(1, 70), d=st.sampled_from([4, 8, 16]), block=st.integers(1, 80),
       scale=st.floats(0.1, 30.0), seed=st.integers(0, 2**16))
def test_tiled_attention_equals_sdpa(t_q, t_k, d, block, scale, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, t_q, d, generator=g, dtype=torch.float64) * scale     # large scores: the running max
    k = torch.randn(2, 3, t_k, d, generator=g, dtype=torch.float64)             # must keep exp() finite
    v = torch.randn(2, 3, t_k, d, generator=g, dtype=torch.float64)
    got = l14.tiled_attention(q, k, v, block)
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
    text = l14.format_results(table)
    assert "Fake GPU" in text and "0.75" in text and "4.00x" in text                  # ratio and speed-up


def test_cost_widget_state_and_divisibility_message():
    fig, state = l14._render_cost(seq_len=4096, d_model=384, n_heads=6, n_layers=6, dtype="bfloat16")
    assert state["quadratic_share"] > 0.5                               # T > 2d: the T² terms dominate
    written, fused, cache = state["memory_gib"].values()
    assert written == 6 * l14.attention_weights_bytes(1, 4096, 6, "bfloat16") / 2**30
    assert fused < written and cache > 0
    with pytest.raises(ValueError, match="not divisible"):
        l14._render_cost(seq_len=128, d_model=100, n_heads=3, n_layers=1, dtype="float32")
    w = l14.build_cost_widget()
    w.controls["seq_len"].value = 128
    assert w.state["quadratic_share"] < 0.5 and not w.error
    w.controls["n_heads"].value = 5                                     # 384 is not divisible by 5
    assert w.error and "divisible" in w.error


def test_exercise_checks_accept_solutions_and_reject_mistakes(capsys):
    assert l14.check_attention_flops(lambda b, t, d: l14.attention_flops(b, t, d)["total"])
    assert not l14.check_attention_flops(lambda b, t, d: 8 * b * t * d * d)              # forgot the T² terms
    assert l14.check_kv_cache_bytes(lambda n, b, t, d, nbytes: 2 * n * b * t * d * nbytes)
    assert not l14.check_kv_cache_bytes(lambda n, b, t, d, nbytes: n * b * t * d * nbytes)  # keys only

    def merge(s1, s2):
        m = torch.maximum(s1.amax(-1, keepdim=True), s2.amax(-1, keepdim=True))
        total = torch.exp(s1 - m).sum(-1, keepdim=True) + torch.exp(s2 - m).sum(-1, keepdim=True)
        return torch.cat([torch.exp(s1 - m), torch.exp(s2 - m)], -1) / total

    def naive(s1, s2):
        e = torch.exp(torch.cat([s1, s2], -1) * 10)                       # overflows: inf / inf
        return e / e.sum(-1, keepdim=True)

    assert l14.check_merge_softmax_blocks(merge)
    assert not l14.check_merge_softmax_blocks(naive)
    assert not l14.check_merge_softmax_blocks(lambda s1, s2: 1 / 0)      # a crash is reported, not raised
    out = capsys.readouterr().out
    assert "running maximum" in out or "inf" in out
