"""Answers to the exercises of lesson 16 (the modern decoder block), for tests/test_exercises.py: every exercise
with a correct answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids (see
exercise_answer.py)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from exercise_answer import Answer


def _angles(x, positions, base):
    d_k = x.shape[-1]
    theta = base ** (-torch.arange(0, d_k, 2, dtype=x.dtype) / d_k)                  # (d_k/2,)
    return positions[:, None, :, None].to(x.dtype) * theta                            # (B, 1, T, d_k/2)


def _rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


def rope_at(x, positions, base=10000.0):                 # pairs (i, i + d_k/2), Hugging Face's layout
    angle = _angles(x, positions, base)
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
    return x * cos + _rotate_half(x) * sin


def rope_at_interleaved(x, positions, base=10000.0):     # pairs (2i, 2i + 1), RoFormer's layout: also right
    angle = _angles(x, positions, base)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1).flatten(-2)


def _rope_ignoring_positions(x, positions, base=10000.0):      # arange(T): right only without padding
    return rope_at(x, torch.arange(x.shape[2]).expand(x.shape[0], -1), base)


def _rope_backwards(x, positions, base=10000.0):               # −mθ: lesson 02's direction
    return rope_at(x, -positions, base)


def _rope_by_transformers(x, positions, base=10000.0):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    angle = _angles(x, positions, base)[:, 0]                                          # (B, T, d_k/2)
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
    return apply_rotary_pos_emb(x, x, cos, sin)[0]


def gqa_attention(q, k, v, *, tile=False, causal="offset"):
    group = q.size(1) // k.size(1)
    if tile:                                                                           # the mistake: k.repeat
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    else:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    T, T_k = q.size(2), k.size(2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal != "none":                                                               # "top-left": tril()
        keep = torch.ones(T, T_k, dtype=torch.bool).tril(T_k - T if causal == "offset" else 0)
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores.softmax(-1) @ v


def gqa_by_view(q, k, v):                                 # no copy: a group axis; also right
    B, h, T, d_k = q.shape
    h_kv, T_k = k.size(1), k.size(2)
    qg = q.view(B, h_kv, h // h_kv, T, d_k)
    scores = qg @ k[:, :, None].transpose(-2, -1) / math.sqrt(d_k)                    # (B, h_kv, g, T, T_k)
    keep = torch.ones(T, T_k, dtype=torch.bool).tril(T_k - T)
    out = scores.masked_fill(~keep, float("-inf")).softmax(-1) @ v[:, :, None]
    return out.reshape(B, h, T, d_k)


def _gqa_by_sdpa(q, k, v):                                # the grouping done by PyTorch
    T, T_k = q.size(2), k.size(2)
    keep = torch.ones(T, T_k, dtype=torch.bool).tril(T_k - T)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)


def llama_block_params(d, h, h_kv, d_ff):
    return 2 * d + 2 * d * d + 2 * d * (h_kv * d // h) + 3 * d * d_ff


def _counted_from_transformers(d, h, h_kv, d_ff):         # builds Hugging Face's layer and counts it
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    config = LlamaConfig(hidden_size=d, num_attention_heads=h, num_key_value_heads=h_kv, intermediate_size=d_ff)
    with torch.device("meta"):                            # shapes only: nothing allocated
        return sum(p.numel() for p in LlamaDecoderLayer(config, 0).parameters())


L16 = [
    Answer("check_rope_at", rope_at, wrong=_rope_ignoring_positions, shortcut=_rope_by_transformers,
           says="write the rotation yourself", also=((_rope_backwards, "−m·θ"),)),
    Answer("check_gqa_attention", gqa_attention, wrong=lambda q, k, v: gqa_attention(q, k, v, tile=True),
           shortcut=_gqa_by_sdpa, says="do the grouping",
           also=((lambda q, k, v: gqa_attention(q, k, v, causal="top-left"), "cached tokens"),)),
    Answer("check_llama_block_params", llama_block_params,
           wrong=lambda d, h, h_kv, f: 2 * d + 4 * d * d + 3 * d * f,                  # K and V as d × d
           shortcut=_counted_from_transformers, says="counted the parameters of a built module",
           also=((lambda d, h, h_kv, f: llama_block_params(d, h, h_kv, f) - d * f, "three maps"),
                 (lambda d, h, h_kv, f: llama_block_params(d, h, h_kv, f) + 2 * d, "no biases"))),
]

ANSWERS = {"l16_modern_decoder": L16}
