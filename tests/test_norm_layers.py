"""Parity of LayerNorm, encoder/decoder layers and the full Transformer with torch.nn (weights copied)."""

import dataclasses

import pytest
import torch
from torch import nn

from course_utils import DecoderLayer, EncoderLayer, LayerNorm, Residual, RMSNorm, Transformer
from course_utils.config import LayerConfig
from course_utils.interop import (
    load_decoder_layer_from_torch,
    load_encoder_layer_from_torch,
    load_transformer_from_torch,
)
from course_utils.masks import causal_mask, from_torch_key_padding_mask

TOL = {torch.float64: dict(atol=1e-10, rtol=1e-10), torch.float32: dict(atol=1e-5, rtol=1e-5)}
DTYPES = [torch.float64, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [1e-5, 1e-12, 0.1])
def test_layernorm_matches_torch(dtype, eps, device):
    ref = nn.LayerNorm(12, eps=eps, dtype=dtype, device=device)
    nn.init.normal_(ref.weight), nn.init.normal_(ref.bias)
    ours = LayerNorm(12, eps=eps).to(device=device, dtype=dtype)
    ours.load_state_dict(ref.state_dict())
    x = (torch.randn(3, 5, 12, dtype=dtype) * 7 + 3).to(device)
    torch.testing.assert_close(ours(x), ref(x), **TOL[dtype])


def test_layernorm_uses_biased_variance_and_eps_inside_root():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    eps = 0.5
    expected = (x - 2.5) / torch.sqrt(
        torch.tensor(1.25 + eps, dtype=torch.float64)
    )  # var = 1.25 (divide by d)
    torch.testing.assert_close(LayerNorm(4, eps=eps).double()(x), expected, atol=1e-12, rtol=0)


@pytest.mark.skipif(not hasattr(nn, "RMSNorm"), reason="torch.nn.RMSNorm needs torch >= 2.4")
@pytest.mark.parametrize("fused", [True, False])
def test_rmsnorm_matches_torch(fused):
    ref = nn.RMSNorm(10, eps=1e-6, dtype=torch.float64)
    nn.init.normal_(ref.weight)
    ours = RMSNorm(10, eps=1e-6, fused=fused).double()
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(4, 10, dtype=torch.float64)
    torch.testing.assert_close(ours(x), ref(x), atol=1e-10, rtol=1e-10)


