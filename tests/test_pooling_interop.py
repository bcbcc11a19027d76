"""course_utils.pooling (one masked mean for lessons 09 and 13) and course_utils.interop (weights both ways)."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from course_utils import interop
from course_utils.layers import DecoderLayer, EncoderLayer
from course_utils.models import EncoderClassifier
from course_utils.pooling import masked_mean


@given(st.lists(st.integers(0, 6), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_masked_mean_is_the_mean_of_the_real_tokens(lengths, seed):
    hidden = torch.randn(len(lengths), 6, 5, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    keep = torch.arange(6)[None, :] < torch.tensor(lengths)[:, None]
    want = torch.stack([h[:n].mean(0) if n else torch.zeros(5, dtype=h.dtype) for h, n in zip(hidden, lengths)])
    torch.testing.assert_close(masked_mean(hidden, keep), want)             # no real token: zeros, not NaN
    torch.testing.assert_close(masked_mean(hidden, keep.long()), want)      # transformers' 1/0 integers
    garbage = hidden.masked_fill(~keep[..., None], 1e6)                     # padding must not vote
    torch.testing.assert_close(masked_mean(garbage, keep), want)


def test_masked_mean_refuses_masks_that_would_be_misread():
    hidden, keep = torch.randn(2, 3, 4), torch.tensor([[True, True, False], [True, False, False]])
    with pytest.raises(TypeError, match=r"\.bool\(\)"):
        masked_mean(hidden, keep.float())                 # an additive 0/-inf mask would keep only the padding
    with pytest.raises(ValueError, match="other than 0 and 1"):
        masked_mean(hidden, keep.long() * 2)
    with pytest.raises(ValueError, match=r"keep has shape \(2, 2\), expected \(2, 3\)"):
        masked_mean(hidden, keep[:, :2])


def test_encoder_classifier_pools_with_the_shared_masked_mean():
    torch.manual_seed(0)
    model = EncoderClassifier(30, 3, d_model=16, n_heads=2, n_layers=1, dropout=0.0).eval()
    ids = torch.randint(1, 30, (2, 7))
    ids[1, 4:] = 0
    h = model.encoder(model.pos(model.embed(ids)), (ids != 0)[:, None, None, :])
    torch.testing.assert_close(model(ids), model.classifier(masked_mean(h, ids != 0)))
    torch.testing.assert_close(model(ids[1:, :4]), model(ids)[1:], atol=1e-5, rtol=1e-5)   # padding-independent


def _randomised(module: nn.Module, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return module


@pytest.mark.parametrize("norm_first", [False, True])
def test_weights_go_both_ways(norm_first):
    """copy_to_torch is load_from_torch backwards: ours -> torch -> ours gives back every tensor, and the torch
    module computes what ours computes."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16)
    ours = _randomised(EncoderLayer(16, 4, 32, dropout=0.0, activation="gelu", norm_first=norm_first), 1).eval()
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, activation="gelu", batch_first=True,
                                        norm_first=norm_first).eval()
    assert interop.copy_to_torch(ours, theirs) is theirs
    with torch.no_grad():
        torch.testing.assert_close(theirs(x), ours(x), atol=1e-5, rtol=1e-5)
    again = interop.load_from_torch(EncoderLayer(16, 4, 32, dropout=0.0, activation="gelu",
                                                 norm_first=norm_first), theirs)
    for (name, a), b in zip(ours.state_dict().items(), again.state_dict().values()):
        assert torch.equal(a, b), name
    dec = _randomised(DecoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first), 2).eval()
    torch_dec = interop.copy_to_torch(dec, nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                                                      norm_first=norm_first).eval())
    with torch.no_grad():
        causal = nn.Transformer.generate_square_subsequent_mask(5)         # our decoder layer is causal
        torch.testing.assert_close(torch_dec(x, x[:, :3], tgt_mask=causal), dec(x, x[:, :3]), atol=1e-5, rtol=1e-5)


def test_a_mismatch_is_refused_before_anything_is_copied():
    ours = _randomised(EncoderLayer(16, 4, 32, dropout=0.0), 1)
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    wrong = nn.TransformerEncoderLayer(16, 4, 64, batch_first=True)          # d_ff differs: linear1 last
    with pytest.raises(ValueError, match="linear1.weight"):
        interop.load_from_torch(ours, wrong)
    assert all(torch.equal(before[k], v) for k, v in ours.state_dict().items())
    with pytest.raises(ValueError, match="norm_first differs"):
        interop.copy_to_torch(ours, nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, norm_first=True))
    with pytest.raises(TypeError, match="no weight mapping for torch's Linear"):
        interop.copy_to_torch(ours, nn.Linear(16, 16))


def test_a_module_of_the_wrong_kind_is_refused():
    """Each per-module loader accepts its own torch type only, and the two modules must have the same role: a
    DecoderLayer loaded from an nn.TransformerEncoderLayer would silently keep its cross-attention untouched."""
    from course_utils.models import Encoder

    torch_enc = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    with pytest.raises(TypeError, match="copies torch's nn.MultiheadAttention, got TransformerEncoderLayer"):
        interop.load_mha_from_torch(EncoderLayer(16, 4, 32), torch_enc)
    with pytest.raises(TypeError, match="copies torch's nn.TransformerEncoder, got TransformerEncoderLayer"):
        interop.load_encoder_from_torch(EncoderLayer(16, 4, 32), torch_enc)
    dec = DecoderLayer(16, 4, 32)
    before = {k: v.clone() for k, v in dec.state_dict().items()}
    with pytest.raises(TypeError, match="EncoderLayer maps onto course_utils EncoderLayer, got DecoderLayer"):
        interop.load_encoder_layer_from_torch(dec, torch_enc)
    assert all(torch.equal(before[k], v) for k, v in dec.state_dict().items())
    with pytest.raises(TypeError, match="LayerNorm maps onto course_utils LayerNorm, got RMSNorm"):
        interop.copy_to_torch(EncoderLayer(16, 4, 32, norm="rms"), torch_enc)      # norms inside a layer too
    with pytest.raises(TypeError, match="MultiheadAttention maps onto course_utils MultiHeadAttention, got LayerNorm"):
        interop.copy_to_torch(nn.LayerNorm(16), nn.MultiheadAttention(16, 4, batch_first=True))
    torch_stack = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4, 32, batch_first=True), 2)
    with pytest.raises(TypeError, match="maps onto course_utils Decoder, got Encoder"):
        interop.load_decoder_from_torch(Encoder(2, 16, 4, 32), torch_stack)
    with pytest.raises(TypeError, match="nn.Transformer maps onto a course_utils Transformer, got Encoder"):
        interop.load_transformer_from_torch(Encoder(2, 16, 4, 32), nn.Transformer(16, 4, 1, 1, 32, batch_first=True))
