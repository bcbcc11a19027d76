"""Every global RNG (Python, NumPy, torch CPU / CUDA / MPS), seeded together and saved in each checkpoint."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

__all__ = ["seed_everything", "get_rng_state", "set_rng_state"]


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global RNG and torch (CPU and every CUDA device)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an int in [0, 2**32), got {seed!r} (NumPy's limit)")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds all CUDA devices


def get_rng_state() -> dict[str, Any]:
    """Every global RNG state as tensors / plain Python values (safe for ``weights_only=True``)."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {"python": [version, list(internal), gauss], "torch": torch.get_rng_state(),
                             "numpy": [str(name), [int(k) for k in keys], int(pos), int(has_gauss), float(cached)]}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if hasattr(torch, "mps") and torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the RNG states saved by :func:`get_rng_state` (the inverse conversions)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    # set_rng_state wants CPU byte tensors even when the checkpoint was mapped onto a GPU.
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():  # another machine: what matches; the rest stays seeded
        for index, s in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(s.cpu(), index)
    if "mps" in state and hasattr(torch, "mps") and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["mps"].cpu())
