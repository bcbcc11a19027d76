"""Lesson 07 (encoder and decoder): parameter counts, shapes, stale-residual demo, widget, exercise checks."""

from __future__ import annotations

import matplotlib
import pytest
import torch
from torch import nn

import course_utils as cu
from course_lab import i18n, viz
from course_lab.lessons import l07_encoder_decoder as l07
from course_utils import interop
from course_utils.masks import causal_mask, padding_mask, to_torch_attn_mask, to_torch_key_padding_mask

matplotlib.use("Agg")


pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


# --- parameter counts ---------------------------------------------------------------------------------------

def _measured_breakdown(model):
    """What lesson 07's cell types: count a real model per component with l07.component_of."""
    counts = dict.fromkeys(l07.COMPONENTS, 0)
    for name, p in model.named_parameters():
        counts[l07.component_of(name)] += p.numel()
    return counts


@pytest.mark.parametrize("tie, final_norm", [(False, False), (True, False), (False, True), (True, True)])
def test_breakdown_formula_matches_a_real_model(tie, final_norm):
    model = cu.Transformer(20, 24, d_model=32, n_heads=4,
                           n_encoder_layers=2, n_decoder_layers=2, d_ff=64, tie_weights=tie, final_norm=final_norm)
    measured = _measured_breakdown(model)
    assert measured == l07.parameter_breakdown(32, 4, 2, 64, 20, 24, tie_output=tie, final_norm=final_norm)
    assert sum(measured.values()) == sum(p.numel() for p in model.parameters())


def test_base_model_counts():
    base = l07.build_base_model()
    assert all(p.is_meta for p in base.parameters())
    assert sum(p.numel() for p in base.parameters()) == 63_119_496
    assert _measured_breakdown(base) == l07.parameter_breakdown(share_embeddings=True, tie_output=True)
    untied = l07.build_base_model(share_embeddings=False, tie_output=False)
    assert sum(p.numel() for p in untied.parameters()) == 63_119_496 + 2 * 37000 * 512
    assert l07._decoder_layer_params(512, 2048) == 8 * 512 ** 2 + 2 * 512 * 2048 + 2048 + 15 * 512
    with torch.device("meta"):
        layer = cu.DecoderLayer(512, 8, 2048)
    assert sum(p.numel() for p in layer.parameters()) == l07._decoder_layer_params(512, 2048)


def test_breakdown_does_not_depend_on_heads_and_validates():
    assert l07.parameter_breakdown(n_heads=1) == l07.parameter_breakdown(n_heads=16)
    with pytest.raises(ValueError, match="divisible"):
        l07.parameter_breakdown(512, 3)
    with pytest.raises(ValueError, match="one vocabulary"):
        l07.parameter_breakdown(src_vocab=100, tgt_vocab=200, share_embeddings=True)


def test_format_count():
    assert l07.format_count(63_119_496) == "63.12M"
    assert l07.format_count(12_345) == "12.3k"
    assert l07.format_count(640) == "640"


# --- shapes -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("d_model, heads, src_len, tgt_len", [(32, 4, 7, 5), (24, 3, 4, 9)])
def test_shape_table_matches_a_real_forward(d_model, heads, src_len, tgt_len):
    """The shape walk lesson 07 types (here with hooks), on two shapes: the formula table is what a model gives."""
    model = cu.Transformer(20, 11, d_model=d_model, n_heads=heads,
                           n_encoder_layers=2, n_decoder_layers=1, d_ff=48, dropout=0.0).eval()
    src = torch.randint(1, 20, (2, src_len))
    src[0, -2:] = 0
    tgt = torch.randint(1, 11, (2, tgt_len))
    shapes = {"src_ids": tuple(src.shape), "tgt_ids": tuple(tgt.shape),
              "src_mask": tuple(cu.padding_mask(src, model.pad_id).shape)}
    stages = {"src_vectors": model.src_pos, "memory": model.encoder, "tgt_vectors": model.tgt_pos,
              "dec_out": model.decoder, "logits": model.lm_head}
    hooks = [m.register_forward_hook(lambda _m, _i, out, name=name: shapes.__setitem__(name, tuple(out.shape)))
             for name, m in stages.items()]
    with torch.no_grad(), cu.record_attention(model.decoder.layers[-1]):
        model(src, tgt)
    for h in hooks:
        h.remove()
    shapes["self_weights"] = tuple(model.decoder.layers[-1].self_attn.last_weights.shape)
    shapes["cross_weights"] = tuple(model.decoder.layers[-1].cross_attn.last_weights.shape)
    assert shapes == l07.shape_table(2, src_len, tgt_len, d_model, heads, 11)
    assert set(shapes) == set(l07.STAGES)


