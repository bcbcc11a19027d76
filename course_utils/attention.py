"""Scaled dot-product attention and multi-head attention (lessons 03, 04 and 05).

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + M) V                                   (Vaswani et al., eq. 1)
    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Two paths compute the same numbers:

* the **written-out** path (``need_weights=True``) forms the (T_q × T_k) weight matrix, so lessons can plot it;
* the **fast** path calls ``torch.nn.functional.scaled_dot_product_attention``, which picks a fused kernel
  (FlashAttention / memory-efficient on CUDA) and never materialises the weights.

Masks follow ``course_utils.masks``: bool True = may attend, or an additive float mask. A query row with every key
masked gets zero weights and a zero context vector on both paths (softmax of only −inf would be NaN).
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from .masks import causal_mask, combine_masks
from .validation import (
    check_divisible,
    check_float,
    check_last_dim,
    check_mask,
    check_probability,
    check_rank,
    check_same_device,
)


def _rows_with_keys(mask: torch.Tensor) -> torch.Tensor:
    """(…, T_q, 1) bool: does this query row keep at least one key?"""
    keep = mask if mask.dtype == torch.bool else torch.isfinite(mask)
    return keep.any(dim=-1, keepdim=True)


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_rank(t, name, (2, 3, 4), "(…, T, d_k), e.g. (B, h, T, d_k)")
        check_float(t, name)
    for name, t in (("k", k), ("v", v)):
        check_same_device(t, name, q.device, "q")
    if not (q.dim() == k.dim() == v.dim()):
        raise ValueError(
            f"q, k, v must have the same rank, got shapes {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size d_k to be compared by a dot product, got "
            f"q {tuple(q.shape)} and k {tuple(k.shape)}: project both to the same d_k"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions T_k (one value per key), got "
            f"k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"q, k, v must share their leading (batch, head) dimensions, got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    need_weights: bool = True,
    scale: float | None = None,
    is_causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(q kᵀ · scale + M) v with scale = 1/√d_k by default (lesson 03).

    q ``(…, T_q, d_k)``, k ``(…, T_k, d_k)``, v ``(…, T_k, d_v)``; returns ``(out (…, T_q, d_v), weights)`` where
    ``weights (…, T_q, T_k)`` is returned only when ``need_weights`` (else ``None``, via the fused fast path).
    """
    _check_qkv(q, k, v)
    check_probability(dropout_p, "dropout_p")
    t_q, t_k = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if mask is not None:
        check_mask(mask, (*q.shape[:-2], t_q, t_k))
        check_same_device(mask, "mask", q.device, "the attention inputs")
        if mask.dtype != torch.bool:
            mask = mask.to(q.dtype)
    if is_causal:
        if mask is None and not need_weights and t_q == t_k:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale)
            return out, None
        causal = causal_mask(t_q, t_k, device=q.device)
        mask = (
            causal
            if mask is None
            else (
                combine_masks(mask, causal)
                if mask.dtype == torch.bool
                else mask.masked_fill(~causal, float("-inf"))
            )
        )

    has_keys = None
    if mask is not None:
        # A row with no visible key would be softmax over only −inf = NaN. Let such rows see every key (finite
        # numbers, finite gradients), then zero their weights / outputs below: documented result, no NaN.
        has_keys = _rows_with_keys(mask)
        mask = (mask | ~has_keys) if mask.dtype == torch.bool else mask.masked_fill(~has_keys, 0.0)

    if not need_weights:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
        return (out if has_keys is None else out.masked_fill(~has_keys, 0.0)), None

    scores = (q @ k.transpose(-2, -1)) * scale  # (…, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = torch.softmax(scores, dim=-1)
    if has_keys is not None:
        weights = weights.masked_fill(~has_keys, 0.0)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights  # (…, T_q, d_v), (…, T_q, T_k)


