"""Positional encoding formula and mask helpers."""

import math

import torch

from course_utils import SinusoidalPositionalEncoding, TokenEmbedding, sinusoidal_encoding
from course_utils.masks import (
    causal_mask,
    combine_masks,
    from_additive_mask,
    from_torch_key_padding_mask,
    padding_mask,
    to_additive_mask,
    to_torch_key_padding_mask,
)


def test_sinusoidal_matches_the_papers_formula():
    pe = sinusoidal_encoding(50, 16, dtype=torch.float64)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert math.isclose(pe[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-12)
            assert math.isclose(pe[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-12)


def test_sinusoidal_odd_width_and_module_adds_table():
    assert sinusoidal_encoding(4, 7).shape == (4, 7)
    module = SinusoidalPositionalEncoding(8, max_len=20)
    x = torch.zeros(2, 5, 8)
    torch.testing.assert_close(module(x, offset=3)[0], sinusoidal_encoding(20, 8)[3:8])


def test_token_embedding_scales_by_sqrt_d_model():
    emb = TokenEmbedding(10, 16)
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(emb(ids), emb.embedding(ids) * 4.0)


def test_mask_helpers_and_conversions():
    ids = torch.tensor([[4, 5, 0], [6, 0, 0]])
    pm = padding_mask(ids)
    assert pm.shape == (2, 1, 1, 3) and pm[0, 0, 0].tolist() == [True, True, False]
    assert torch.equal(from_torch_key_padding_mask(to_torch_key_padding_mask(pm)), pm)
    cm = causal_mask(3)
    assert cm.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    both = combine_masks(pm, cm, None)
    assert both.shape == (2, 1, 3, 3) and not both[1, 0, 2, 1]
    assert torch.equal(from_additive_mask(to_additive_mask(cm)), cm)
    assert combine_masks(None) is None


# reliability.md item 11: positional modules check width, device and float dtype
def test_positional_modules_check_width_device_and_dtype():
    import pytest

    from course_utils import LearnedPositionalEmbedding

    for module in (SinusoidalPositionalEncoding(8, max_len=16), LearnedPositionalEmbedding(8, max_len=16)):
        with pytest.raises(ValueError, match="last dimension 6 .* d_model=8"):
            module(torch.randn(1, 4, 6))
        with pytest.raises(TypeError, match="floating-point"):
            module(torch.zeros(1, 4, 8, dtype=torch.long))
        with pytest.raises(ValueError, match="x is on meta but the positional table is on cpu"):
            module(torch.randn(1, 4, 8, device="meta"))
        with pytest.raises(TypeError, match="offset must be an int"):
            module(torch.randn(1, 4, 8), offset=1.5)
        with pytest.raises(ValueError, match="max_len >= 20"):
            module(torch.randn(1, 4, 8), offset=16)
    with pytest.raises(TypeError, match="x has dtype torch.float64 but the positional table computes in"):
        LearnedPositionalEmbedding(8, max_len=16)(torch.randn(1, 4, 8, dtype=torch.float64))
    with pytest.raises(TypeError, match="positional argument"):
        LearnedPositionalEmbedding(16, 8)  # the old (max_len, d_model) order is refused, not silently swapped


def test_causal_mask_refuses_a_float_length():
    import pytest

    with pytest.raises(TypeError, match="T_q must be an int"):
        causal_mask(3.0)
