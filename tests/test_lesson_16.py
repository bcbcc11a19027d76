"""Lesson 16 (the modern decoder block): the RoPE and GQA widgets, the comparison reader, and the exercise checks,
whose private references are checked here against Hugging Face's Llama and PyTorch's attention."""

from __future__ import annotations

import json
import math

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from exercise_answers_16 import gqa_attention, gqa_by_view, llama_block_params, rope_at, rope_at_interleaved

from course_lab import i18n
from course_lab.lessons import l16_modern_decoder as l16
from course_lab.lessons.l16_modern_decoder import checks as l16_checks  # the checks' private references

matplotlib.use("Agg")

pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


# --- the checks' references against Hugging Face and PyTorch ------------------------------------------------

def test_rope_reference_equals_hugging_face_and_its_interleaved_twin():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 7, 16, generator=g)
    positions = torch.tensor([[0, 0, 0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10, 11]])
    rotary = LlamaRotaryEmbedding(LlamaConfig(hidden_size=48, num_attention_heads=3))
    cos, sin = rotary(x, positions)
    want, _ = apply_rotary_pos_emb(x, x, cos, sin)
    torch.testing.assert_close(l16_checks._rope_reference(x, positions, 10000.0, "half").float(), want,
                               atol=1e-5, rtol=1e-5)
    perm = torch.cat([torch.arange(0, 16, 2), torch.arange(1, 16, 2)])          # evens, then odds
    inter = l16_checks._rope_reference(x, positions, 10000.0, "interleaved")
    torch.testing.assert_close(inter[..., perm], l16_checks._rope_reference(x[..., perm], positions, 10000.0, "half"))


def test_gqa_reference_equals_sdpa_with_enable_gqa():
    g = torch.Generator().manual_seed(1)
    for h, h_kv, t, t_k in ((8, 2, 5, 5), (6, 3, 2, 9), (4, 1, 4, 4)):
        q = torch.randn(2, h, t, 8, generator=g, dtype=torch.float64)
        k, v = torch.randn(2, 2, h_kv, t_k, 8, generator=g, dtype=torch.float64)
        keep = torch.ones(t, t_k, dtype=torch.bool).tril(t_k - t)
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)
        torch.testing.assert_close(l16_checks._gqa_reference(q, k, v), want)


def test_block_params_equals_hugging_face_layer():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    for d, h, h_kv, f in ((64, 4, 2, 176), (96, 6, 3, 256), (32, 4, 4, 80)):
        config = LlamaConfig(hidden_size=d, num_attention_heads=h, num_key_value_heads=h_kv, intermediate_size=f)
        counted = sum(p.numel() for p in LlamaDecoderLayer(config, 0).parameters())
        assert l16_checks._llama_block_params(d, h, h_kv, f) == counted


# --- every right answer is accepted ---------------------------------------------------------------------------

@pytest.mark.parametrize("check, answer", [
    (l16.check_rope_at, rope_at), (l16.check_rope_at, rope_at_interleaved),
    (l16.check_rope_at, lambda x, p, base=10000.0: rope_at(x.float(), p, base).double()),   # float32 inside
    (l16.check_gqa_attention, gqa_attention), (l16.check_gqa_attention, gqa_by_view),
    (l16.check_llama_block_params, llama_block_params),
])
def test_checks_accept_every_right_answer(capsys, check, answer):
    assert check(answer) is True
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("check, wrong, message", [
    (l16.check_gqa_attention, lambda q, k, v: gqa_attention(q, k, v, causal="none"), "no causal mask"),
    (l16.check_gqa_attention, lambda q, k, v: gqa_attention(q, k, v) * math.sqrt(q.size(-1)), "values differ"),
    (l16.check_gqa_attention, lambda q, k, v: q[:, :1], "shape"),
    (l16.check_rope_at, lambda x, p, base=10000.0: rope_at(x, p, 10000.0 if base != 10000.0 else 500.0),
     "neither layout"),
    (l16.check_rope_at, lambda x, p, base=10000.0: x, "neither layout"),
    (l16.check_llama_block_params, lambda d, h, h_kv, f: llama_block_params(d, h, h_kv, f) - 2 * d, "RMSNorm"),
    (l16.check_llama_block_params, lambda d, h, h_kv, f: str(llama_block_params(d, h, h_kv, f)), "expected"),
])
def test_checks_name_the_mistake(capsys, check, wrong, message):
    assert check(wrong) is False
    out = capsys.readouterr().out
    assert "✗" in out and message in out, out


def test_gqa_check_allows_plain_sdpa_after_the_grouping(capsys):
    def grouped_then_sdpa(q, k, v):
        group = q.size(1) // k.size(1)
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        keep = torch.ones(q.size(2), k.size(2), dtype=torch.bool).tril(k.size(2) - q.size(2))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert l16.check_gqa_attention(grouped_then_sdpa) is True