class KVCache:
    """Keys and values already computed during incremental decoding (lesson 11).

    Each attention module stores its own entry: self-attention *appends* the new position's K and V, cross-attention
    computes the encoder's K and V once. ``offset`` counts the positions the model has processed (the positional
    encoding of the next token starts there); models advance it after each forward.
    """

    def __init__(self):
        self._store: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.offset = 0

    def get(self, module: nn.Module):
        return self._store.get(id(module))

    def put(self, module: nn.Module, k: torch.Tensor, v: torch.Tensor) -> None:
        self._store[id(module)] = (k, v)

    def advance(self, n: int) -> None:
        self.offset += n

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` of every entry (beam search re-ranks hypotheses)."""
        self._store = {
            key: (k.index_select(0, index), v.index_select(0, index)) for key, (k, v) in self._store.items()
        }

    def __len__(self) -> int:
        return len(self._store)


class MultiHeadAttention(nn.Module):
    """h heads of scaled dot-product attention with the paper's projections (lesson 04).

    ``qkv_proj.weight`` stacks [W^Q; W^K; W^V] (each d_model × d_model, i.e. h blocks of d_k columns) so that
    self-attention needs one matrix multiply; the layout equals ``nn.MultiheadAttention.in_proj_weight``.
    ``out_proj`` is W^O. d_k = d_model / h, so the total cost matches one full-width head.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.d_k = check_divisible(d_model, n_heads)
        self.d_model, self.n_heads, self.dropout = d_model, n_heads, check_probability(dropout)
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.record_weights = False  # True: keep self.last_weights (B, h, T_q, T_k) for plots
        self.last_weights: torch.Tensor | None = None
        nn.init.xavier_uniform_(self.qkv_proj.weight)  # the same initialisation as nn.MultiheadAttention
        if bias:
            nn.init.zeros_(self.qkv_proj.bias)
            nn.init.zeros_(self.out_proj.bias)

    # Views of the paper's matrices, for lessons (F.linear computes x Wᵀ, so these are Wᵀ in the paper's notation).
    @property
    def w_q(self) -> torch.Tensor:
        return self.qkv_proj.weight[: self.d_model]

    @property
    def w_k(self) -> torch.Tensor:
        return self.qkv_proj.weight[self.d_model : 2 * self.d_model]

    @property
    def w_v(self) -> torch.Tensor:
        return self.qkv_proj.weight[2 * self.d_model :]

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, d_model) -> (B, h, T, d_k)."""
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_k).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, h, T, d_k) -> (B, T, d_model): the Concat in the formula."""
        b, _, t, _ = x.shape
        return x.transpose(1, 2).reshape(b, t, self.d_model)

    def _project(self, query, key, value, cache):
        d, w, bias = self.d_model, self.qkv_proj.weight, self.qkv_proj.bias
        if key is None:  # self-attention: one matmul for Q, K and V
            q, k, v = F.linear(query, w, bias).split(d, dim=-1)
            k, v = self.split_heads(k), self.split_heads(v)
            if cache is not None:  # append this step's keys/values to the past ones
                past = cache.get(self)
                if past is not None:
                    k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
                cache.put(self, k, v)
            return self.split_heads(q), k, v
        q = F.linear(query, w[:d], None if bias is None else bias[:d])
        past = cache.get(self) if cache is not None else None
        if past is not None:  # cross-attention: the encoder's K, V never change
            return self.split_heads(q), past[0], past[1]
        if value is None or value is key:  # the usual case: K and V from the same memory
            k, v = F.linear(key, w[d:], None if bias is None else bias[d:]).split(d, dim=-1)
        else:
            k = F.linear(key, w[d : 2 * d], None if bias is None else bias[d : 2 * d])
            v = F.linear(value, w[2 * d :], None if bias is None else bias[2 * d :])
        k, v = self.split_heads(k), self.split_heads(v)
        if cache is not None:
            cache.put(self, k, v)
        return self.split_heads(q), k, v

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        """query ``(B, T_q, d_model)``; key/value ``(B, T_k, d_model)`` for cross-attention (value defaults to key),
        both ``None`` for self-attention. ``mask`` broadcasts to (B, h, T_q, T_k). Returns ``(B, T_q, d_model)``."""
        check_rank(query, "query", (3,), "(B, T, d_model)")
        check_float(query, "query")
        check_last_dim(query, "query", self.d_model)
        check_same_device(query, "query", self.out_proj.weight.device, "MultiHeadAttention")
        if key is None and value is not None:
            raise ValueError(
                "value was given without key: pass key=value=memory for cross-attention, "
                "or neither for self-attention"
            )
        for name, t in (("key", key), ("value", value)):
            if t is None:
                continue
            check_rank(t, name, (3,), "(B, T_k, d_model)")
            check_last_dim(t, name, self.d_model)
            if t.shape[0] != query.shape[0]:
                raise ValueError(
                    f"query and {name} have different batch sizes ({query.shape[0]} vs {t.shape[0]}):"
                    " cross-attention pairs each target sequence with its own source sequence"
                )
        if value is not None and value.shape[1] != key.shape[1]:
            raise ValueError(
                f"key and value must have the same length T_k (one value per key), got "
                f"{tuple(key.shape)} and {tuple(value.shape)}"
            )
        q, k, v = self._project(query, key, value, cache)  # (B, h, T_q, d_k), (B, h, T_k, d_k) ×2
        keep = need_weights or self.record_weights
        out, weights = scaled_dot_product_attention(
            q,
            k,
            v,
            mask,
            dropout_p=self.dropout if self.training else 0.0,
            need_weights=keep,
            is_causal=is_causal,
        )
        if keep:
            self.last_weights = weights.detach()
        return self.out_proj(self.merge_heads(out))  # (B, T_q, d_model)


@contextlib.contextmanager
def record_attention(model: nn.Module):
    """Within the block every ``MultiHeadAttention`` of ``model`` keeps ``last_weights``; yields the modules in order.

    >>> with record_attention(model) as attn:
    ...     model(x)
    >>> weights = [m.last_weights for m in attn]      # one (B, h, T_q, T_k) tensor per attention module
    """
    modules = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    before = [m.record_weights for m in modules]
    for m in modules:
        m.record_weights = True
    try:
        yield modules
    finally:
        for m, flag in zip(modules, before):
            m.record_weights = flag
