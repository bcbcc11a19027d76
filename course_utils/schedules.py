"""Learning-rate schedules as ``LambdaLR`` multipliers, ``lr = base_lr * f(s)`` after ``s`` scheduler steps (lesson 09;
update ``step = s + 1``, as in the paper); objects, so that ``scheduler.state_dict()`` records their parameters."""

from __future__ import annotations

import math

from .validation import check_int, is_real_number

__all__ = ["InverseSqrtSchedule", "CosineSchedule", "inverse_sqrt_schedule", "cosine_schedule"]


class InverseSqrtSchedule:
    """``lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` (Vaswani et al. 2017, 5.3): linear warm-up,
    then ``1/sqrt(step)`` decay; the paper's schedule exactly with ``base_lr = 1.0``."""

    def __init__(self, d_model: int, warmup: int = 4000) -> None:
        self.d_model = check_int(d_model, "d_model")
        self.warmup = check_int(warmup, "warmup")

    def __call__(self, s: int) -> float:
        step = s + 1  # LambdaLR passes 0 for the first update; the paper counts it as step 1
        return self.d_model**-0.5 * min(step**-0.5, step * self.warmup**-1.5)

    def __repr__(self) -> str:
        return f"InverseSqrtSchedule(d_model={self.d_model}, warmup={self.warmup})"


class CosineSchedule:
    """Linear warm-up to 1, then a half cosine down to ``min_ratio`` at ``total_steps`` (lesson 09)::

        step <= warmup:  f = step / warmup
        otherwise:       p = (step - warmup) / (total_steps - warmup), clipped to [0, 1]
                         f = min_ratio + (1 - min_ratio) * (1 + cos(pi * p)) / 2"""

    def __init__(self, total_steps: int, warmup: int = 0, min_ratio: float = 0.0) -> None:
        self.total_steps = check_int(total_steps, "total_steps")
        self.warmup = check_int(warmup, "warmup", 0)
        if self.warmup > self.total_steps:
            raise ValueError(f"warmup={warmup} is longer than total_steps={total_steps}: use a warm-up of a few "
                             f"percent of the run, e.g. warmup={max(1, total_steps // 20)}")
        if not (is_real_number(min_ratio) and 0.0 <= min_ratio <= 1.0):
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
        return f"CosineSchedule(total_steps={self.total_steps}, warmup={self.warmup}, min_ratio={self.min_ratio})"


# The names lessons use: ``LambdaLR(optimizer, cosine_schedule(steps, warmup))``.
inverse_sqrt_schedule, cosine_schedule = InverseSqrtSchedule, CosineSchedule
