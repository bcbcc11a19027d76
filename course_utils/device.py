"""Where tensors live: pick the best available device (or check the one asked for) and move a batch there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

__all__ = ["pick_device", "move_to_device"]


def pick_device(prefer: str | torch.device | None = None) -> torch.device:
    """The best available device: CUDA, then Apple MPS, then CPU; or ``prefer``, checked to be usable."""
    available = {"cuda": torch.cuda.is_available(),
                 "mps": hasattr(torch.backends, "mps") and torch.backends.mps.is_available()}
    if prefer is None:
        return torch.device(next((kind for kind, ok in available.items() if ok), "cpu"))
    try:
        device = torch.device(prefer)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"unknown device {prefer!r}: use 'cpu', 'cuda', 'cuda:0', 'mps' or None") from err
    if not available.get(device.type, True):
        raise ValueError(f"device {prefer!r}: {device.type.upper()} is not available, use pick_device() or 'cpu'")
    return device


def move_to_device(batch: Any, device: torch.device | str) -> Any:
    """Move every tensor in ``batch`` (a tensor, tuple/list/namedtuple or dict, nested) to ``device``."""
    if isinstance(batch, Tensor):
        return batch.to(device)
    if isinstance(batch, Mapping):  # any mapping comes back as a plain dict
        return {k: move_to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple: rebuild with positional fields
        return type(batch)(*(move_to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_to_device(v, device) for v in batch)
    return batch  # ints, strings, None...: nothing to move
