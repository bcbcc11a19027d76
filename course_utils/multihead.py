"""Multi-head attention (lessons 04, 16): MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O, head_i = Attention(Q
W_i^Q, K W_i^K, V W_i^V). Unlike ``nn.MultiheadAttention``: keywords after query/key/value, masks True = attend
(``key_keep_mask`` (B, T_k) for padding), one result tensor that will not unpack as a pair (``attention_guards``). From
``LayerConfig``: RoPE on q and k (``positions="rope"``), grouped-query attention (``n_kv_heads`` < ``n_heads``)."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from .attention import attention_with_weights
from .attention_guards import AttentionOutput, as_output, checked_mask, refuse_torch_style
from .config import LayerConfig
from .kv_cache import KVCache
from .positional import check_rope_self_attention, rope_rotate
from .validation import check_bool, check_divisible

__all__ = ["MultiHeadAttention", "AttentionOutput", "record_attention"]


class MultiHeadAttention(nn.Module):
    """``qkv_proj.weight`` stacks [W^Q; W^K; W^V] (d_model, then n_kv_heads·d_k rows twice; d_k = d_model / h) as
    ``nn.MultiheadAttention.in_proj_weight``; ``out_proj`` is W^O. Reads ``attn_dropout``, ``bias``,
    ``positions``/``rope_base``, ``n_kv_heads`` from ``config``/keywords; ``cross=True``: cross-attention."""

    def __init__(self, d_model: int, n_heads: int, *, config: LayerConfig | None = None, cross: bool = False, **layer):
        super().__init__()
        c = LayerConfig.merge(layer, config)
        self.d_k = check_divisible(d_model, n_heads)
        self.d_model, self.n_heads, self.dropout = d_model, n_heads, c.p_attn
        self.n_kv_heads = n_heads if c.n_kv_heads is None else c.n_kv_heads
        if n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads={self.n_kv_heads} must divide n_heads={n_heads} (each K/V head serves a "
                             f"group of query heads): pick a divisor such as {n_heads} or 1")
        self.rope_base = c.rope_base if c.positions == "rope" and not check_bool(cross, "cross") else None
        if self.rope_base is not None and self.d_k % 2:
            raise ValueError(f"positions='rope' rotates pairs of features, but the head size d_k = {d_model} / "
                             f"{n_heads} = {self.d_k} is odd: choose d_model and n_heads with an even d_k")
        self.sizes = (d_model, self.n_kv_heads * self.d_k, self.n_kv_heads * self.d_k)  # rows of W^Q, W^K, W^V
        self.qkv_proj = nn.Linear(d_model, sum(self.sizes), bias=c.bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=c.bias)
        self.record_weights = False  # True: keep self.last_weights (B, h, T_q, T_k) for plots
        self.last_weights: torch.Tensor | None = None
        nn.init.xavier_uniform_(self.qkv_proj.weight)  # the same initialisation as nn.MultiheadAttention
        if c.bias:
            nn.init.zeros_(self.qkv_proj.bias)
            nn.init.zeros_(self.out_proj.bias)

    # Views of the paper's matrices, for lessons (F.linear computes x Wᵀ, so these are Wᵀ in the paper's notation).
    w_q = property(lambda self: self.qkv_proj.weight.split(self.sizes)[0])
    w_k = property(lambda self: self.qkv_proj.weight.split(self.sizes)[1])
    w_v = property(lambda self: self.qkv_proj.weight.split(self.sizes)[2])

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, heads·d_k) -> (B, heads, T, d_k)."""
        b, t, _ = x.shape
        return x.view(b, t, x.shape[-1] // self.d_k, self.d_k).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, h, T, d_k) -> (B, T, d_model): the Concat in the formula."""
        b, _, t, _ = x.shape
        return x.transpose(1, 2).reshape(b, t, self.d_model)

    def _proj(self, x: torch.Tensor, i: int) -> torch.Tensor:
        """x times block i of [W^Q; W^K; W^V] (+ bias), split into heads: (B, T, C) -> (B, heads, T, d_k)."""
        rows, b = slice(sum(self.sizes[:i]), sum(self.sizes[: i + 1])), self.qkv_proj.bias
        return self.split_heads(F.linear(x, self.qkv_proj.weight[rows], None if b is None else b[rows]))

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None, value: torch.Tensor | None = None,
                *positional, mask: torch.Tensor | None = None, key_keep_mask: torch.Tensor | None = None,
                is_causal: bool = False, cache: KVCache | None = None, need_weights: bool = False,
                **torch_style) -> torch.Tensor:
        """query ``(B, T_q, d_model)``; key/value ``(B, T_k, d_model)`` (value None: key; both None: self-attention);
        ``mask`` (True = attend) broadcasts to (B, h, T_q, T_k); ``key_keep_mask (B, T_k)`` -> ``(B, T_q, d_model)``;
        ``positional`` / ``torch_style`` catch PyTorch-style calls."""
        refuse_torch_style(positional, torch_style)
        mask = checked_mask(self, query, key, value, mask, key_keep_mask, cache, need_weights)
        check_rope_self_attention(self.rope_base, key)
        if key is None:  # self-attention: Q, K, V in one matmul
            q, k, v = map(self.split_heads, self.qkv_proj(query).split(self.sizes, dim=-1))  # (B, h|h_kv, T, d_k)
            if self.rope_base is not None:  # rotate by the absolute positions offset + t (offset: the cache's)
                q, k = (rope_rotate(t, 0 if cache is None else cache.offset, self.rope_base) for t in (q, k))
            if cache is not None:  # append this step's keys/values to the past ones
                k, v = cache.append(self, k, v)  # (B, h_kv, T_past + T, d_k)
        else:  # cross-attention: the memory's K, V (cached: projected once per memory)
            def memory_kv():  # the memory's K and V, (B, h_kv, T_k, d_k) each
                return self._proj(key, 1), self._proj(key if value is None else value, 2)

            k, v = memory_kv() if cache is None else cache.cross(self, key, memory_kv)  # (B, h_kv, T_k, d_k)
            q = self._proj(query, 0)  # (B, h, T_q, d_k)
        group = self.n_heads // self.n_kv_heads  # query heads per K/V head (grouped-query attention)
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, h, T_k, d_k)
        keep_weights = need_weights or self.record_weights
        out, weights = attention_with_weights(q, k, v, mask, dropout_p=self.dropout if self.training else 0.0,
                                              need_weights=keep_weights, is_causal=is_causal)  # (B, h, T_q, d_k)
        if keep_weights:
            self.last_weights = weights.detach()  # (B, h, T_q, T_k)
        return as_output(self.out_proj(self.merge_heads(out)))  # (B, T_q, d_model)


@contextlib.contextmanager
def record_attention(model: nn.Module):
    """``with record_attention(model) as attn: model(x)``: every ``MultiHeadAttention`` of ``model`` (yielded in
    order) keeps ``last_weights`` (B, h, T_q, T_k) within the block."""
    modules = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    before = [m.record_weights for m in modules]
    for m in modules:
        m.record_weights = True
    try:
        yield modules
    finally:
        for m, flag in zip(modules, before):
            m.record_weights = flag