def test_checks_speak_chinese(capsys):
    i18n.set_language("zh")
    assert l16.check_gqa_attention(lambda q, k, v: gqa_attention(q, k, v, tile=True)) is False
    assert "平铺" in capsys.readouterr().out
    assert l16.check_rope_at(rope_at) is True
    assert "正确" in capsys.readouterr().out


# --- widgets ------------------------------------------------------------------------------------------------

def test_rope_scores_depend_on_the_distance_only():
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 32, generator=g)
    s = l16.rope_scores(q, k, [0, 3, 100])
    assert s[0] == pytest.approx(float(q @ k))
    x = torch.stack([q, k])[None, None]                                          # (1, 1, 2, 32)
    for m in (0, 17, 400):
        for delta in (3, 100):
            r = rope_at(x.double(), torch.tensor([[m, m + delta]]))[0, 0]
            assert float(r[0] @ r[1]) == pytest.approx(s[1 if delta == 3 else 2], abs=1e-9)
    with pytest.raises(ValueError, match="even"):
        l16.rope_scores(torch.ones(5), torch.ones(5), [0])


def test_rope_widget_decays_for_ones_and_follows_the_base():
    w = l16.build_rope_widget()
    s = w.state["scores"]
    assert s[0] == pytest.approx(64) and np.abs(s[200:]).max() < 0.5 * s[0]      # the long-term decay
    line = w.figure.axes[0].lines[0]
    np.testing.assert_allclose(line.get_ydata(), s)
    many = w.state["pairs_slower_than_window"]
    w.controls["log10_base"].value = 6.0
    assert w.state["pairs_slower_than_window"] > many
    w.controls["d_k"].value = 16
    assert len(w.state["wavelengths"]) == 8
    w.controls["vectors"].value = "independent"
    assert abs(w.state["scores"][0]) < 16 * 4


def test_gqa_widget_bytes_and_refusal():
    w = l16.build_gqa_widget()
    assert w.state["chosen_gib"] == pytest.approx(8.0) and w.state["saving"] == 4     # Llama 3 8B, 8 × 8192
    heights = [p.get_height() for p in w.figure.axes[0].patches]
    np.testing.assert_allclose(heights, w.state["gib"])
    assert w.state["options"] == [1, 2, 4, 8, 16, 32]
    w.controls["n_kv_heads"].value = 3
    assert w.error is not None and "divisor" in w.error and w.state["saving"] == 4
    w.controls["n_kv_heads"].value = 32
    assert w.error is None and w.state["saving"] == 1
    assert l16.gqa_cache_gib(32, 1, 1024, 8, 128, "float32") == pytest.approx(2 * 32 * 1024 * 8 * 128 * 4 / 2**30)


def test_widgets_speak_chinese():
    i18n.set_language("zh")
    w = l16.build_gqa_widget()
    assert "键/值头数" in w.figure.axes[0].get_xlabel()
    assert "距离" in l16.build_rope_widget().figure.axes[0].get_xlabel()


# --- the measured comparison ------------------------------------------------------------------------------------

def test_load_comparison_missing_and_present(tmp_path):
    assert l16.load_comparison(tmp_path / "none.json") is None
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"command": "python benchmarks/compare_llama_gpt.py", "runs": []}))
    assert l16.load_comparison(path)["runs"] == []


def test_the_benchmark_runs_end_to_end(tmp_path):
    """benchmarks/compare_llama_gpt.py on a tiny setting (the bundled text sample): three models at the GPT's
    parameter count, the sliding and the whole-window scores, and the JSON the lesson reads."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "compare_llama_gpt.py"
    spec = importlib.util.spec_from_file_location("compare_llama_gpt", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "r.json"
    assert bench.main(["--steps", "3", "--context", "16", "--eval-chars", "300", "--seeds", "0", "1", "--d-model",
                       "16", "--heads", "4", "--kv-heads", "2", "--layers", "1", "--gpt-d-ff", "32", "--batch-size",
                       "4", "--data-dir", str(tmp_path / "no-data"), "--json", str(out)]) == 0
    result = l16.load_comparison(out)
    assert result["seeds"] == [0, 1] and len(result["runs"]) == 6
    params = {r["model"]: r["params"] for r in result["runs"]}
    assert abs(params["llama"] - params["gpt"]) < 3 * 16 and abs(params["gpt_rope"] - params["gpt"]) < 2 * 16 + 2
    gpt, llama = result["summary"]["gpt"], result["summary"]["llama"]
    assert "beyond_T_at_2T_full" not in gpt and llama["beyond_T_at_4T_full"]["n"] == 2
    assert "--steps 3" in l16.command(result) and "bundled sample" in result["data"]
    text = l16.format_comparison(result, "en")
    assert "Llama block" in text and "—" in text
