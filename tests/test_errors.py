"""Bad input gets a clear ValueError / TypeError that names the fix."""

import pytest
import torch

from course_utils import (
    GPT,
    KVCache,
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    Transformer,
    scaled_dot_product_attention,
)
from course_utils.masks import causal_mask, combine_masks


def test_d_model_not_divisible_by_heads():
    with pytest.raises(
        ValueError, match=r"d_model=100 is not divisible by n_heads=8.*multiple of n_heads.*96"
    ):
        MultiHeadAttention(100, 8)


def test_mismatched_qkv_sizes():
    q, k = torch.randn(2, 5, 8), torch.randn(2, 6, 4)
    with pytest.raises(ValueError, match="same feature size d_k"):
        scaled_dot_product_attention(q, k, k)
    with pytest.raises(ValueError, match="same number of positions T_k"):
        scaled_dot_product_attention(q, torch.randn(2, 6, 8), torch.randn(2, 7, 8))
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="last dimension 4 .* d_model=8"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 6, 4))
    with pytest.raises(ValueError, match="different batch sizes"):
        mha(torch.randn(2, 5, 8), torch.randn(3, 6, 8))
    with pytest.raises(ValueError, match="key and value must have the same length"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 4, 8))


def test_mask_that_cannot_broadcast():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"cannot broadcast .*\(B, 1, 1, T_k\)"):
        mha(torch.randn(2, 5, 8), mask=torch.ones(2, 1, 1, 6, dtype=torch.bool))


def test_mask_with_wrong_dtype():
    with pytest.raises(TypeError, match="bool mask .* mask.bool()"):
        MultiHeadAttention(8, 2)(torch.randn(2, 5, 8), mask=torch.ones(5, 5, dtype=torch.long))
    with pytest.raises(TypeError, match="bool masks"):
        combine_masks(causal_mask(3), torch.zeros(3, 3))


def test_sequence_longer_than_positional_table():
    with pytest.raises(ValueError, match=r"longer than the positional table \(max_len=10\).*max_len >= 12"):
        SinusoidalPositionalEncoding(8, max_len=10)(torch.randn(1, 12, 8))
    with pytest.raises(ValueError, match="positional table"):
        LearnedPositionalEmbedding(10, 8)(torch.randn(1, 11, 8))
    with pytest.raises(ValueError, match="context is 8 tokens"):
        GPT(10, block_size=8, n_layers=1, n_heads=1, d_model=8)(torch.zeros(1, 9, dtype=torch.long))
    model = GPT(10, block_size=8, n_layers=1, n_heads=1, d_model=8)
    cache = KVCache()
    model(torch.zeros(1, 8, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="context is 8 tokens"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)


def test_token_ids_outside_vocabulary():
    emb = TokenEmbedding(10, 4)
    with pytest.raises(ValueError, match=r"contain 10, outside the vocabulary \[0, 10\).*vocab_size > 10"):
        emb(torch.tensor([[1, 2, 10]]))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        emb(torch.tensor([[-1, 2]]))
    with pytest.raises(TypeError, match="integer tensor"):
        emb(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        Transformer(10, 10, 8, 2, 1, 1, 16)(torch.tensor([[1, 2]]), torch.tensor([[1, 12]]))


def test_wrong_rank_input():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(B, T, d_model\).*unsqueeze\(0\)"):
        mha(torch.randn(5, 8))
    with pytest.raises(ValueError, match=r"\(B, T\) token ids"):
        GPT(10, block_size=8, n_layers=1, n_heads=1, d_model=8)(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="floating-point"):
        mha(torch.zeros(2, 5, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="torch.Tensor"):
        mha([[0.0] * 8])


def test_impossible_hyper_parameters():
    with pytest.raises(ValueError, match="dropout must be in"):
        MultiHeadAttention(8, 2, dropout=1.5)
    with pytest.raises(ValueError, match="positive integers"):
        MultiHeadAttention(8, 0)
    with pytest.raises(ValueError, match="activation"):
        Transformer(10, 10, 8, 2, 1, 1, 16, activation="tanh")


def test_inputs_on_another_device_than_the_module():
    """A CPU model fed a tensor from another device (here 'meta', standing in for CUDA) says how to move it."""
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"query is on meta but MultiHeadAttention is on cpu.*\.to\("):
        mha(torch.randn(2, 5, 8, device="meta"))
    with pytest.raises(ValueError, match="ids is on meta but the embedding is on cpu"):
        TokenEmbedding(10, 4)(torch.zeros(1, 3, dtype=torch.long, device="meta"))
    q = torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match="k is on meta but q is on cpu"):
        scaled_dot_product_attention(q, torch.randn(1, 3, 4, device="meta"), q)
    with pytest.raises(ValueError, match="mask is on meta"):
        scaled_dot_product_attention(q, q, q, torch.ones(3, 3, dtype=torch.bool, device="meta"))


def test_decoding_hyper_parameters():
    from course_utils.decoding import beam_search, generate, sample_next

    gpt = GPT(10, block_size=8, n_layers=1, n_heads=1, d_model=8)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        sample_next(torch.zeros(1, 10), temperature=-1.0)
    with pytest.raises(ValueError, match="top_k must be > 0"):
        sample_next(torch.zeros(1, 10), top_k=0)
    with pytest.raises(ValueError, match="at least one context token"):
        generate(gpt, torch.zeros(1, 0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="beam_size must be > 0"):
        beam_search(Transformer(10, 10, 8, 2, 1, 1, 16), torch.ones(1, 3, dtype=torch.long), beam_size=0,
                    bos_id=1, eos_id=2)
