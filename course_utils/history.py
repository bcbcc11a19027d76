"""What a training run recorded (``History``) and how it can fail loudly (``TrainingDiverged``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["History", "TrainingDiverged"]

_LISTS = ("step", "loss", "lr", "elapsed", "val_step")
_RESERVED = (*_LISTS, "interrupted")


@dataclass
class History:
    """What ``fit`` recorded, as plain lists (``plt.plot(h.step, h.loss)``): per update its index, loss, lr, seconds
    since the start (over resumes); ``val_step`` aligned with each ``metrics`` list (NaN: missing); ``interrupted``."""

    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    elapsed: list[float] = field(default_factory=list)
    val_step: list[int] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    interrupted: bool = False

    def __len__(self) -> int:
        return len(self.step)

    def record_step(self, step: int, loss: float, lr: float, elapsed: float) -> None:
        for name, value in zip(_LISTS, (int(step), float(loss), float(lr), float(elapsed))):
            getattr(self, name).append(value)

    def record_eval(self, step: int, metrics: Mapping[str, Any]) -> None:
        if not isinstance(metrics, Mapping):
            raise TypeError(f"eval_fn must return a dict like {{'val_loss': 1.23}}, got {type(metrics).__name__}")
        values = {}  # what eval_fn returned, all checked before anything is recorded
        for name, value in metrics.items():
            if name in _RESERVED:
                raise ValueError(f"eval_fn returned a metric named {name!r}, a name History uses for "
                                 f"training: rename it, e.g. 'val_{name}'")
            try:
                values[str(name)] = float(value)
            except (TypeError, ValueError, RuntimeError):  # a string, a list, a tensor of several numbers
                raise TypeError(f"eval_fn returned {name!r}: {value!r:.60}, not a number: return a dict of "
                                "floats, e.g. {'val_loss': loss.item()}") from None
        for name in values:  # a metric seen for the first time: pad its earlier evaluations with NaN
            self.metrics.setdefault(name, [math.nan] * len(self.val_step))
        self.val_step.append(int(step))
        for name, series in self.metrics.items():
            series.append(values.get(name, math.nan))

    def to_dict(self) -> dict[str, Any]:
        """Plain lists, each metric under its own name (for ``viz.plot_history``, a checkpoint or JSON)."""
        return {**{name: list(getattr(self, name)) for name in _LISTS},
                **{name: list(values) for name, values in self.metrics.items()}, "interrupted": self.interrupted}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> History:
        """Inverse of :meth:`to_dict` (every key that is not a training field is an eval metric)."""
        return cls(**{name: list(data[name]) for name in _LISTS[:4]}, val_step=list(data.get("val_step", [])),
                   metrics={k: list(v) for k, v in data.items() if k not in _RESERVED},
                   interrupted=bool(data.get("interrupted", False)))


class TrainingDiverged(FloatingPointError):
    """The loss (or the gradient norm) became NaN/inf; ``step``, ``value`` and ``lr`` say where."""

    def __init__(self, message: str, *, step: int, value: float, lr: float) -> None:
        super().__init__(message)
        self.step, self.value, self.lr = step, value, lr
