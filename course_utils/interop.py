"""Copy weights between ``course_utils`` modules and ``torch.nn``'s Transformer modules, both ways
(``load_from_torch``, ``copy_to_torch``); both stack W^Q, W^K, W^V in one (3·d_model, d_model) matrix."""

from __future__ import annotations

import torch
from torch import nn

from .layers import DecoderLayer, EncoderLayer
from .models import Decoder, SelfAttentionStack
from .multihead import MultiHeadAttention
from .norm import LayerNorm

# Each *_pairs lists (our tensor, torch's tensor, name) once and _transfer copies either way: the directions agree.
Pairs = list[tuple[torch.Tensor | None, torch.Tensor | None, str]]


def _mha_pairs(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> Pairs:
    if theirs.in_proj_weight is None:
        raise ValueError("nn.MultiheadAttention with kdim/vdim != embed_dim has separate projections; "
                         "build it with kdim=vdim=embed_dim")
    return [(ours.qkv_proj.weight, theirs.in_proj_weight, "in_proj_weight"),
            (ours.qkv_proj.bias, theirs.in_proj_bias, "in_proj_bias"),
            (ours.out_proj.weight, theirs.out_proj.weight, "out_proj.weight"),
            (ours.out_proj.bias, theirs.out_proj.bias, "out_proj.bias")]


def _layer_pairs(ours: nn.Module, theirs: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer) -> Pairs:
    """Encoder layer: self_attn, linear1/2, norm1/2; a decoder layer adds multihead_attn (our cross_attn), norm3."""
    if ours.self_attn_residual.norm_first != theirs.norm_first:
        raise ValueError(f"norm_first differs (ours {ours.self_attn_residual.norm_first}, torch {theirs.norm_first})")
    decoder = isinstance(theirs, nn.TransformerDecoderLayer)
    pairs = _mha_pairs(ours.self_attn, theirs.self_attn)
    if decoder:
        pairs += _mha_pairs(ours.cross_attn, theirs.multihead_attn)
    pairs += [(getattr(getattr(ours.ffn, lin), kind), getattr(getattr(theirs, lin), kind), f"{lin}.{kind}")
              for lin in ("linear1", "linear2") for kind in ("weight", "bias")]
    residuals = ("self_attn", "cross_attn", "ffn") if decoder else ("self_attn", "ffn")  # torch's norm1, norm2, norm3
    for i, sublayer in enumerate(residuals, 1):
        pairs += _pairs(getattr(ours, f"{sublayer}_residual").norm, getattr(theirs, f"norm{i}"))  # refuses an RMSNorm
    return pairs


def _stack_pairs(ours: nn.Module, theirs: nn.TransformerEncoder | nn.TransformerDecoder) -> Pairs:
    if len(ours.layers) != len(theirs.layers):
        raise ValueError(f"layer count differs: ours {len(ours.layers)}, torch {len(theirs.layers)}")
    pairs = [p for mine, their in zip(ours.layers, theirs.layers) for p in _pairs(mine, their)]
    if (theirs.norm is None) != isinstance(ours.norm, nn.Identity):
        raise ValueError("final norm: build ours with final_norm=True to match nn.Transformer (it always has one)")
    return pairs + (_pairs(ours.norm, theirs.norm) if theirs.norm is not None else [])


# torch's module type -> (the course_utils type it maps onto, the tensor pairs of the two)
_MAPPINGS = {nn.MultiheadAttention: (MultiHeadAttention, _mha_pairs),
             nn.LayerNorm: (LayerNorm, lambda ours, theirs: [(ours.weight, theirs.weight, "norm.weight"),
                                                             (ours.bias, theirs.bias, "norm.bias")]),
             nn.TransformerEncoderLayer: (EncoderLayer, _layer_pairs),
             nn.TransformerDecoderLayer: (DecoderLayer, _layer_pairs),
             nn.TransformerEncoder: (SelfAttentionStack, _stack_pairs), nn.TransformerDecoder: (Decoder, _stack_pairs)}


def _pairs(ours: nn.Module, theirs: nn.Module) -> Pairs:
    if isinstance(theirs, nn.Transformer):   # ours: a course_utils Transformer, or any module with both stacks
        if not (hasattr(ours, "encoder") and hasattr(ours, "decoder")):
            raise TypeError(f"nn.Transformer maps onto a course_utils Transformer, got {type(ours).__name__}")
        return _pairs(ours.encoder, theirs.encoder) + _pairs(ours.decoder, theirs.decoder)
    for kind, (our_kind, pairs) in _MAPPINGS.items():
        if isinstance(theirs, kind):
            if not isinstance(ours, our_kind):
                raise TypeError(f"torch's {kind.__name__} maps onto course_utils {our_kind.__name__}, got "
                                f"{type(ours).__name__}: pass the two modules of the same role")
            return pairs(ours, theirs)
    raise TypeError(f"no weight mapping for torch's {type(theirs).__name__}: expected nn.MultiheadAttention, "
                    "nn.LayerNorm, nn.TransformerEncoder(Layer), nn.TransformerDecoder(Layer) or nn.Transformer")


@torch.no_grad()
def _transfer(ours: nn.Module, theirs: nn.Module, to_ours: bool) -> None:
    pairs = [(mine, their, what) if to_ours else (their, mine, what) for mine, their, what in _pairs(ours, theirs)]
    for dst, src, what in pairs:           # every check runs before the first tensor is written
        if (dst is None) != (src is None):
            raise ValueError(f"{what}: one module has this parameter and the other does not (bias=True/False?)")
        if dst is not None and dst.shape != src.shape:
            raise ValueError(f"{what}: shape {tuple(src.shape)} cannot be copied into {tuple(dst.shape)}: "
                             "build both modules with the same d_model, n_heads and d_ff")
    for dst, src, _ in pairs:
        if dst is not None:
            dst.copy_(src)


def load_from_torch(ours: nn.Module, theirs: nn.Module) -> nn.Module:
    """Copy a ``torch.nn`` Transformer module's weights into the ``course_utils`` module of the same role."""
    _transfer(ours, theirs, to_ours=True)
    return ours


def copy_to_torch(ours: nn.Module, theirs: nn.Module) -> nn.Module:
    """Copy our module's weights into the ``torch.nn`` module of the same role (same sizes, ``batch_first=True``)."""
    _transfer(ours, theirs, to_ours=False)
    return theirs


def _only(kind: type[nn.Module]):
    def load(ours: nn.Module, theirs: nn.Module) -> nn.Module:  # load_from_torch for torch's ``kind`` only
        if not isinstance(theirs, kind):
            raise TypeError(f"this loader copies torch's nn.{kind.__name__}, got {type(theirs).__name__}: use the "
                            "load_*_from_torch of that module, or load_from_torch(ours, theirs)")
        return load_from_torch(ours, theirs)
    return load


load_mha_from_torch = _only(nn.MultiheadAttention)
load_norm_from_torch = _only(nn.LayerNorm)
load_encoder_layer_from_torch = _only(nn.TransformerEncoderLayer)
load_decoder_layer_from_torch = _only(nn.TransformerDecoderLayer)
load_encoder_from_torch = _only(nn.TransformerEncoder)
load_decoder_from_torch = _only(nn.TransformerDecoder)
load_transformer_from_torch = _only(nn.Transformer)
