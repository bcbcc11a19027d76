"""Inference mode in one place: every decoding function and evaluation loop uses ``evaluating``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """Run the block with ``model.eval()`` under ``torch.no_grad()``, then put every submodule back in the mode it
    had (a model may keep some parts in eval mode), even when the block raises."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"evaluating() takes a torch.nn.Module, got {type(model).__name__}")
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        for m, training in modes:
            m.training = training


def model_device(model: nn.Module) -> torch.device:
    """The device of ``model``'s first parameter (where its inputs must go)."""
    return next(model.parameters()).device
