"""Pooling token vectors into one per sequence (lessons 09, 13); padding must not vote: h̄_b = Σ_t keep_bt · h_bt /
max(1, Σ_t keep_bt), so a row with no real token pools to zero instead of 0/0 = NaN."""

from __future__ import annotations

import torch

from .validation import check_rank, check_tensor, reads_values


def check_keep_mask(keep: torch.Tensor, shape: tuple[int, ...], name: str = "keep") -> torch.Tensor:
    """A ``(B, T)`` keep-mask (bool, or transformers' 0/1 integers) -> bool; floats are refused: an additive mask
    (0 = keep) read as 1/0 would keep exactly the padding."""
    check_tensor(keep, name)
    if tuple(keep.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(keep.shape)}, expected {tuple(shape)} (B, T): one entry per "
                         "token, True (or 1) for a real token, False (or 0) for padding")
    if keep.dtype == torch.bool:
        return keep
    if keep.is_floating_point() or keep.is_complex():
        raise TypeError(f"{name} must be a bool keep-mask (True = real token), got {keep.dtype}: use "
                        f"{name}.bool() for a 1/0 mask, or ids != pad_id")
    if keep.numel() and reads_values(keep) and bool(((keep != 0) & (keep != 1)).any()):  # no GPU sync
        raise ValueError(f"{name} holds values other than 0 and 1: it must mark real tokens with 1 (or True) and "
                         "padding with 0 (or False)")
    return keep.bool()


def masked_mean(hidden: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The mean of the real tokens' vectors: ``(B, T, C), (B, T) -> (B, C)``; ``keep`` as in ``check_keep_mask``."""
    check_rank(hidden, "hidden", (3,), "(B, T, C) token vectors")
    keep = check_keep_mask(keep, hidden.shape[:2]).to(hidden.device)
    weights = keep.to(hidden.dtype).unsqueeze(-1)                           # (B, T, 1): padding must not vote
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)        # (B, C)
