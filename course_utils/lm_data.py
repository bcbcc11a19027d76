"""Batches for language modelling: random windows of a token stream (lessons 11, 12, the GPT trainer), seeded with
``(seed, rank, step)``: a resumed run sees the same batches, every DDP process different ones."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .validation import check_positive, check_rank


def split_ids(ids: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Split a 1-D token stream into train / validation by position (the end is held out)."""
    check_rank(ids, "ids", (1,), "(N,) token stream")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n = int(len(ids) * (1.0 - val_fraction))
    return ids[:n], ids[n:]


def lm_batches(ids: torch.Tensor, block_size: int, batch_size: int, seed: int = 0,
               rank: int = 0) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
    """``get_batch(step) -> (x, y)``, both ``(batch_size, block_size)``, with y = x shifted left by one token."""
    check_rank(ids, "ids", (1,), "(N,) token stream")
    check_positive(block_size, "block_size")
    check_positive(batch_size, "batch_size")
    if len(ids) <= block_size:
        raise ValueError(f"the token stream has {len(ids)} tokens, fewer than block_size + 1 = {block_size + 1}: "
                         "use more text or a smaller block_size")

    def get_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(hash((seed, rank, step)) % (2**63))
        starts = torch.randint(len(ids) - block_size, (batch_size,), generator=g)
        offsets = starts[:, None] + torch.arange(block_size + 1)  # (B, T + 1)
        window = ids[offsets]
        return window[:, :-1], window[:, 1:]  # x (B, T), y (B, T)

    return get_batch