def test_shape_markdown_both_languages():
    shapes = l07.shape_table(2, 7, 5, 32, 4, 24)
    en = l07.shape_markdown(shapes, "en")
    zh = l07.shape_markdown(shapes, "zh")
    assert "| cross-attention weights | `(B, h, T, S)` | `(2, 4, 5, 7)` |" in en
    assert "交叉注意力权重" in zh and len(en.splitlines()) == len(l07.STAGES) + 2


# --- the stale residual and cross-attention -----------------------------------------------------------------

def _layers(seed=0):
    torch.manual_seed(seed)
    theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    ours = interop.load_decoder_layer_from_torch(cu.DecoderLayer(16, 4, 32, dropout=0.0).eval(), theirs)
    y, memory = torch.randn(2, 5, 16), torch.randn(2, 6, 16)
    src_mask = padding_mask(torch.tensor([[3, 4, 5, 6, 0, 0], [3, 4, 5, 6, 7, 8]]), 0)
    kwargs = dict(tgt_mask=to_torch_attn_mask(causal_mask(5)),
                  memory_key_padding_mask=to_torch_key_padding_mask(src_mask))
    return ours, theirs, y, memory, src_mask, kwargs


def _stale_decoder_layer(layer, y, memory, memory_mask):
    """The lesson's stale-residual cell, on course_utils' names: the layer input y added where a belongs."""
    a = layer.self_attn_residual.norm(y + layer.self_attn(y, is_causal=True))
    b = layer.cross_attn_residual.norm(y + layer.cross_attn(a, memory, mask=memory_mask))
    return layer.ffn_residual.norm(b + layer.ffn(b))


def test_stale_residual_is_far_from_pytorch_while_ours_matches():
    ours, theirs, y, memory, src_mask, kwargs = _layers()
    with torch.no_grad():
        ref = theirs(y, memory, **kwargs)
        good = ours(y, memory, None, src_mask)
        stale = _stale_decoder_layer(ours, y, memory, src_mask)
    torch.testing.assert_close(good, ref, atol=1e-6, rtol=1e-6)
    assert (stale - ref).abs().max() > 0.1
    assert ((stale - ref).norm() / ref.norm()) > 0.05


def test_pre_norm_reference_matches_the_library():
    layer, y, memory, mask = l07.checks._decoder_case()
    with torch.no_grad():
        ours = l07.checks._pre_norm_decoder_layer(layer, y, memory, mask)
        torch.testing.assert_close(ours, layer(y, memory, None, mask))


