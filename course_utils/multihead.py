"""Multi-head attention (lesson 04): MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O with
head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V). Unlike ``nn.MultiheadAttention``: keywords after query/key/value,
masks True = attend (``key_keep_mask`` (B, T_k) for padding), one result tensor that refuses to unpack as a pair."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from .attention import attention_with_weights
from .kv_cache import KVCache
from .masks import check_key_keep_mask, check_mask, check_self_mask
from .validation import _compiling, check_bool, check_divisible, check_like, check_probability, check_vectors

_TORCH_KWARGS = {
    "key_padding_mask": "key_keep_mask=~key_padding_mask (ours is True = attend, torch's True = ignore)",
    "attn_mask": "mask= (ours is True = attend; torch's bool attn_mask is True = not allowed: pass ~attn_mask)",
    "average_attn_weights": "nothing: mha.last_weights keeps every head, (B, h, T_q, T_k)",
}


class AttentionOutput(torch.Tensor):
    """The ``(B, T_q, d_model)`` result of ``MultiHeadAttention``: a plain tensor in every operation (results are
    ``torch.Tensor``), except that unpacking it like torch's ``(out, weights)`` pair raises a TypeError."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __iter__(self):
        raise TypeError("MultiHeadAttention returns one tensor (B, T_q, d_model), not nn.MultiheadAttention's (output, "
                        "weights) pair: write `out = mha(...)`, then read mha.last_weights (after need_weights=True)")

    def __repr__(self, **kwargs) -> str:
        return self.as_subclass(torch.Tensor).__repr__(**kwargs)


class MultiHeadAttention(nn.Module):
    """``qkv_proj.weight`` stacks [W^Q; W^K; W^V] (each d_model × d_model, h blocks of d_k = d_model / h) for one
    matmul in self-attention, the layout of ``nn.MultiheadAttention.in_proj_weight``; ``out_proj`` is W^O."""

    def __init__(self, d_model: int, n_heads: int, *, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.d_k = check_divisible(d_model, n_heads)
        self.d_model, self.n_heads, self.dropout = d_model, n_heads, check_probability(dropout)
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=check_bool(bias, "bias"))
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

        def proj(x, first: int, stop: int):  # x @ blocks first:stop of [W^Q; W^K; W^V]ᵀ, split per block
            rows = slice(first * d, stop * d)
            out = F.linear(x, w[rows], None if bias is None else bias[rows])
            return [self.split_heads(t) for t in out.split(d, dim=-1)]

        if key is None:  # self-attention: one matmul for Q, K and V
            q, k, v = proj(query, 0, 3)
            if cache is not None:  # append this step's keys/values to the past ones
                k, v = cache.append(self, k, v)
            return q, k, v

        def memory_kv():  # the usual case, value is key: K and V from the same memory in one matmul
            return proj(key, 1, 3) if value is None or value is key else proj(key, 1, 2) + proj(value, 2, 3)

        # cross-attention: the encoder's K, V never change while the memory is the same
        k, v = memory_kv() if cache is None else cache.cross(self, key, memory_kv)
        return proj(query, 0, 1)[0], k, v

    def _check_inputs(self, query, key, value) -> None:
        if key is None and value is not None:
            raise ValueError("value without key: pass key=value=memory (cross-attention) or neither (self-attention)")
        w = self.out_proj.weight
        check_vectors(query, "query", self.d_model, w.device, w.dtype, "MultiHeadAttention", "(B, T, d_model)")
        for name, t in (("key", key), ("value", value)):
            if t is None:
                continue
            check_like(check_vectors(t, name, self.d_model, layout="(B, T_k, d_model)"), name, query, "query")
            if t.shape[0] != query.shape[0]:
                raise ValueError(f"query and {name} have different batch sizes ({query.shape[0]} vs {t.shape[0]}): "
                                 "cross-attention pairs each target sequence with its own source sequence")
        if value is not None and value.shape[1] != key.shape[1]:
            raise ValueError(f"key and value must have the same length T_k (one value per key), got {tuple(key.shape)} "
                             f"and {tuple(value.shape)}")

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None, value: torch.Tensor | None = None,
                *positional, mask: torch.Tensor | None = None, key_keep_mask: torch.Tensor | None = None,
                is_causal: bool = False, cache: KVCache | None = None, need_weights: bool = False,
                **torch_style) -> torch.Tensor:
        """query ``(B, T_q, d_model)``; key/value ``(B, T_k, d_model)`` (value defaults to key; both ``None``:
        self-attention); ``mask`` (True = attend) broadcasts to (B, h, T_q, T_k); ``key_keep_mask (B, T_k)``. Returns
        ``(B, T_q, d_model)``; ``positional`` / ``torch_style`` catch PyTorch-style calls to say what to write."""
        if positional:
            raise TypeError("MultiHeadAttention takes query, key, value positionally and the rest by keyword (mask=, "
                            "key_keep_mask=, True = attend): a 4th positional argument is nn.MultiheadAttention's "
                            "key_padding_mask, whose True means the opposite (ignore)")
        for name in torch_style:
            fix = _TORCH_KWARGS.get(name)
            raise TypeError(f"MultiHeadAttention got {name}=, " + (f"PyTorch's keyword: pass {fix}" if fix else
                            "which it does not take (keywords: mask, key_keep_mask, is_causal, cache, need_weights)"))
        self._check_inputs(query, key, value)
        check_bool(need_weights, "need_weights")
        t_k = (query if key is None else key).shape[1]
        if key_keep_mask is not None:
            keep = check_key_keep_mask(key_keep_mask, query.shape[0], t_k, query.device)
            if cache is not None and key is None:
                raise ValueError("key_keep_mask with a self-attention KVCache: pass a full mask= for the cached keys")
            if mask is not None:
                check_mask(mask, (query.shape[0], self.n_heads, query.shape[1], t_k), device=query.device)
                keep = mask & keep if mask.dtype == torch.bool else torch.where(keep, mask, float("-inf"))
            mask = keep
        if mask is not None and key is None and cache is None:  # self-attention: the diagonal is each token itself
            check_self_mask(check_mask(mask, (query.shape[0], self.n_heads, t_k, t_k), device=query.device), t_k)
        q, k, v = self._project(query, key, value, cache)  # (B, h, T_q, d_k), (B, h, T_k, d_k) ×2
        keep_weights = need_weights or self.record_weights
        out, weights = attention_with_weights(q, k, v, mask, dropout_p=self.dropout if self.training else 0.0,
                                              need_weights=keep_weights, is_causal=is_causal)
        if keep_weights:
            self.last_weights = weights.detach()
        out = self.out_proj(self.merge_heads(out))  # (B, T_q, d_model)
        return out if _compiling() else out.as_subclass(AttentionOutput)


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