def _inputs(dtype, device):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 16, generator=g, dtype=dtype).to(device)
    mem = torch.randn(2, 7, 16, generator=g, dtype=dtype).to(device)
    kpm = torch.zeros(2, 7, dtype=torch.bool, device=device)
    kpm[1, -2:] = True
    return x, mem, kpm


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(dtype, norm_first, activation, device):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(
        16,
        4,
        32,
        dropout=0.0,
        activation=activation,
        batch_first=True,
        norm_first=norm_first,
        dtype=dtype,
        device=device,
    ).eval()
    ours = EncoderLayer(16, 4, 32, dropout=0.0, activation=activation, norm_first=norm_first)
    ours = load_encoder_layer_from_torch(ours.to(device=device, dtype=dtype), ref).eval()
    _, mem, kpm = _inputs(dtype, device)
    torch.testing.assert_close(
        ours(mem, from_torch_key_padding_mask(kpm)), ref(mem, src_key_padding_mask=kpm), **TOL[dtype]
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(dtype, norm_first, device):
    torch.manual_seed(0)
    ref = nn.TransformerDecoderLayer(
        16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=dtype, device=device
    ).eval()
    ours = DecoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first)
    ours = load_decoder_layer_from_torch(ours.to(device=device, dtype=dtype), ref).eval()
    x, mem, kpm = _inputs(dtype, device)
    expected = ref(x, mem, tgt_mask=~causal_mask(5, device=device), memory_key_padding_mask=kpm)
    torch.testing.assert_close(ours(x, mem, None, from_torch_key_padding_mask(kpm)), expected, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_first", [False, True])
def test_full_transformer_matches_nn_transformer(dtype, norm_first, device):
    torch.manual_seed(0)
    ref = nn.Transformer(
        16, 4, 2, 3, 32, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=dtype, device=device
    ).eval()
    ours = Transformer(50, 60, d_model=16, n_heads=4, n_encoder_layers=2, n_decoder_layers=3, d_ff=32, dropout=0.0,
                       norm_first=norm_first, final_norm=True)
    ours = load_transformer_from_torch(ours.to(device=device, dtype=dtype), ref).eval()
    tgt, src, kpm = _inputs(dtype, device)
    expected = ref(
        src,
        tgt,
        tgt_mask=~causal_mask(5, device=device),
        src_key_padding_mask=kpm,
        memory_key_padding_mask=kpm,
    )
    mask = from_torch_key_padding_mask(kpm)
    got = ours.decoder(tgt, ours.encoder(src, mask), None, mask)
    torch.testing.assert_close(got, expected, **TOL[dtype])


def test_transformer_end_to_end_logits_shape_and_tied_weights():
    model = Transformer(30, 40, d_model=16, n_heads=4,
                        n_encoder_layers=1, n_decoder_layers=1, d_ff=32, tie_weights=True)
    assert model.lm_head.weight is model.tgt_embed.weight
    logits = model(torch.randint(1, 30, (2, 6)), torch.randint(1, 40, (2, 4)))
    assert logits.shape == (2, 4, 40)


def test_written_out_rms_norm_in_fp16_is_finite():
    """reliability.md Low: the written-out fp16 norms overflowed ((x − μ)² at |x| ~ 1e3)."""
    from course_utils.norm import rms_norm

    big = (300 * torch.randn(4, 64)).half()
    assert torch.isfinite(rms_norm(big, torch.ones(64).half(), 1e-6)).all()


def _all_norms(model):
    return [m for m in model.modules() if isinstance(m, (LayerNorm, RMSNorm))]


@pytest.mark.parametrize("build", [
    lambda **kw: Transformer(11, 13, d_model=16, n_heads=2, n_encoder_layers=2, n_decoder_layers=2, d_ff=32, **kw),
    lambda **kw: __import__("course_utils").GPT(11, max_len=8, n_layers=2, n_heads=2, d_model=16, **kw),
    lambda **kw: __import__("course_utils").EncoderClassifier(11, 3, d_model=16, n_heads=2, **kw),
    lambda **kw: __import__("course_utils").MaskedLM(11, d_model=16, n_heads=2, **kw),
])
def test_every_hyperparameter_reaches_every_layer(build):
    """library.md item 6: bias, eps, norm placement and per-site dropout reach every layer, no patching."""
    model = build(bias=False, eps=1e-3, norm_first=True, dropout=0.3, attn_dropout=0.1, ffn_dropout=0.2,
                  norm="layer")
    norms = _all_norms(model)
    assert norms and all(n.eps == 1e-3 and n.bias is None for n in norms)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert all(m.bias is None for m in linears)
    layers = [m for m in model.modules() if isinstance(m, (EncoderLayer, DecoderLayer))]
    assert layers and all(layer.self_attn_residual.norm_first and layer.ffn_residual.dropout.p == 0.3
                          for layer in layers)
    assert all(layer.self_attn.dropout == 0.1 and layer.ffn.dropout.p == 0.2 for layer in layers)
    rms = build(norm="rms", eps=1e-4)
    assert all(isinstance(n, RMSNorm) and n.eps == 1e-4 for n in _all_norms(rms))


def test_decoder_refuses_a_missing_memory():
    """reliability.md item 15: memory=None silently ran self-attention only."""
    from course_utils import Decoder

    layer = DecoderLayer(8, 2, 16)
    y = torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match="needs the encoder's output"):
        layer(y, None)
    with pytest.raises(ValueError, match="needs the encoder's output"):
        Decoder(1, 8, 2, 16)(y, None)
    with pytest.raises(ValueError, match=r"memory must have shape \(B, T_s, d_model\)"):
        layer(y, torch.randn(3, 8))


def test_layer_constructors_are_keyword_only():
    with pytest.raises(TypeError, match="positional argument"):
        EncoderLayer(8, 2, 16, 0.1)
    with pytest.raises(TypeError, match="positional argument"):
        LayerNorm(8, 1e-6)
    with pytest.raises(TypeError, match="unknown keyword"):
        Transformer(10, 10, block_size=8)


@pytest.mark.parametrize("field, value, error, words", [
    ("activation", "tanh", ValueError, "activation must be one of"), ("norm", "batch", ValueError, "norm must be"),
    ("eps", 0.0, ValueError, "eps must be > 0"), ("bias", 1, TypeError, "bias must be True or False"),
    ("norm_first", "yes", TypeError, "norm_first"), ("dropout", 1.5, ValueError, "dropout must be in"),
    ("ffn_dropout", -0.1, ValueError, "ffn_dropout must be in"),
])
def test_layer_config_refuses_a_bad_field_when_it_is_made(field, value, error, words):
    from course_utils.config import LayerConfig

    with pytest.raises(error, match=words):
        LayerConfig(**{field: value})


