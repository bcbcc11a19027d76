"""Scale a lesson's model size and steps with the hardware, never skip work; ``COURSE_BUDGET=small|full`` overrides."""

from __future__ import annotations

import os

import torch


def budget() -> str:
    """``"full"`` on CUDA, ``"small"`` otherwise, unless ``COURSE_BUDGET`` says so."""
    choice = os.environ.get("COURSE_BUDGET", "").strip().lower()
    if choice in ("small", "full"):
        return choice
    if choice:
        raise ValueError(f"COURSE_BUDGET must be 'small' or 'full', got {choice!r}")
    return "full" if torch.cuda.is_available() else "small"


def scaled(small, full):
    """Return ``small`` on a CPU budget and ``full`` on a GPU budget: ``steps = scaled(300, 5000)``."""
    return full if budget() == "full" else small
