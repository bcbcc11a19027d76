"""A small, readable training loop (lessons 09-13 and the benchmarks): ``fit`` is lesson 09's whole recipe. With
``get_batch(step)`` a deterministic function of ``step``, a resumed run repeats an uninterrupted one bit for bit."""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .device import move_to_device, pick_device
from .history import History, TrainingDiverged
from .modes import evaluating
from .optim import param_groups
from .resumable import Resumable
from .rng import seed_everything
from .safe_files import defer_interrupts
from .schedules import cosine_schedule, inverse_sqrt_schedule
from .validation import check_int, check_optimizer, is_real_number

__all__ = ["pick_device", "seed_everything", "move_to_device", "History", "TrainingDiverged", "fit", "param_groups",
           "inverse_sqrt_schedule", "cosine_schedule", "save_checkpoint", "load_checkpoint", "CheckpointError"]


def fit(model: nn.Module, get_batch: Callable[[int], Any], loss_fn: Callable[[nn.Module, Any], Tensor], *,
        steps: int, optimizer: torch.optim.Optimizer | None = None, lr: float = 3e-4,
        weight_decay: float = 0.0, schedule: Any = None, clip_grad: float | None = 1.0, amp: str = "auto",
        eval_fn: Callable[[nn.Module], Mapping[str, Any]] | None = None, eval_every: int = 0,
        checkpoint_path: str | os.PathLike | None = None, checkpoint_every: int = 0, resume: bool = True,
        device: str | torch.device | None = None, seed: int = 0, progress: bool = True,
        history: History | None = None, on_interrupt: str = "auto") -> History:
    """Train ``model`` until ``steps`` updates *in total* -> :class:`History`. Update ``step``: ``loss = loss_fn(model,
    get_batch(step))`` under autocast (``amp``: ``"auto"`` = bf16 where CUDA has it, ``"bf16"``, ``"fp16"`` +
    GradScaler, ``"off"``); backward; clip the grad norm to ``clip_grad`` (``None``/0: off); optimizer (default
    ``AdamW(param_groups(model, weight_decay), lr)``) and ``schedule`` step (multiplier or scheduler). ``eval_fn(model)
    -> dict`` runs every ``eval_every`` steps (0: at the end) under ``modes.evaluating``; non-finite loss or grad norm:
    :class:`TrainingDiverged`, before the update. Checkpoints, resuming, Ctrl+C (``on_interrupt``): ``Resumable``."""
    steps = check_int(steps, "steps", 1)
    eval_every = check_int(eval_every, "eval_every", 0)
    if eval_every and eval_fn is None:
        raise ValueError(f"eval_every={eval_every} needs an eval_fn: pass eval_fn=lambda model: {{...}}")
    if clip_grad is not None and not (is_real_number(clip_grad) and clip_grad >= 0):
        raise ValueError(f"clip_grad must be a positive float (e.g. 1.0) or None for off, got {clip_grad!r}")
    if optimizer is None and not (is_real_number(lr) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite positive float such as 3e-4, got {lr!r}")
    check_optimizer(optimizer)
    bad_lr = [g["lr"] for g in optimizer.param_groups if not math.isfinite(float(g["lr"]))] if optimizer else []
    if bad_lr:
        raise ValueError(f"the optimizer's learning rate is {bad_lr[0]}: it must be a finite number such as 3e-4")
    if amp not in ("auto", "bf16", "fp16", "off"):
        raise ValueError(f"amp={amp!r} is not supported: use 'auto', 'bf16', 'fp16' or 'off'")
    run = Resumable(checkpoint_path, checkpoint_every, resume, on_interrupt)
    device = pick_device(device)
    if amp == "auto":
        amp = "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "off"
    if amp == "fp16" and device.type != "cuda":
        raise ValueError(f"amp='fp16' needs a CUDA GPU (device is {device}): use amp='bf16' or amp='off'")
    if history is not None and not isinstance(history, History):
        raise TypeError(f"history must be a History (e.g. the one an earlier fit returned) or None, got "
                        f"{type(history).__name__}: for a saved dict use History.from_dict(d)")
    history = History() if history is None else history
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError(f"{type(model).__name__} has no parameters to train (none, or all frozen?): pass the model "
                         "that holds them, or unfreeze what should train with p.requires_grad_(True)")

    def autocast() -> Any:  # a fresh context per use: low-precision matmuls inside, fp32 weights outside
        if amp == "off":
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16)

    def diverged(what: str, value: float, lr_now: float) -> TrainingDiverged:
        """The error for a non-finite loss, gradient norm or learning rate, with what to try, most likely first."""
        tips = []
        if not math.isfinite(lr_now):
            tips.append(f"the learning rate is {lr_now}: it must be a finite number (check lr= and the schedule)")
        if any(p.dtype == torch.float16 for p in model.parameters()):  # not autocast: any lr can overflow them
            better = "float32 (model.float())" + (", with amp='bf16' or amp='fp16' for speed"
                                                   if device.type == "cuda" else " or bfloat16 (model.bfloat16())")
            tips.append(f"the model's weights are float16, which overflows above 65504 and rounds small "
                        f"updates away: keep them in {better}")
        elif math.isfinite(lr_now) and lr_now > 0:
            tips.append(f"lower the learning rate (now {lr_now:.3g}; try {lr_now / 10:.3g})")
        tips += [f"lower clip_grad (now {clip_grad})" if clip_grad else "enable clip_grad=1.0 (now off)",
                 "check the attention mask: a fully masked row or -inf logits give NaN", "check the inputs for NaN/inf"]
        if amp == "fp16":
            tips.append("try amp='bf16' or amp='off' (fp16 overflows above 65504)")
        return TrainingDiverged(f"{what} is {value} at step {step}: training diverged. Try to: "
                                + "; ".join(tips) + "." + run.last_good(), step=step, value=value, lr=lr_now)

    was_training, bar = model.training, None
    start = step = history.step[-1] + 1 if len(history) else 0
    try:
        # Setup holds Ctrl+C until done, so a stop here (even in a lazy torch import) is handled like one below.
        with defer_interrupts():
            seed_everything(seed)
            model.to(device)
            model.train()
            if optimizer is None:
                optimizer = torch.optim.AdamW(param_groups(model, weight_decay), lr=lr)
            scaler = torch.amp.GradScaler("cuda") if amp == "fp16" else None
            scheduler, lr_scheduler = schedule, torch.optim.lr_scheduler  # a multiplier: LambdaLR, fast-forwarded
            if isinstance(schedule, lr_scheduler.LRScheduler) and schedule.optimizer is not optimizer:
                raise ValueError("the scheduler passed as schedule= is bound to another optimizer: build it on "
                                 "fit's optimizer, or pass a multiplier such as cosine_schedule(steps, warmup)")
            if schedule is not None and not isinstance(schedule, lr_scheduler.LRScheduler):
                if not callable(schedule):
                    raise TypeError(f"schedule must be a multiplier function or an LR scheduler, got {type(schedule)}")
                for group in optimizer.param_groups:
                    group.setdefault("initial_lr", group["lr"])  # LambdaLR(last_epoch >= 0) starts from initial_lr
                scheduler = lr_scheduler.LambdaLR(optimizer, schedule, last_epoch=(0 if run.resuming else start) - 1)
            start = step = run.restore(model, optimizer, scheduler, scaler, history, start, steps)
            t0 = time.perf_counter() - (history.elapsed[-1] if history.elapsed else 0.0)
            bar = tqdm(total=steps, initial=start, disable=not progress, desc="train")
        for step in range(start, steps):
            batch = move_to_device(get_batch(step), device)
            with autocast():
                loss = loss_fn(model, batch)
            lr_now = optimizer.param_groups[0]["lr"]  # the rate this update uses
            if not isinstance(loss, Tensor) or loss.numel() != 1:
                raise TypeError(f"loss_fn must return a scalar tensor, got {type(loss).__name__} "
                                f"{tuple(getattr(loss, 'shape', ()))}: reduce it with .mean()")
            value = float(loss.detach())
            if not math.isfinite(lr_now):  # e.g. a schedule that returned inf: stop before it is applied
                raise diverged("the learning rate", lr_now, lr_now)
            if lr_now < 0:  # the update would climb the loss instead of descending it
                raise ValueError(f"the learning rate is {lr_now:.3g} at step {step}: it must be >= 0; a schedule "
                                 "must return multipliers >= 0 (e.g. cosine_schedule(steps, warmup))")
            if not math.isfinite(value):  # checked before backward: the weights stay the last good ones
                raise diverged("the loss", value, lr_now)
            if not loss.requires_grad:
                raise ValueError("the loss does not require grad: loss_fn must not use no_grad() or detach()")
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None:  # fp16: scale the loss so that small gradients do not underflow to 0
                scaler.scale(loss).backward()
                if clip_grad:
                    scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
                    nn.utils.clip_grad_norm_(model.parameters(), clip_grad)
                scaler.step(optimizer)  # skipped (and the scale lowered) if the gradients overflowed
                scaler.update()
            else:
                loss.backward()
                # clip_grad off: max_norm=inf only measures the norm (a NaN/inf gradient must never reach the weights)
                norm = float(nn.utils.clip_grad_norm_(model.parameters(), clip_grad or math.inf))
                if not math.isfinite(norm):
                    raise diverged("the gradient norm", norm, lr_now)
                optimizer.step()
            if scheduler is not None:
                scheduler.step()
            history.record_step(step, value, lr_now, time.perf_counter() - t0)
            bar.set_postfix(loss=f"{value:.4f}", lr=f"{lr_now:.2e}", refresh=False)
            bar.update(1)
            done = step + 1
            if eval_fn is not None and (done % eval_every == 0 if eval_every else done == steps):
                with evaluating(model), autocast():  # dropout off and no gradients, as at test time
                    history.record_eval(step, eval_fn(model))
            run.save_if_due(done, steps, model, optimizer, scheduler, history, scaler, amp=amp, seed=seed)
    except TrainingDiverged as err:
        err.history = history  # the curve up to the divergence, for plotting
        raise
    except KeyboardInterrupt as err:
        if run.interrupted(err, step, steps, history):
            raise
    finally:
        if bar is not None:
            bar.close()
        model.train(was_training)
    return history

