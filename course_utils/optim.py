"""Optimizer parameter groups: weight decay on weight matrices only."""

from __future__ import annotations

import math
from typing import Any

from torch import nn

from .validation import is_real_number

__all__ = ["param_groups"]


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups with decoupled weight decay ``w <- w - lr * weight_decay * w`` on weight matrices only
    (``p.dim() >= 2``, as GPT-2, BERT), not on biases, norm gains or embedding tables; tied parameters appear once."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"param_groups needs an nn.Module, got {type(model).__name__}")
    if not (is_real_number(weight_decay) and math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be a finite float >= 0 (e.g. 0.1 or 0.0), got {weight_decay!r}")
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decay, no_decay = [], []
    for p in model.parameters():  # each shared parameter once
        (decay if p.dim() >= 2 and id(p) not in embeddings else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": float(weight_decay)}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]
