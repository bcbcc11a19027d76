"""Issue 36, the library side of lesson 16: ``GPT(positions="rope", norm="rms", ffn="swiglu", n_kv_heads=…,
bias=False, tie_weights=False)`` is a Llama decoder. Its weights, copied into ``transformers.LlamaForCausalLM`` (a
small random config, no download), give the same logits, with and without the KV cache; RoPE and grouped-query
attention keep cached logits equal to uncached ones; what rope cannot do is refused."""

from __future__ import annotations

import pytest
import torch

from course_utils import GPT, KVCache, MultiHeadAttention, Transformer
from course_utils.positional import rope_rotate

transformers = pytest.importorskip("transformers")

VOCAB, D, HEADS, KV_HEADS, LAYERS, D_FF, MAX_LEN = 61, 32, 4, 2, 2, 48, 32


def _ours(**kw) -> GPT:
    torch.manual_seed(0)
    args = dict(d_model=D, n_heads=HEADS, n_layers=LAYERS, d_ff=D_FF, max_len=MAX_LEN, positions="rope", norm="rms",
                ffn="swiglu", n_kv_heads=KV_HEADS, bias=False, dropout=0.0, tie_weights=False, eps=1e-6)
    model = GPT(VOCAB, **{**args, **kw})
    with torch.no_grad():  # RMSNorm's γ starts at 1: make them random so that a wrong norm mapping shows
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    return model.eval()


def llama_state_dict(model: GPT) -> dict[str, torch.Tensor]:
    """Our GPT's weights under Hugging Face Llama's names (the mapping lesson 16 types)."""
    out = {"model.embed_tokens.weight": model.embed.weight, "model.norm.weight": model.blocks.norm.weight,
           "lm_head.weight": model.lm_head.weight}
    for i, layer in enumerate(model.blocks.layers):
        w_q, w_k, w_v = layer.self_attn.qkv_proj.weight.split(layer.self_attn.sizes)  # rows of W^Q, W^K, W^V
        theirs = {"self_attn.q_proj": w_q, "self_attn.k_proj": w_k, "self_attn.v_proj": w_v,
                  "self_attn.o_proj": layer.self_attn.out_proj.weight,
                  "mlp.gate_proj": layer.ffn.linear1.weight, "mlp.up_proj": layer.ffn.linear3.weight,
                  "mlp.down_proj": layer.ffn.linear2.weight,
                  "input_layernorm": layer.self_attn_residual.norm.weight,
                  "post_attention_layernorm": layer.ffn_residual.norm.weight}
        out.update({f"model.layers.{i}.{name}.weight": w for name, w in theirs.items()})
    return out


def _llama(model: GPT, **kw):
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=D, intermediate_size=D_FF,
                                      num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                      num_key_value_heads=model.blocks.layers[0].self_attn.n_kv_heads,
                                      max_position_embeddings=MAX_LEN, rms_norm_eps=1e-6, rope_theta=10000.0,
                                      attention_bias=False, mlp_bias=False, tie_word_embeddings=False,
                                      attn_implementation="eager", **kw)
    theirs = transformers.LlamaForCausalLM(config).eval()
    missing, unexpected = theirs.load_state_dict(llama_state_dict(model), strict=False)
    assert not unexpected and not [k for k in missing if not k.endswith("rotary_emb.inv_freq")], (missing, unexpected)
    return theirs


@pytest.mark.parametrize("kv_heads", [KV_HEADS, HEADS, 1])
def test_llama_logits_equal_hugging_face_with_and_without_the_cache(kv_heads):
    ours = _ours(n_kv_heads=kv_heads)
    theirs = _llama(ours)
    ids = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = theirs(ids).logits
        full = ours(ids)
        cache, steps = KVCache(), []
        for t in range(ids.size(1)):  # one token at a time, as generation does
            steps.append(ours(ids[:, t : t + 1], cache))
    torch.testing.assert_close(full, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.cat(steps, dim=1), expected, atol=1e-5, rtol=0)
    assert cache.get(ours.blocks.layers[0].self_attn)[0].shape == (2, kv_heads, 12, D // HEADS)  # h_kv heads stored


def test_rope_and_gqa_cache_parity_prompt_then_steps():
    """A prompt, then one token at a time (offset > 0), then two at once (extend=True): the same logits."""
    for kw in (dict(), dict(ffn="mlp", norm="layer", bias=True, n_kv_heads=None), dict(n_kv_heads=1)):
        model = _ours(**kw)
        ids = torch.randint(0, VOCAB, (3, 11), generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            full = model(ids)
            cache = KVCache()
            parts = [model(ids[:, :5], cache)] + [model(ids[:, t : t + 1], cache) for t in range(5, 9)]
            parts.append(model(ids[:, 9:], cache, extend=True))
        torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=0)


def test_rope_makes_scores_depend_only_on_the_distance():
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 1, 1, 8, generator=g, dtype=torch.float64), torch.randn(1, 1, 1, 8, generator=g,
                                                                                  dtype=torch.float64)
    scores = [float(rope_rotate(q, m) @ rope_rotate(k, m - 3).transpose(-2, -1)) for m in (3, 7, 20)]
    assert max(scores) - min(scores) < 1e-10
    assert abs(float(rope_rotate(q, 5) @ rope_rotate(k, 1).transpose(-2, -1)) - scores[0]) > 1e-6  # 4 ≠ 3 apart


def test_rope_refuses_an_odd_head_size_and_cross_attention():
    with pytest.raises(ValueError, match="head size d_k = 12 / 4 = 3 is odd"):
        MultiHeadAttention(12, 4, positions="rope")
    with pytest.raises(ValueError, match="odd"):
        GPT(10, d_model=12, n_heads=4, positions="rope")
    mha = MultiHeadAttention(8, 2, positions="rope")
    x, memory = torch.randn(1, 3, 8), torch.randn(1, 5, 8)
    with pytest.raises(ValueError, match="rotates queries and keys of one sequence.*cross=True"):
        mha(x, memory)
    model = Transformer(11, 12, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16,
                        positions="rope").eval()  # its cross-attention is built with cross=True
    assert model(torch.randint(1, 11, (2, 5)), torch.randint(1, 12, (2, 4))).shape == (2, 4, 12)


def test_grouped_query_attention_refuses_a_group_that_does_not_divide():
    with pytest.raises(ValueError, match="n_kv_heads=3 must divide n_heads=4"):
        MultiHeadAttention(16, 4, n_kv_heads=3)
    with pytest.raises(ValueError, match="n_kv_heads must be a positive int|n_kv_heads"):
        GPT(10, d_model=16, n_heads=4, n_kv_heads=0)
    mha = MultiHeadAttention(16, 4, n_kv_heads=2)
    assert mha.qkv_proj.weight.shape == (16 + 2 * 8, 16) and mha.w_k.shape == (8, 16)
