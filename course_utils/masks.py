"""Attention masks (lesson 05).

**Convention.** A boolean mask is ``True`` where a query *may attend* to a key, exactly like
``torch.nn.functional.scaled_dot_product_attention``. It broadcasts against the scores ``(B, h, T_q, T_k)``:

* ``padding_mask(ids, pad_id)`` -> ``(B, 1, 1, T_k)``: hide padding keys.
* ``causal_mask(T_q, T_k)`` -> ``(T_q, T_k)``: query *i* sees keys ``j <= i + (T_k - T_q)`` (no look-ahead).
* ``combine_masks(a, b, ...)``: logical AND.

An *additive* float mask M is added to the scores, softmax(QKᵀ/√d_k + M): 0 keeps a key, −inf removes it.
``nn.MultiheadAttention`` uses the opposite boolean convention (True = *ignore*); ``to_torch_key_padding_mask``
and ``from_torch_key_padding_mask`` convert.

A query whose keys are *all* masked has nothing to attend to; softmax over only −inf is 0/0 = NaN. This library
defines its attention weights and context vector as **zeros** (see ``attention.scaled_dot_product_attention``).
"""

from __future__ import annotations

import torch

from .validation import check_rank, check_tensor


def padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """``True`` for real tokens, ``False`` for padding. ids ``(B, T)`` -> mask ``(B, 1, 1, T)``."""
    check_rank(ids, "ids", (2,), "(B, T) token ids")
    return (ids != pad_id)[:, None, None, :]


def lengths_to_padding_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """``lengths (B,)`` -> ``(B, 1, 1, T)`` with ``True`` at positions ``< length``."""
    check_rank(lengths, "lengths", (1,), "(B,)")
    max_len = int(lengths.max()) if max_len is None else max_len
    positions = torch.arange(max_len, device=lengths.device)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def causal_mask(t_q: int, t_k: int | None = None, device=None) -> torch.Tensor:
    """Lower-triangular ``(T_q, T_k)`` bool mask: query i may see key j iff ``j <= i + (T_k - T_q)``.

    With ``T_k == T_q`` this is the usual "no peeking at the future" triangle. With a KV cache the queries are the
    *last* ``T_q`` positions of a sequence of ``T_k``, hence the offset.
    """
    t_k = t_q if t_k is None else t_k
    if t_q < 0 or t_k < t_q:
        raise ValueError(f"causal_mask needs 0 <= T_q <= T_k, got T_q={t_q}, T_k={t_k}")
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of boolean masks with broadcasting; ``None`` entries are skipped (None if all are None)."""
    out = None
    for m in masks:
        if m is None:
            continue
        check_tensor(m, "mask")
        if m.dtype != torch.bool:
            raise TypeError(
                f"combine_masks takes bool masks (True = attend), got {m.dtype}: "
                "convert additive masks with from_additive_mask first"
            )
        out = m if out is None else out & m
    return out


def to_additive_mask(mask: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Bool keep-mask -> additive float mask (0 where True, −inf where False)."""
    if mask.dtype != torch.bool:
        raise TypeError(f"to_additive_mask takes a bool mask, got {mask.dtype}")
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


def from_additive_mask(mask: torch.Tensor) -> torch.Tensor:
    """Additive float mask -> bool keep-mask (True where the added value is finite)."""
    if not torch.is_floating_point(mask):
        raise TypeError(f"from_additive_mask takes a float mask, got {mask.dtype}")
    return torch.isfinite(mask)


def to_torch_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our ``(B, 1, 1, T)`` keep-mask -> ``nn.MultiheadAttention``'s ``key_padding_mask`` ``(B, T)`` (True = ignore)."""
    if mask.dim() == 4:
        mask = mask[:, 0, 0, :]
    return ~mask


def from_torch_key_padding_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """``nn.MultiheadAttention``'s ``(B, T)`` key_padding_mask (True = ignore) -> our ``(B, 1, 1, T)`` keep-mask."""
    check_rank(key_padding_mask, "key_padding_mask", (2,), "(B, T)")
    return ~key_padding_mask.bool()[:, None, None, :]


def to_torch_attn_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our ``(T_q, T_k)`` keep-mask -> ``nn.MultiheadAttention``'s bool ``attn_mask`` (True = not allowed)."""
    return ~mask
