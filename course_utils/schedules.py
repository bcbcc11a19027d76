"""Learning-rate schedules as ``LambdaLR`` multipliers (lesson 09; used by ``course_utils.train.fit``).

``torch.optim.lr_scheduler.LambdaLR(optimizer, f)`` sets ``lr = base_lr * f(s)`` where ``s`` is the number
of ``scheduler.step()`` calls so far (0 before the first update). Both schedules below count the update
being made from 1, i.e. ``step = s + 1``, as the paper does.

They are small callable objects rather than closures so that ``scheduler.state_dict()`` records their
parameters (plain numbers, safe for ``torch.load(..., weights_only=True)``).
"""

from __future__ import annotations

import math

__all__ = ["InverseSqrtSchedule", "CosineSchedule", "inverse_sqrt_schedule", "cosine_schedule"]


def _positive_int(name: str, value: object, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}: e.g. {name}=4000")
    if value < 0 or (value == 0 and not allow_zero):
        lowest = 0 if allow_zero else 1
        raise ValueError(f"{name}={value} must be >= {lowest}")
    return value


class InverseSqrtSchedule:
    """``lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` (Vaswani et al. 2017, 5.3).

    Linear warm-up for ``warmup`` steps, then decay with ``1/sqrt(step)``; the peak, at ``step == warmup``,
    is ``(d_model * warmup)^-0.5``. As a multiplier it reproduces the paper exactly with ``base_lr = 1.0``
    (the paper's Adam has no other learning rate); another ``base_lr`` scales the whole curve.
    """

    def __init__(self, d_model: int, warmup: int) -> None:
        self.d_model = _positive_int("d_model", d_model)
        self.warmup = _positive_int("warmup", warmup)

    def __call__(self, s: int) -> float:
        step = s + 1  # LambdaLR passes 0 for the first update; the paper counts it as step 1
        return self.d_model**-0.5 * min(step**-0.5, step * self.warmup**-1.5)

    def __repr__(self) -> str:
        return f"InverseSqrtSchedule(d_model={self.d_model}, warmup={self.warmup})"


class CosineSchedule:
    """Linear warm-up to 1, then a half cosine down to ``min_ratio`` at ``total_steps`` (lesson 09).

    With ``step = s + 1``::

        step <= warmup:  f = step / warmup
        otherwise:       p = (step - warmup) / (total_steps - warmup), clipped to [0, 1]
                         f = min_ratio + (1 - min_ratio) * (1 + cos(pi * p)) / 2

    so ``f = 1`` at the end of warm-up and ``f = min_ratio`` at the last step (and after it).
    """

    def __init__(self, total_steps: int, warmup: int = 0, min_ratio: float = 0.0) -> None:
        self.total_steps = _positive_int("total_steps", total_steps)
        self.warmup = _positive_int("warmup", warmup, allow_zero=True)
        if self.warmup > self.total_steps:
            raise ValueError(
                f"warmup={warmup} is longer than total_steps={total_steps}: use a warm-up of a few "
                f"percent of the run, e.g. warmup={max(1, total_steps // 20)}"
            )
        number = isinstance(min_ratio, (int, float)) and not isinstance(min_ratio, bool)
        if not number or not 0.0 <= min_ratio <= 1.0:
            raise ValueError(f"min_ratio={min_ratio!r} must be a float in [0, 1] (the final lr / peak lr)")
        self.min_ratio = float(min_ratio)

    def __call__(self, s: int) -> float:
        step = s + 1
        if step <= self.warmup:
            return step / self.warmup
        span = self.total_steps - self.warmup
        progress = 1.0 if span == 0 else min(1.0, (step - self.warmup) / span)
        return self.min_ratio + (1.0 - self.min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def __repr__(self) -> str:
        return (f"CosineSchedule(total_steps={self.total_steps}, warmup={self.warmup}, "
                f"min_ratio={self.min_ratio})")


def inverse_sqrt_schedule(d_model: int, warmup: int = 4000) -> InverseSqrtSchedule:
    """The paper's schedule as a ``LambdaLR`` multiplier; see :class:`InverseSqrtSchedule`."""
    return InverseSqrtSchedule(d_model, warmup)


def cosine_schedule(total_steps: int, warmup: int = 0, min_ratio: float = 0.0) -> CosineSchedule:
    """Warm-up + cosine decay as a ``LambdaLR`` multiplier; see :class:`CosineSchedule`."""
    return CosineSchedule(total_steps, warmup, min_ratio)