def _layer_settings(layer) -> dict:
    """What each LayerConfig field became inside one encoder/decoder layer, read from its parts."""
    attns = [m for m in (layer.self_attn, getattr(layer, "cross_attn", None)) if m is not None]
    residuals = [m for m in layer.children() if isinstance(m, Residual)]
    norms = [r.norm for r in residuals]
    return {"dropout": {r.dropout.p for r in residuals}, "attn_dropout": {m.dropout for m in attns},
            "ffn_dropout": {layer.ffn.dropout.p}, "activation": {layer.ffn.activation.__name__},
            "norm_first": {r.norm_first for r in residuals},
            "eps": {n.eps for n in norms}, "norm": {type(n).__name__ for n in norms},
            "bias": {layer.ffn.linear1.bias is not None, *(m.qkv_proj.bias is not None for m in attns)},
            "positions": {layer.self_attn.rope_base is not None}, "rope_base": {layer.self_attn.rope_base},
            "ffn": {layer.ffn.kind}, "n_kv_heads": {m.n_kv_heads for m in attns}}


# One row per LayerConfig field: (keywords that set it, what every layer shows). A field without a row fails below.
PROBES = {"dropout": ({"dropout": 0.3}, 0.3), "attn_dropout": ({"attn_dropout": 0.25}, 0.25),
          "ffn_dropout": ({"ffn_dropout": 0.15}, 0.15), "activation": ({"activation": "gelu"}, "gelu"),
          "norm_first": ({"norm_first": True}, True), "eps": ({"eps": 1e-3}, 1e-3),
          "norm": ({"norm": "rms"}, "RMSNorm"),
          "bias": ({"bias": False}, False), "positions": ({"positions": "rope"}, True),
          "rope_base": ({"positions": "rope", "rope_base": 500.0}, 500.0), "ffn": ({"ffn": "swiglu"}, "swiglu"),
          "n_kv_heads": ({"n_kv_heads": 1}, 1)}


def _every_model(config=None, **kw):
    from course_utils import GPT, EncoderClassifier, MaskedLM

    shape = dict(d_model=8, n_heads=2, d_ff=16)
    return [Transformer(11, 12, n_encoder_layers=2, n_decoder_layers=2, config=config, **shape, **kw),
            GPT(11, n_layers=2, config=config, **shape, **kw), EncoderClassifier(11, 2, n_layers=2, config=config,
                                                                                 **shape, **kw),
            MaskedLM(11, n_layers=2, config=config, **shape, **kw), EncoderLayer(8, 2, 16, config=config, **kw),
            DecoderLayer(8, 2, 16, config=config, **kw)]


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(LayerConfig)])
def test_a_layer_config_field_reaches_every_layer_of_every_model(field):
    assert field in PROBES, f"LayerConfig.{field} has no probe: add one to PROBES (and plumb it into the parts)"
    given, seen = PROBES[field]
    for model in _every_model(**given):
        layers = [m for m in model.modules() if isinstance(m, (EncoderLayer, DecoderLayer))]
        assert layers, type(model).__name__
        for layer in layers:
            assert _layer_settings(layer)[field] == {seen}, (type(model).__name__, field)


def _fields_read(config_class, **settings) -> set[str]:
    """The fields of ``config_class`` that building every model (and each layer alone) reads from one config."""
    names, reads = {f.name for f in dataclasses.fields(config_class)}, set()

    class Recording(config_class):
        def __getattribute__(self, name):
            if name in names:
                reads.add(name)
            return object.__getattribute__(self, name)

    config = Recording(**settings)
    reads.clear()  # __post_init__'s checks read every field
    _every_model(config)
    return reads


def _unread(config_class) -> set[str]:
    """Fields that no part reads, whatever the settings (swiglu ignores activation, only rope reads rope_base)."""
    read = _fields_read(config_class) | _fields_read(config_class, positions="rope", ffn="swiglu")
    return {f.name for f in dataclasses.fields(config_class)} - read


def test_every_layer_config_field_is_read_by_the_parts():
    assert _unread(LayerConfig) == set()


def test_a_new_field_that_no_part_reads_is_caught():
    """The check above is not vacuous: a field added to LayerConfig and plumbed nowhere is reported."""
    extended = dataclasses.make_dataclass("Extended", [("qk_norm", bool, False)], bases=(LayerConfig,), frozen=True)
    assert _unread(extended) == {"qk_norm"}


def test_each_field_has_one_default_and_a_lone_part_takes_it():
    """LayerConfig holds the only defaults: a part built without a config shows them."""
    from course_utils import MultiHeadAttention, PositionwiseFeedForward

    default = LayerConfig()
    assert RMSNorm(8).eps == LayerNorm(8).eps == default.eps
    assert MultiHeadAttention(8, 2).dropout == PositionwiseFeedForward(8, 16).dropout.p == default.dropout
    assert Residual(8).dropout.p == default.dropout and Residual(8).norm_first == default.norm_first
    assert _layer_settings(EncoderLayer(8, 2, 16)) == _layer_settings(EncoderLayer(8, 2, 16, config=default))
