"""Scaled dot-product attention (lessons 03-05): softmax(Q Kᵀ / √d_k + M) V (Vaswani et al., eq. 1), written out
for the T_q × T_k weights (``need_weights=True``) or by the fused ``F.scaled_dot_product_attention`` (same numbers)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .kv_cache import KVCache
from .masks import check_mask
from .validation import check_bool, check_float, check_like, check_number, check_probability, check_rank

__all__ = ["attention_with_weights", "KVCache"]

# Largest number of mask entries the fast path builds at once: a causal + padding mask for T = 16384 would be
# 268 M booleans, so the queries are processed in row blocks whose mask stays under this size.
MASK_BUDGET = 1 << 22


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float(check_rank(t, name, (2, 3, 4), "(…, T, d_k), e.g. (B, h, T, d_k)"), name)
        check_like(t, name, q, "q")
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):  # rank too
        raise ValueError(f"q, k, v must have the same rank and leading (batch, head) dimensions, got {shapes}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same feature size d_k (q·k), got {shapes}: project both to one d_k")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions T_k (one value per key), got {shapes}")


def _with_causal(mask, t_q: int, t_k: int, start: int, stop: int, device, n_k: int):
    """Rows ``start:stop`` (first ``n_k`` keys) of the causal mask, AND-ed into ``mask`` (bool) or added as −inf."""
    causal = torch.ones(stop - start, n_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q + start)
    if mask is None:
        return causal
    return mask & causal if mask.dtype == torch.bool else mask.masked_fill(~causal, float("-inf"))


def _settle(mask: torch.Tensor, dtype: torch.dtype):
    """(mask ready for the scores, has_keys (…, T_q, 1)): a row with no visible key (softmax over only −inf = NaN)
    sees every key instead (finite values and gradients) and is zeroed afterwards."""
    if mask.dtype == torch.bool:
        has_keys = mask.any(dim=-1, keepdim=True)
        return mask | ~has_keys, has_keys
    has_keys = torch.isfinite(mask).any(dim=-1, keepdim=True)  # before any cast: float16 would round −1e5 to −inf
    mask = mask.masked_fill(~has_keys, 0.0)
    if mask.dtype != dtype:
        info = torch.finfo(dtype)
        if info.max < torch.finfo(mask.dtype).max:  # narrowing: keep finite values finite
            mask = torch.where(torch.isfinite(mask), mask.clamp(info.min, info.max), mask)
        mask = mask.to(dtype)
    return mask, has_keys


def _fast(q, k, v, mask, is_causal: bool, dropout_p: float, scale: float) -> torch.Tensor:
    t_q, t_k = q.shape[-2], k.shape[-2]
    if mask is None and (not is_causal or t_q == t_k):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal, scale=scale)
    # The fused kernel takes either is_causal or a mask, not both: build the combined mask one block of query rows
    # at a time, so its size stays under MASK_BUDGET entries however long the sequence.
    rows = max(1, min(t_q, MASK_BUDGET // max(t_k, 1)))
    blocks = []
    for start in range(0, max(t_q, 1), rows):
        stop = min(t_q, start + rows)
        # with is_causal, query rows < stop see no key after stop + (T_k - T_q): leave those keys out entirely
        n_k = min(t_k, stop + t_k - t_q) if is_causal and rows < t_q else t_k
        m = mask
        if m is not None and rows < t_q:  # this block's rows and keys (a size-1 axis broadcasts as it is)
            m = m[..., start:stop, :] if m.dim() >= 2 and m.shape[-2] != 1 else m
            m = m[..., :n_k] if m.shape[-1] != 1 else m
        if is_causal:
            m = _with_causal(m, t_q, t_k, start, stop, q.device, n_k)
        m, has_keys = _settle(m, q.dtype)
        out = F.scaled_dot_product_attention(q[..., start:stop, :], k[..., :n_k, :], v[..., :n_k, :], attn_mask=m,
                                             dropout_p=dropout_p, scale=scale)
        blocks.append(out.masked_fill(~has_keys, 0.0))
    return torch.cat(blocks, dim=-2) if len(blocks) > 1 else blocks[0]


def attention_with_weights(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, *,
                           dropout_p: float = 0.0, need_weights: bool = True, scale: float | None = None,
                           is_causal: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(q kᵀ · scale + M) v, scale = 1/√d_k by default: q ``(…, T_q, d_k)``, k ``(…, T_k, d_k)``, v ``(…, T_k,
    d_v)`` -> ``(out (…, T_q, d_v), weights (…, T_q, T_k) or None with need_weights=False)``; a row with every key
    masked gives zeros, not NaN. fp16/bf16 inputs are computed in float32."""
    _check_qkv(q, k, v)
    dropout_p = check_probability(dropout_p, "dropout_p")
    check_bool(need_weights, "need_weights")
    check_bool(is_causal, "is_causal")
    t_q, t_k = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else check_number(scale, "scale")
    if is_causal and t_q > t_k:
        raise ValueError(f"is_causal needs T_q <= T_k (the queries are the last T_q positions), got {t_q} > {t_k}")
    if mask is not None:
        check_mask(mask, (*q.shape[:-2], t_q, t_k), device=q.device)
    if not need_weights:
        return _fast(q, k, v, mask, is_causal, dropout_p, scale), None

    if is_causal:
        mask = _with_causal(mask, t_q, t_k, 0, t_q, q.device, t_k)
    work = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype  # fp16 q·k overflows at 65504
    scores = (q.to(work) @ k.to(work).transpose(-2, -1)) * scale  # (…, T_q, T_k)
    if mask is not None:
        mask, has_keys = _settle(mask, work)
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~has_keys, 0.0)
    out = (F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights) @ v.to(work)
    return out.to(q.dtype), weights.to(q.dtype)  # (…, T_q, d_v), (…, T_q, T_k)

