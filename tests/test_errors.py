"""Bad input gets a clear ValueError / TypeError that names the fix."""

import pytest
import torch

from course_utils import (
    GPT,
    EncoderClassifier,
    KVCache,
    LearnedPositionalEmbedding,
    MaskedLM,
    MultiHeadAttention,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    Transformer,
    attention_with_weights,
)
from course_utils.decoding import greedy_decode
from course_utils.masks import causal_mask, combine_masks


def test_d_model_not_divisible_by_heads():
    with pytest.raises(
        ValueError, match=r"d_model=100 is not divisible by n_heads=8.*multiple of n_heads.*96"
    ):
        MultiHeadAttention(100, 8)


def test_mismatched_qkv_sizes():
    q, k = torch.randn(2, 5, 8), torch.randn(2, 6, 4)
    with pytest.raises(ValueError, match="same feature size d_k"):
        attention_with_weights(q, k, k)
    with pytest.raises(ValueError, match="same number of positions T_k"):
        attention_with_weights(q, torch.randn(2, 6, 8), torch.randn(2, 7, 8))
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="last dimension 4 .* d_model=8"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 6, 4))
    with pytest.raises(ValueError, match="different batch sizes"):
        mha(torch.randn(2, 5, 8), torch.randn(3, 6, 8))
    with pytest.raises(ValueError, match="key and value must have the same length"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 4, 8))


def test_mask_that_cannot_broadcast():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"does not broadcast .*\(B, 1, 1, T_k\)"):
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
        LearnedPositionalEmbedding(max_len=10, d_model=8)(torch.randn(1, 11, 8))
    with pytest.raises(ValueError, match="context is 8 tokens"):
        GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)(torch.zeros(1, 9, dtype=torch.long))
    model = GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)
    cache = KVCache()
    model(torch.zeros(1, 8, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="context is 8 tokens"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)


def test_token_ids_outside_vocabulary():
    emb = TokenEmbedding(10, 4)
    with pytest.raises(ValueError, match=r"contain 10, outside the vocabulary \[0, 10\).*vocab_size > 10"):
        emb(torch.tensor([[1, 2, 10]]))
    with pytest.raises(ValueError, match="-1, a negative id.*pad id"):
        emb(torch.tensor([[-1, 2]]))
    with pytest.raises(TypeError, match="integer tensor"):
        emb(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model = Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16)
        model(torch.tensor([[1, 2]]), torch.tensor([[1, 12]]))


def test_wrong_rank_input():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(B, T, d_model\).*unsqueeze\(0\)"):
        mha(torch.randn(5, 8))
    with pytest.raises(ValueError, match=r"\(B, T\) token ids"):
        GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)(torch.zeros(2, 3, 4, dtype=torch.long))
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
        Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16, activation="tanh")


def test_inputs_on_another_device_than_the_module():
    """A CPU model fed a tensor from another device (here 'meta', standing in for CUDA) says how to move it."""
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"query is on meta but MultiHeadAttention is on cpu.*\.to\("):
        mha(torch.randn(2, 5, 8, device="meta"))
    with pytest.raises(ValueError, match="ids is on meta but the embedding is on cpu"):
        TokenEmbedding(10, 4)(torch.zeros(1, 3, dtype=torch.long, device="meta"))
    q = torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match="k is on meta but q is on cpu"):
        attention_with_weights(q, torch.randn(1, 3, 4, device="meta"), q)
    with pytest.raises(ValueError, match="mask is on meta"):
        attention_with_weights(q, q, q, torch.ones(3, 3, dtype=torch.bool, device="meta"))


