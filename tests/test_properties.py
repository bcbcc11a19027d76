"""Laws that must hold for any input (hypothesis): equivariance, causality, padding, caching, decoding."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils import GPT, EncoderLayer, KVCache, MultiHeadAttention, Transformer
from course_utils.decoding import beam_search, generate, greedy_decode
from course_utils.masks import padding_mask

SMALL = settings(max_examples=15, deadline=None)


@SMALL
@given(seed=st.integers(0, 10_000), t=st.integers(2, 9), heads=st.sampled_from([1, 2, 4]))
def test_self_attention_is_permutation_equivariant(seed, t, heads):
    """Without positions, permuting the tokens permutes the outputs: f(Px) = P f(x)."""
    torch.manual_seed(seed)
    layer = EncoderLayer(8, heads, 16, dropout=0.0).double().eval()
    x = torch.randn(2, t, 8, dtype=torch.float64)
    perm = torch.randperm(t)
    torch.testing.assert_close(layer(x[:, perm]), layer(x)[:, perm], atol=1e-10, rtol=1e-10)


@SMALL
@given(seed=st.integers(0, 10_000), t=st.integers(2, 10), data=st.data())
def test_causal_outputs_ignore_the_future(seed, t, data):
    """Changing tokens after position p leaves the causal outputs at positions <= p unchanged."""
    torch.manual_seed(seed)
    model = GPT(20, max_len=16, n_layers=2, n_heads=2, d_model=16, dropout=0.0).double().eval()
    p = data.draw(st.integers(0, t - 2))
    ids = torch.randint(0, 20, (2, t))
    changed = ids.clone()
    changed[:, p + 1 :] = torch.randint(0, 20, (2, t - p - 1))
    torch.testing.assert_close(model(ids)[:, : p + 1], model(changed)[:, : p + 1], atol=1e-10, rtol=1e-10)


@SMALL
@given(seed=st.integers(0, 10_000), n_pad=st.integers(1, 4))
def test_changing_padded_keys_changes_nothing(seed, n_pad):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, 2).double()
    ids = torch.randint(1, 9, (2, 8))
    ids[0, -n_pad:] = 0
    mem = torch.randn(2, 8, 8, dtype=torch.float64)
    other = mem.clone()
    other[0, -n_pad:] = torch.randn(n_pad, 8, dtype=torch.float64) * 100
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    mask = padding_mask(ids)
    torch.testing.assert_close(mha(x, mem, mask=mask), mha(x, other, mask=mask), atol=1e-10, rtol=1e-10)


@SMALL
@given(seed=st.integers(0, 10_000), t=st.integers(2, 12), prefix=st.integers(1, 6))
def test_kv_cached_gpt_equals_full_recomputation(seed, t, prefix):
    torch.manual_seed(seed)
    model = GPT(25, max_len=16, n_layers=2, n_heads=2, d_model=16, dropout=0.0).double().eval()
    ids = torch.randint(0, 25, (2, t))
    prefix = min(prefix, t)
    cache = KVCache()
    steps = [model(ids[:, :prefix], cache=cache)] + [
        model(ids[:, i : i + 1], cache=cache) for i in range(prefix, t)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), model(ids), atol=1e-10, rtol=1e-10)


@SMALL
@given(seed=st.integers(0, 10_000), t=st.integers(2, 8))
def test_kv_cached_seq2seq_decoder_equals_full_recomputation(seed, t):
    torch.manual_seed(seed)
    model = Transformer(15, 17, d_model=16, n_heads=2,
                        n_encoder_layers=1, n_decoder_layers=2, d_ff=32, dropout=0.0).double().eval()
    src = torch.randint(1, 15, (2, 6))
    src[1, -2:] = 0
    tgt = torch.randint(1, 17, (2, t))
    memory, src_mask = model.encode(src)
    cache = KVCache()
    steps = [model.decode(tgt[:, i : i + 1], memory, src_mask, cache) for i in range(t)]
    torch.testing.assert_close(
        torch.cat(steps, 1), model.decode(tgt, memory, src_mask), atol=1e-10, rtol=1e-10
    )


@SMALL
@given(seed=st.integers(0, 10_000))
def test_beam_width_one_equals_greedy(seed):
    torch.manual_seed(seed)
    model = Transformer(12, 12, d_model=16, n_heads=2,
                        n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0).eval()
    src = torch.randint(3, 12, (3, 5))
    greedy = greedy_decode(model, src, max_new_tokens=8, bos_id=1, eos_id=2)
    beam = beam_search(model, src, beam_size=1, max_new_tokens=8, bos_id=1, eos_id=2, length_penalty_alpha=0.0)
    width = min(greedy.size(1), beam.size(1))
    assert torch.equal(greedy[:, :width], beam[:, :width])
    assert (greedy[:, width:] == model.pad_id).all() and (beam[:, width:] == model.pad_id).all()


@SMALL
@given(seed=st.integers(0, 10_000))
def test_cached_generation_equals_uncached(seed):
    torch.manual_seed(seed)
    model = GPT(20, max_len=8, n_layers=1, n_heads=2, d_model=16, dropout=0.0).eval()
    ids = torch.randint(0, 20, (2, 3))
    # 12 new tokens > block_size: also covers the sliding window.
    assert torch.equal(
        generate(model, ids, 12, temperature=0), generate(model, ids, 12, temperature=0, use_cache=False)
    )


def test_beam_search_finds_at_least_the_greedy_score():
    """A wider beam never returns a hypothesis with a lower (un-normalised) log-probability than greedy."""
    torch.manual_seed(0)
    model = Transformer(12, 12, d_model=16, n_heads=2,
                        n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0).eval()
    src = torch.randint(3, 12, (4, 5))

    def logprob(seq):
        ys = torch.cat([torch.ones(seq.size(0), 1, dtype=torch.long), seq], 1)
        memory, mask = model.encode(src)
        logp = torch.log_softmax(model.decode(ys[:, :-1], memory, mask), -1)
        tok = logp.gather(-1, ys[:, 1:, None])[..., 0]
        return tok.masked_fill(seq == model.pad_id, 0).sum(1)

    with torch.no_grad():
        greedy = greedy_decode(model, src, 6, 1, 2)
        beam = beam_search(model, src, beam_size=5, max_new_tokens=6, bos_id=1, eos_id=2, length_penalty_alpha=0.0)
        g, b = logprob(greedy), logprob(beam)
    ended = (greedy == 2).any(1) & (beam == 2).any(1)
    assert (b[ended] >= g[ended] - 1e-5).all()


# ---------------------------------------------------------------------------------------------------------------
# Decoding mode, KV cache misuse, one sampling distribution (library.md items 4, 7, 16; reliability.md item 12)
# ---------------------------------------------------------------------------------------------------------------


def test_decoding_runs_in_eval_mode_and_restores_the_callers_mode():
    """A fresh GPT (training mode, dropout 0.5) used to decode differently twice."""
    torch.manual_seed(0)
    gpt = GPT(20, max_len=16, n_layers=1, n_heads=2, d_model=16, dropout=0.5)
    ids = torch.randint(0, 20, (2, 3))
    assert torch.equal(generate(gpt, ids, 6, temperature=0), generate(gpt, ids, 6, temperature=0))
    assert gpt.training and all(m.training for m in gpt.modules())
    seq2seq = Transformer(12, 12, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.5)
    seq2seq.encoder.eval()  # a caller's mixed modes come back exactly
    src = torch.randint(3, 12, (2, 5))
    assert torch.equal(greedy_decode(seq2seq, src, 6, 1, 2), greedy_decode(seq2seq, src, 6, 1, 2))
    beam_search(seq2seq, src, beam_size=2, max_new_tokens=6, bos_id=1, eos_id=2)
    assert seq2seq.training and not seq2seq.encoder.training and seq2seq.decoder.training
    out = generate(gpt, ids, 2, temperature=0)
    assert not out.requires_grad


def test_evaluating_restores_modes_even_when_the_block_raises():
    import pytest

    from course_utils.modes import evaluating

    gpt = GPT(20, max_len=16, n_layers=1, n_heads=2, d_model=16)
    with pytest.raises(RuntimeError):
        with evaluating(gpt):
            assert not gpt.training and not torch.is_grad_enabled()
            raise RuntimeError
    assert gpt.training and torch.is_grad_enabled()
    with pytest.raises(TypeError, match="nn.Module"):
        with evaluating("model"):
            pass


def test_kv_cache_misuse_is_a_clear_error():
    import pytest

    torch.manual_seed(0)
    gpt = GPT(20, max_len=16, n_layers=1, n_heads=2, d_model=16, dropout=0.0).eval()
    cache = KVCache()
    gpt(torch.randint(0, 20, (2, 3)), cache=cache)
    with pytest.raises(ValueError, match="holds 2 sequences but the call has a batch of 3.*reset"):
        gpt(torch.randint(0, 20, (3, 1)), cache=cache)
    other = GPT(20, max_len=16, n_layers=1, n_heads=2, d_model=16, dropout=0.0).eval()
    with pytest.raises(ValueError, match="holds the keys and values of another GPT"):
        other(torch.randint(0, 20, (2, 1)), cache=cache)
    cache.reset()  # reset: a new batch, a new model, positions from 0
    assert cache.offset == 0 and len(cache) == 0
    ids = torch.randint(0, 20, (3, 4))
    torch.testing.assert_close(other(ids, cache=cache), other(ids))
    mha = MultiHeadAttention(16, 2)
    loose = KVCache()
    mha(torch.randn(1, 2, 16), cache=loose)
    with pytest.raises(ValueError, match="out of step"):  # no model advanced the offset
        mha(torch.randn(1, 1, 16), cache=loose)


def test_cross_attention_cache_is_tied_to_its_memory():
    import pytest

    model = Transformer(15, 17, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32,
                        dropout=0.0).eval()
    src = torch.randint(1, 15, (2, 6))
    memory, src_mask = model.encode(src)
    cache = KVCache()
    model.decode(torch.ones(2, 1, dtype=torch.long), memory, src_mask, cache)
    other, _ = model.encode(torch.randint(1, 15, (2, 6)))
    with pytest.raises(ValueError, match="another encoder memory"):
        model.decode(torch.ones(2, 1, dtype=torch.long), other, src_mask, cache)
    cache = KVCache()
    model.decode(torch.ones(2, 1, dtype=torch.long), memory, src_mask, cache)
    with torch.no_grad():
        memory.mul_(2)  # an in-place edit is another memory too
    with pytest.raises(ValueError, match="another encoder memory"):
        model.decode(torch.ones(2, 1, dtype=torch.long), memory, src_mask, cache)


@SMALL
@given(seed=st.integers(0, 10_000), tau=st.floats(0.1, 3.0), k=st.integers(0, 12), p=st.floats(0.05, 1.0))
def test_one_sampling_distribution(seed, tau, k, p):
    """sample_next draws from sampling_distribution; top_k=0 and top_p=1 mean "off"; lesson 11 uses the same."""
    from course_lab.lessons import l11_gpt as l11
    from course_utils.sampling import sample_next, sampling_distribution, top_k_filter, top_p_filter

    g = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(3, 12, generator=g)
    probs = sampling_distribution(logits, tau, k, p)
    want = torch.softmax(top_p_filter(top_k_filter(logits / tau, k or None), p), -1)
    torch.testing.assert_close(probs, want)
    assert l11.sampling_distribution is sampling_distribution
    assert torch.equal(sampling_distribution(logits, tau, 0), sampling_distribution(logits, tau, None))
    drawn = sample_next(logits, tau, k, p, generator=g)
    assert (probs.gather(1, drawn) > 0).all()
