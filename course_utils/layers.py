"""Feed-forward network, residual sublayers, encoder and decoder layers (lessons 06 and 07).

    FFN(x) = act(x W_1 + b_1) W_2 + b_2           applied to every position separately (d_model -> d_ff -> d_model)
    post-norm (the paper):  x <- LayerNorm(x + Dropout(Sublayer(x)))
    pre-norm (GPT-2 etc.):  x <- x + Dropout(Sublayer(LayerNorm(x)))
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .config import LayerConfig, check_activation
from .kv_cache import KVCache
from .multihead import MultiHeadAttention
from .norm import make_norm
from .validation import check_bool, check_int, check_probability, check_rank, check_vectors

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}  # tanh: GPT-2


class PositionwiseFeedForward(nn.Module):
    """Two linear maps with a non-linearity between them; the same weights at every position."""

    def __init__(self, d_model: int, d_ff: int, *, dropout: float = 0.0, activation: str = "relu", bias: bool = True):
        super().__init__()
        self.activation = _ACTIVATIONS[check_activation(activation)]
        self.linear1 = nn.Linear(check_int(d_model, "d_model"), check_int(d_ff, "d_ff"), bias=check_bool(bias, "bias"))
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)  # W_2, b_2
        self.dropout = nn.Dropout(check_probability(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_vectors(x, "x", self.linear1.in_features)  # (…, C)
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # (B, T, d_ff) -> (B, T, C)


class Residual(nn.Module):
    """Wraps a sublayer with dropout, the skip connection and normalisation (post- or pre-norm)."""

    def __init__(self, d_model: int, *, dropout: float = 0.0, norm_first: bool = False, eps: float = 1e-5,
                 norm: str = "layer", bias: bool = True):
        super().__init__()
        self.norm = make_norm(norm, d_model, eps=eps, bias=bias)
        self.dropout = nn.Dropout(check_probability(dropout))
        self.norm_first = check_bool(norm_first, "norm_first")

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class _Layer(nn.Module):
    """Attention, an FFN and ``n_sublayers`` residual wrappers, all read from one ``config`` (or its keywords, e.g.
    ``EncoderLayer(16, 4, 32, dropout=0.0)``; defaults: ``LayerConfig``'s)."""

    n_sublayers = 2

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, config: LayerConfig | None = None, **layer):
        super().__init__()
        c = LayerConfig.merge(layer, config)
        p_attn = c.dropout if c.attn_dropout is None else c.attn_dropout
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=p_attn, bias=c.bias)
        if self.n_sublayers == 3:
            self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=p_attn, bias=c.bias)
        p_ffn = c.dropout if c.ffn_dropout is None else c.ffn_dropout
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout=p_ffn, activation=c.activation, bias=c.bias)
        for i in range(1, self.n_sublayers + 1):  # res1, res2 (, res3)
            setattr(self, f"res{i}", Residual(d_model, dropout=c.dropout, norm_first=c.norm_first, eps=c.eps,
                                              norm=c.norm, bias=c.bias))


class EncoderLayer(_Layer):
    """Self-attention + FFN, each in a residual sublayer. With ``is_causal=True`` it is a GPT block."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *, key_keep_mask: torch.Tensor | None = None,
                is_causal: bool = False, cache: KVCache | None = None) -> torch.Tensor:
        x = self.res1(x, lambda h: self.self_attn(h, mask=mask, key_keep_mask=key_keep_mask, is_causal=is_causal,
                                                  cache=cache))  # (B, T, C)
        return self.res2(x, self.ffn)


class DecoderLayer(_Layer):
    """Masked self-attention, cross-attention (Q from the decoder, K and V from the encoder), FFN."""

    n_sublayers = 3

    def forward(self, y: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, *, is_causal: bool = True,
                cache: KVCache | None = None) -> torch.Tensor:
        """y ``(B, T_t, C)`` target states; memory ``(B, T_s, C)`` encoder output; memory_mask is the *source*
        padding mask ``(B, 1, 1, T_s)`` so no query attends to source padding."""
        if memory is None:  # without the encoder's output the layer would silently run self-attention only
            raise ValueError("a decoder layer needs the encoder's output: pass memory=encoder(src) of shape (B, T_s, "
                             "d_model); for a decoder-only model (GPT) use an Encoder with is_causal=True instead")
        check_rank(memory, "memory", (3,), "(B, T_s, d_model)")
        y = self.res1(y, lambda h: self.self_attn(h, mask=self_mask, is_causal=is_causal, cache=cache))
        y = self.res2(y, lambda h: self.cross_attn(h, memory, mask=memory_mask, cache=cache))
        return self.res3(y, self.ffn)  # (B, T_t, C)