def test_decoding_hyper_parameters():
    from course_utils.decoding import beam_search, generate
    from course_utils.sampling import sample_next

    gpt = GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        sample_next(torch.zeros(1, 10), temperature=-1.0)
    with pytest.raises(ValueError, match="top_k must be >= 0"):
        sample_next(torch.zeros(1, 10), top_k=-1)
    # greedy (temperature 0) ignores top_k / top_p, but a bad value is still refused, never passed over
    with pytest.raises(ValueError, match="top_k must be >= 0"):
        sample_next(torch.zeros(1, 10), temperature=0, top_k=-1)
    with pytest.raises(ValueError, match="top_p must be in"):
        sample_next(torch.zeros(1, 10), temperature=0, top_p=2.0)
    with pytest.raises(ValueError, match="at least one context token"):
        generate(gpt, torch.zeros(1, 0, dtype=torch.long), 3)
    seq2seq = Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16, max_len=12)
    src = torch.ones(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="beam_size must be >= 1"):
        beam_search(seq2seq, src, beam_size=0, max_new_tokens=5, bos_id=1, eos_id=2)
    # reliability.md item 17: B = 0 and a max_new_tokens beyond the positional table fail up front, with the fix
    with pytest.raises(ValueError, match="empty batch"):
        beam_search(seq2seq, src[:0], bos_id=1, eos_id=2)
    with pytest.raises(ValueError, match="empty batch"):
        greedy_decode(seq2seq, src[:0], 5, 1, 2)
    with pytest.raises(ValueError, match=r"max_new_tokens=20 .* positional table of 12.*max_new_tokens <= 12"):
        greedy_decode(seq2seq, src, 20, 1, 2)
    with pytest.raises(ValueError, match=r"max_new_tokens <= 12"):
        beam_search(seq2seq, src, max_new_tokens=13, bos_id=1, eos_id=2)
    with pytest.raises(ValueError, match="eos_id=10 is outside the target vocabulary"):
        greedy_decode(seq2seq, src, 5, 1, 10)


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        (dict(temperature=float("nan")), ValueError, "temperature must be a finite number"),
        (dict(temperature="hot"), TypeError, "temperature must be a number"),
        (dict(top_k=2.5), TypeError, "top_k must be an int"),
        (dict(top_k="3"), TypeError, "top_k must be an int"),
        (dict(top_p=0.0), ValueError, "top_p must be in"),
        (dict(top_p=float("nan")), ValueError, "top_p must be a finite"),
        (dict(use_cache="yes"), TypeError, "use_cache must be True or False"),
    ],
)
def test_generation_arguments_get_clear_errors(kwargs, error, fragment):
    """reliability.md Low: NaN temperature, float top_k / beam_size / max_new_tokens and strings."""
    from course_utils.decoding import generate

    gpt = GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)
    with pytest.raises(error, match=fragment):
        generate(gpt, torch.zeros(1, 2, dtype=torch.long), 3, **kwargs)


def test_count_arguments_must_be_ints():
    from course_utils.decoding import beam_search, generate

    gpt = GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        generate(gpt, torch.zeros(1, 2, dtype=torch.long), 3.0)
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        generate(gpt, torch.zeros(1, 2, dtype=torch.long), "3")
    seq2seq = Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16)
    with pytest.raises(TypeError, match="beam_size must be an int"):
        beam_search(seq2seq, torch.ones(1, 3, dtype=torch.long), beam_size=2.0, bos_id=1, eos_id=2)
    with pytest.raises(TypeError, match="src must hold integer token ids"):
        beam_search(seq2seq, torch.ones(1, 3), bos_id=1, eos_id=2)
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        greedy_decode(seq2seq, torch.ones(1, 3, dtype=torch.long), 4.0, 1, 2)


@pytest.mark.parametrize(
    "build, error, fragment",
    [
        (lambda: Transformer(10, 10, n_encoder_layers=-1), ValueError, "n_layers must be >= 1"),
        (lambda: GPT(10, n_layers=0), ValueError, "n_layers must be >= 1"),
        (lambda: EncoderClassifier(10, 0), ValueError, "n_classes must be >= 1"),
        (lambda: EncoderClassifier(10, 1), ValueError, "n_classes must be >= 2"),
        (lambda: GPT(10, d_ff=0), ValueError, "d_ff must be >= 1"),
        (lambda: GPT(10, n_layers=2.0), TypeError, "n_layers must be an int"),
        (lambda: GPT(10, dropout="0.1"), TypeError, "dropout must be a float"),
        (lambda: GPT(10, max_len=0), ValueError, "max_len must be >= 1"),
        (lambda: GPT(10, norm_first="False"), TypeError, "norm_first must be True or False"),
        (lambda: GPT(10, eps=0.0), ValueError, "eps must be > 0"),
        (lambda: GPT(10, dropuot=0.1), TypeError, r"unknown keyword\(s\) \['dropuot'\]"),
        (lambda: MaskedLM(10, pad_id=10), ValueError, "pad_id=10 is outside the vocabulary"),
        (lambda: Transformer(10, 10, norm="batch"), ValueError, "norm must be 'layer' or 'rms'"),
        (lambda: GPT(10, 8), TypeError, "positional argument"),
        (lambda: MultiHeadAttention(8, 2, 0.1), TypeError, "positional argument"),
        (lambda: MultiHeadAttention(8.0, 2), TypeError, "d_model must be a positive int"),
    ],
)
def test_invalid_configs_are_refused(build, error, fragment):
    """reliability.md Low: negative layer counts, n_classes=0, d_ff=0 (was silently 4·d) ... and keyword-only args."""
    with pytest.raises(error, match=fragment):
        build()
