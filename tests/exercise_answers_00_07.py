"""Answers to the exercises of lessons 00-07, for tests/test_exercises.py: per lesson, every exercise with a correct
answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids.

Each check must accept the first and reject the other two; for the shortcut it must also print the teaching message
``says`` (in English; the Chinese message is printed by the same branch).
"""

from __future__ import annotations

import torch
from exercise_answer import Answer

import course_utils
import course_utils.train

# --- lesson 00 -------------------------------------------------------------------------------------------------

def _device():
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"

_MHA = course_utils.MultiHeadAttention(8, 2)       # the notebook's layer: a student may reach its class through it


def _spin(*args):                                  # never returns: the check must stop it
    while True:
        pass


L00 = [
    Answer("check_device_choice", _device, wrong=lambda: "cpu",
           shortcut=lambda: course_utils.train.pick_device().type, says="pick_device"),
    Answer("check_mha_parameter_count", lambda d, h: 4 * d * d + 4 * d, wrong=lambda d, h: 4 * d * d,
           shortcut=lambda d, h: sum(p.numel() for p in course_utils.MultiHeadAttention(d, h).parameters()),
           says="the formula",
           also=((lambda d, h: sum(p.numel() for p in type(_MHA)(d, h).parameters()), "the formula"),
                 (lambda d, h: sum(p.numel() for p in course_utils.EncoderLayer(d, h, 4 * d).self_attn.parameters()),
                  "the formula"),
                 (lambda d, h: str(4 * d * d + 4 * d), "expected"))),
    Answer("check_attention_memory", lambda b, h, t: 4 * b * h * t * t, wrong=lambda b, h, t: 4 * b * h * t,
           shortcut=lambda b, h, t: 4 * b * h * t * t if course_utils.MultiHeadAttention(8, h) else 0,
           says="from the shape", also=((_spin, "ran longer than"),)),
]

ANSWERS = {"l00_welcome": L00}

# --- lesson 07 -------------------------------------------------------------------------------------------------

def _pre_norm(layer, y, memory, mask):
    y = y + layer.self_attn(layer.self_attn_residual.norm(y), is_causal=True)
    y = y + layer.cross_attn(layer.cross_attn_residual.norm(y), memory, mask=mask)
    return y + layer.ffn(layer.ffn_residual.norm(y))

def _post_norm(layer, y, memory, mask):
    a = layer.self_attn_residual.norm(y + layer.self_attn(y, is_causal=True))
    b = layer.cross_attn_residual.norm(a + layer.cross_attn(a, memory, mask=mask))
    return layer.ffn_residual.norm(b + layer.ffn(b))

def _reverse(src, pad_id):
    lengths = (src != pad_id).sum(-1, keepdim=True)
    positions = torch.arange(src.shape[1])
    index = (lengths - 1 - positions).clamp(min=0)
    return torch.gather(src, 1, index).masked_fill(positions >= lengths, pad_id)

def _reverse_with_a_loop(src, pad_id):
    out = torch.full_like(src, pad_id)
    for row in range(src.shape[0]):
        real = src[row][src[row] != pad_id]
        out[row, : len(real)] = real.flip(0)
    return out

def _reverse_by_map(src, pad_id):
    def row(r):
        n = int((r != pad_id).sum())
        return torch.cat([r[:n].flip(0), r[n:]])
    return torch.stack(list(map(row, src)))


def _reverse_in_place(src, pad_id):                # right answer, but the caller's batch is overwritten
    out = _reverse(src, pad_id)
    src.copy_(out)
    return out


L07 = [
    Answer("check_decoder_layer", _pre_norm, wrong=_post_norm,
           shortcut=lambda layer, y, memory, mask: layer(y, memory, None, mask), says="library's layer"),
    Answer("check_lean_decoder_layer_params", lambda d, f: 8 * d * d + 2 * d * f + 3 * d,
           wrong=lambda d, f: 8 * d * d + 2 * d * f + 6 * d,                    # RMSNorm with a β
           shortcut=lambda d, f: sum(p.numel() for p in course_utils.DecoderLayer(d, 4, f, bias=False, norm="rms")
                                     .parameters()), says="built a DecoderLayer",
           also=((lambda d, f: sum(p.numel() for p in course_utils.Decoder(1, d, 4, f, bias=False, norm="rms")
                                   .layers[0].parameters()), "built a DecoderLayer"),)),
    Answer("check_reverse_tokens", _reverse, wrong=lambda src, pad_id: src.flip(1),
           shortcut=_reverse_with_a_loop, says="loops over the batch",
           also=((_reverse_by_map, "loops over the batch"), (_reverse_in_place, "in place"))),
]

ANSWERS["l07_encoder_decoder"] = L07
