"""Copy weights between ``course_utils`` modules and PyTorch's own ``torch.nn`` Transformer modules.

Used by the parity tests and by the lessons' "check against PyTorch" cells: same weights in, same numbers out.
Both libraries store W^Q, W^K, W^V stacked in one (3·d_model, d_model) matrix, so the copy is one-to-one.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import MultiHeadAttention
from .layers import DecoderLayer, EncoderLayer
from .models import Decoder, Encoder
from .norm import LayerNorm


def _copy(dst: torch.Tensor | None, src: torch.Tensor | None, what: str) -> None:
    if (dst is None) != (src is None):
        raise ValueError(f"{what}: one module has this parameter and the other does not (bias=True/False?)")
    if dst is None:
        return
    if dst.shape != src.shape:
        raise ValueError(
            f"{what}: shape {tuple(src.shape)} cannot be copied into {tuple(dst.shape)}: "
            "build both modules with the same d_model, n_heads and d_ff"
        )
    dst.copy_(src)


@torch.no_grad()
def load_mha_from_torch(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy ``nn.MultiheadAttention`` (in_proj + out_proj) into our ``MultiHeadAttention``."""
    if theirs.in_proj_weight is None:
        raise ValueError(
            "nn.MultiheadAttention with kdim/vdim != embed_dim has separate projections; "
            "build it with kdim=vdim=embed_dim"
        )
    _copy(ours.qkv_proj.weight, theirs.in_proj_weight, "in_proj_weight")
    _copy(ours.qkv_proj.bias, theirs.in_proj_bias, "in_proj_bias")
    _copy(ours.out_proj.weight, theirs.out_proj.weight, "out_proj.weight")
    _copy(ours.out_proj.bias, theirs.out_proj.bias, "out_proj.bias")
    return ours


@torch.no_grad()
def load_norm_from_torch(ours: nn.Module, theirs: nn.LayerNorm) -> nn.Module:
    if not isinstance(ours, LayerNorm):
        raise TypeError(
            f"nn.LayerNorm can only be copied into course_utils LayerNorm, not {type(ours).__name__}"
        )
    _copy(ours.weight, theirs.weight, "norm.weight")
    _copy(ours.bias, theirs.bias, "norm.bias")
    return ours


@torch.no_grad()
def _load_ffn(ours, theirs) -> None:
    _copy(ours.ffn.linear1.weight, theirs.linear1.weight, "linear1.weight")
    _copy(ours.ffn.linear1.bias, theirs.linear1.bias, "linear1.bias")
    _copy(ours.ffn.linear2.weight, theirs.linear2.weight, "linear2.weight")
    _copy(ours.ffn.linear2.bias, theirs.linear2.bias, "linear2.bias")


def load_encoder_layer_from_torch(ours: EncoderLayer, theirs: nn.TransformerEncoderLayer) -> EncoderLayer:
    """Copy ``nn.TransformerEncoderLayer`` (self_attn, linear1/2, norm1/2) into our ``EncoderLayer``."""
    if ours.res1.norm_first != theirs.norm_first:
        raise ValueError(f"norm_first differs (ours {ours.res1.norm_first}, torch {theirs.norm_first})")
    load_mha_from_torch(ours.self_attn, theirs.self_attn)
    _load_ffn(ours, theirs)
    load_norm_from_torch(ours.res1.norm, theirs.norm1)
    load_norm_from_torch(ours.res2.norm, theirs.norm2)
    return ours


def load_decoder_layer_from_torch(ours: DecoderLayer, theirs: nn.TransformerDecoderLayer) -> DecoderLayer:
    """Copy ``nn.TransformerDecoderLayer`` (self_attn, multihead_attn, linear1/2, norm1/2/3) into ours."""
    if ours.res1.norm_first != theirs.norm_first:
        raise ValueError(f"norm_first differs (ours {ours.res1.norm_first}, torch {theirs.norm_first})")
    load_mha_from_torch(ours.self_attn, theirs.self_attn)
    load_mha_from_torch(ours.cross_attn, theirs.multihead_attn)
    _load_ffn(ours, theirs)
    for mine, their in ((ours.res1, theirs.norm1), (ours.res2, theirs.norm2), (ours.res3, theirs.norm3)):
        load_norm_from_torch(mine.norm, their)
    return ours


def _load_stack(ours, theirs_layers, theirs_norm, load_layer) -> None:
    if len(ours.layers) != len(theirs_layers):
        raise ValueError(f"layer count differs: ours {len(ours.layers)}, torch {len(theirs_layers)}")
    for mine, their in zip(ours.layers, theirs_layers):
        load_layer(mine, their)
    if (theirs_norm is None) != isinstance(ours.norm, nn.Identity):
        raise ValueError(
            "final norm: build ours with final_norm=True to match nn.Transformer (it always has one)"
        )
    if theirs_norm is not None:
        load_norm_from_torch(ours.norm, theirs_norm)


def load_encoder_from_torch(ours: Encoder, theirs: nn.TransformerEncoder) -> Encoder:
    _load_stack(ours, theirs.layers, theirs.norm, load_encoder_layer_from_torch)
    return ours


def load_decoder_from_torch(ours: Decoder, theirs: nn.TransformerDecoder) -> Decoder:
    _load_stack(ours, theirs.layers, theirs.norm, load_decoder_layer_from_torch)
    return ours


def load_transformer_from_torch(ours, theirs: nn.Transformer):
    """Copy an ``nn.Transformer``'s encoder and decoder stacks into ``ours.encoder`` / ``ours.decoder``
    (``ours`` is a course_utils ``Transformer`` or any module with those two attributes)."""
    load_encoder_from_torch(ours.encoder, theirs.encoder)
    load_decoder_from_torch(ours.decoder, theirs.decoder)
    return ours