def test_cross_attention_grid_has_one_panel_per_head_and_zero_pad_columns():
    """The lesson's plot cell: record_attention on the model, one row of panels per decoder layer."""
    torch.manual_seed(0)
    model = cu.Transformer(20, 24, d_model=32, n_heads=4,
                           n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0).eval()
    src_tokens, tgt_tokens = l07.demo_position_labels()
    src = torch.tensor([[5, 3, 7, 2, 0, 0]])
    tgt = torch.tensor([[1, 5, 6, 2, 9]])
    with torch.no_grad(), cu.record_attention(model):
        model(src, tgt)
    panels = {f"layer {i + 1}": layer.cross_attn.last_weights for i, layer in enumerate(model.decoder.layers)}
    fig = viz.plot_attention_grid(panels, tgt_tokens, src_tokens, lang="en")
    images = [ax.images[0].get_array() for ax in fig.axes if ax.images]
    assert len(images) == 2 * 4
    for img in images:
        assert img.shape == (5, 6)
        assert (img[:, -2:] == 0).all()
    assert all(not m.record_weights for m in model.modules() if isinstance(m, cu.MultiHeadAttention))
    assert src_tokens[-2:] == ["<pad>", "<pad>"] and tgt_tokens[0] == "<bos>"
    assert all(t.startswith(("x", "y", "<")) for t in src_tokens + tgt_tokens)    # positions, not words


# --- widget -------------------------------------------------------------------------------------------------

def _bar_widths(w):
    return [p.get_width() for p in w.figure.axes[0].patches]


def _table_text(w):
    table = w.figure.axes[1].tables[0]
    return [cell.get_text().get_text() for cell in table.get_celld().values()]


def test_widget_layers_heads_d_model_share():
    w = l07.build_size_widget()
    assert w.state["total"] == 63_119_496 and w.renders == 1
    widths, table = _bar_widths(w), _table_text(w)

    w.controls["n_layers"].value = 3
    assert w.state["total"] < 63_119_496 and w.state["counts"]["enc_ffn"] * 2 == 12_598_272
    assert _bar_widths(w) != widths
    assert w.state["counts"]["embeddings"] == 37000 * 512         # the embeddings do not depend on N

    w.controls["n_heads"].value = 16
    assert w.state["shapes"]["cross_weights"] == (2, 16, 5, 7) and w.state["d_k"] == 32
    assert w.state["total"] == sum(l07.parameter_breakdown(512, 1, 3, 2048, share_embeddings=True,
                                                           tie_output=True).values())
    assert sum(w.state["counts"].values()) == w.state["total"]
    assert _table_text(w) != table

    before = w.state["total"]
    w.controls["d_model"].value = 256
    assert w.state["d_ff"] == 1024 and w.state["total"] < before
    assert w.state["shapes"]["memory"] == (2, 7, 256)

    shared_total = w.state["total"]
    w.controls["share"].value = False
    assert w.state["total"] == shared_total + 2 * 37000 * 256


def test_widget_rejects_heads_that_do_not_divide_d_model():
    w = l07.build_size_widget()
    state, renders = dict(w.state), w.renders
    w.controls["n_heads"].value = 3                                 # 512 % 3 != 0
    assert w.error is not None and "divisible" in w.error
    assert w.renders == renders and w.state["n_heads"] == state["n_heads"]
    w.controls["d_model"].value = 96                                # 96 % 3 == 0: valid again
    assert w.error is None and w.state["d_k"] == 32
    with pytest.raises(ValueError):
        l07.build_size_widget(n_heads=5)


def test_widget_speaks_chinese():
    i18n.set_language("zh")
    w = l07.build_size_widget()
    labels = [t.get_text() for t in w.figure.axes[0].get_yticklabels()]
    assert "交叉注意力" in labels and "嵌入矩阵" in labels
    assert "阶段" in _table_text(w)


# --- exercise checks ----------------------------------------------------------------------------------------

def _not_implemented(*args):
    raise NotImplementedError


def _crash(*args):
    raise RuntimeError("boom")


