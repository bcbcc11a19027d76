"""FFN, residual sublayers, encoder and decoder layers (lessons 06, 07, 16), set by one ``LayerConfig`` or its fields.

    FFN(x)    = act(x W_1 + b_1) W_2 + b_2        applied to every position separately (d_model -> d_ff -> d_model)
    SwiGLU(x) = (silu(x W_1) ⊙ x W_3) W_2          Llama's gate (W_1), up (W_3) and down (W_2) projections
    post-norm (the paper):  x <- LayerNorm(x + Dropout(Sublayer(x)))
    pre-norm (GPT-2 etc.):  x <- x + Dropout(Sublayer(LayerNorm(x)))"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .config import LayerConfig
from .kv_cache import KVCache
from .multihead import MultiHeadAttention
from .norm import make_norm
from .validation import check_int, check_rank, check_vectors

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}  # tanh: GPT-2


class PositionwiseFeedForward(nn.Module):
    """``config.ffn="mlp"``: two linear maps with ``config.activation`` between them; ``"swiglu"``: a SiLU-gated
    product of two maps, then the third (``activation`` unused). The same weights at every position."""

    def __init__(self, d_model: int, d_ff: int, *, config: LayerConfig | None = None, **layer):
        super().__init__()
        c = LayerConfig.merge(layer, config)
        self.kind = c.ffn
        self.activation = F.silu if c.ffn == "swiglu" else _ACTIVATIONS[c.activation]
        self.linear1 = nn.Linear(check_int(d_model, "d_model"), check_int(d_ff, "d_ff"), bias=c.bias)  # W_1 (gate)
        self.linear2 = nn.Linear(d_ff, d_model, bias=c.bias)  # W_2 (down)
        if c.ffn == "swiglu":
            self.linear3 = nn.Linear(d_model, d_ff, bias=c.bias)  # W_3 (up)
        self.dropout = nn.Dropout(c.dropout if c.ffn_dropout is None else c.ffn_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_vectors(x, "x", self.linear1.in_features)  # (…, C)
        h = self.activation(self.linear1(x))  # (B, T, d_ff)
        if self.kind == "swiglu":
            h = h * self.linear3(x)  # the gate scales each hidden unit
        return self.linear2(self.dropout(h))  # (B, T, d_ff) -> (B, T, C)


class Residual(nn.Module):
    """A residual sublayer: the skip connection *and* the norm and dropout around a sublayer (pre- or post-norm, see
    the module docstring): the Annotated Transformer's ``SublayerConnection``."""

    def __init__(self, d_model: int, *, config: LayerConfig | None = None, **layer):
        super().__init__()
        c = LayerConfig.merge(layer, config)
        self.norm = make_norm(d_model, c)
        self.dropout = nn.Dropout(c.dropout)
        self.norm_first = c.norm_first

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class _Layer(nn.Module):
    """Attention, an FFN and a residual sublayer around each, all built from one ``config`` (or its keywords, e.g.
    ``EncoderLayer(16, 4, 32, dropout=0.0)``; defaults: ``LayerConfig``'s)."""

    cross = False  # DecoderLayer: also cross-attention to the encoder's output

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, config: LayerConfig | None = None, **layer):
        super().__init__()
        c = LayerConfig.merge(layer, config)
        self.self_attn = MultiHeadAttention(d_model, n_heads, config=c)
        self.self_attn_residual = Residual(d_model, config=c)
        if self.cross:
            self.cross_attn = MultiHeadAttention(d_model, n_heads, config=c, cross=True)
            self.cross_attn_residual = Residual(d_model, config=c)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, config=c)
        self.ffn_residual = Residual(d_model, config=c)


class EncoderLayer(_Layer):
    """Self-attention + FFN, each in a residual sublayer. With ``is_causal=True`` it is a GPT block."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *, key_keep_mask: torch.Tensor | None = None,
                is_causal: bool = False, cache: KVCache | None = None) -> torch.Tensor:
        x = self.self_attn_residual(x, lambda h: self.self_attn(h, mask=mask, key_keep_mask=key_keep_mask,
                                                                is_causal=is_causal, cache=cache))  # (B, T, C)
        return self.ffn_residual(x, self.ffn)


class DecoderLayer(_Layer):
    """Masked self-attention, cross-attention (Q from the decoder, K and V from the encoder), FFN."""

    cross = True

    def forward(self, y: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, *, is_causal: bool = True,
                cache: KVCache | None = None) -> torch.Tensor:
        """y ``(B, T_t, C)`` target states; memory ``(B, T_s, C)`` encoder output; memory_mask is the *source*
        padding mask ``(B, 1, 1, T_s)`` so no query attends to source padding."""
        if memory is None:  # without the encoder's output the layer would silently run self-attention only
            raise ValueError("a decoder layer needs the encoder's output: pass memory=encoder(src) of shape (B, T_s, "
                             "d_model); for a decoder-only model (GPT) use an Encoder with is_causal=True instead")
        check_rank(memory, "memory", (3,), "(B, T_s, d_model)")
        y = self.self_attn_residual(y, lambda h: self.self_attn(h, mask=self_mask, is_causal=is_causal, cache=cache))
        y = self.cross_attn_residual(y, lambda h: self.cross_attn(h, memory, mask=memory_mask, cache=cache))
        return self.ffn_residual(y, self.ffn)  # (B, T_t, C)