def test_check_decoder_layer(capsys):
    assert l07.check_decoder_layer(l07.checks._pre_norm_decoder_layer) is True
    assert "✓" in capsys.readouterr().out

    state = torch.random.get_rng_state()
    assert l07.check_decoder_layer(_not_implemented) is False
    assert torch.equal(state, torch.random.get_rng_state())          # the check leaves the global RNG alone
    assert "Not attempted" in capsys.readouterr().out

    def stale(layer, y, memory, mask):
        a = y + layer.self_attn(layer.self_attn_residual.norm(y), is_causal=True)
        b = y + layer.cross_attn(layer.cross_attn_residual.norm(a), memory, mask=mask)
        return b + layer.ffn(layer.ffn_residual.norm(b))

    assert l07.check_decoder_layer(stale) is False
    assert "stale residual" in capsys.readouterr().out

    def post_norm(layer, y, memory, mask):
        a = layer.self_attn_residual.norm(y + layer.self_attn(y, is_causal=True))
        b = layer.cross_attn_residual.norm(a + layer.cross_attn(a, memory, mask=mask))
        return layer.ffn_residual.norm(b + layer.ffn(b))

    assert l07.check_decoder_layer(post_norm) is False
    assert "post-norm" in capsys.readouterr().out

    def unmasked(layer, y, memory, mask):
        return l07.checks._pre_norm_decoder_layer(layer, y, memory, None)

    assert l07.check_decoder_layer(unmasked) is False
    assert "memory_mask" in capsys.readouterr().out

    assert l07.check_decoder_layer(lambda layer, y, m, mask: y) is False
    assert "Wrong values" in capsys.readouterr().out
    assert l07.check_decoder_layer(lambda layer, y, m, mask: y[:, :2]) is False
    assert l07.check_decoder_layer(_crash) is False
    assert "RuntimeError" in capsys.readouterr().out


def test_check_decoder_layer_refuses_the_library_layer(capsys):
    assert l07.check_decoder_layer(lambda layer, y, m, mask: layer(y, m, None, mask)) is False
    assert "library's layer" in capsys.readouterr().out
    assert l07.check_decoder_layer(lambda layer, y, m, mask: layer.ffn_residual(
        layer.cross_attn_residual(layer.self_attn_residual(y, lambda h: layer.self_attn(h, is_causal=True)),
                   lambda h: layer.cross_attn(h, m, mask=mask)), layer.ffn)) is False   # the Residual wrappers
    assert "library's layer" in capsys.readouterr().out


def _lean(d_model: int, d_ff: int) -> int:
    """Exercise 2's answer: two attentions and an FFN without biases (8·d² + 2·d·d_ff), three RMSNorms (3·d)."""
    return 8 * d_model * d_model + 2 * d_model * d_ff + 3 * d_model


def test_check_lean_decoder_layer_params(capsys):
    assert l07.check_lean_decoder_layer_params(_lean) is True
    assert l07.check_lean_decoder_layer_params(l07._decoder_layer_params) is False
    assert "biases" in capsys.readouterr().out
    assert l07.check_lean_decoder_layer_params(lambda d, f: _lean(d, f) + 3 * d) is False
    assert "no β" in capsys.readouterr().out
    assert l07.check_lean_decoder_layer_params(_not_implemented) is False
    assert l07.check_lean_decoder_layer_params(_crash) is False


def test_check_reverse_tokens(capsys):
    assert l07.check_reverse_tokens(l07.checks._reverse_tokens_reference) is True
    assert l07.check_reverse_tokens(lambda src, pad: src.flip(1)) is False
    assert "flip" in capsys.readouterr().out
    reference = l07.checks._reverse_tokens_reference       # right values, but a Python loop:
    assert l07.check_reverse_tokens(lambda src, pad: torch.stack([r for r in reference(src, pad)])) is False
    assert "loops" in capsys.readouterr().out
    assert l07.check_reverse_tokens(lambda src, pad: src) is False
    assert l07.check_reverse_tokens(_not_implemented) is False
    src = torch.tensor([[5, 6, 7, 0], [8, 0, 0, 0]])
    assert l07.checks._reverse_tokens_reference(src, 0).tolist() == [[7, 6, 5, 0], [8, 0, 0, 0]]


def test_checks_speak_chinese(capsys):
    i18n.set_language("zh")
    assert l07.check_reverse_tokens(_not_implemented) is False
    assert "还没有作答" in capsys.readouterr().out
