"""Safe, atomic, resumable checkpoints (lesson 09, ``fit``): one ``torch.save`` dict of tensors and plain values (step,
state dicts and types, history, RNG states, extra), read with ``weights_only=True``; files: ``safe_files``."""

from __future__ import annotations

import datetime
import os
import pickle
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .rng import get_rng_state, set_rng_state
from .safe_files import crc_problem, defer_interrupts, fsync_directory, remove_stale_temps, torch_reason, write_atomic
from .validation import check_file_path, check_optimizer

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "get_rng_state", "set_rng_state",
           "defer_interrupts"]

FORMAT = "course_utils.checkpoint/1"


class CheckpointError(ValueError):
    """A checkpoint file cannot be read or does not fit the model it is loaded into."""


def _unwrap(model: nn.Module) -> nn.Module:
    # torch.compile's OptimizedModule adds "_orig_mod." to the keys, DistributedDataParallel "module.": the inner
    # module's keys keep checkpoints interchangeable between compiled, distributed and plain models.
    while hasattr(model, "_orig_mod") or isinstance(model, nn.parallel.DistributedDataParallel):
        model = model._orig_mod if hasattr(model, "_orig_mod") else model.module
    return model


# What torch.load(weights_only=True) reads back, leaf by leaf (exact types: a float or str *subclass* such as
# numpy.float64 or an Enum is pickled by its class and refused on load).
_PLAIN_LEAVES = (type(None), bool, int, float, complex, str, bytes, bytearray, torch.device, torch.dtype)
_HINTS = (((datetime.date, datetime.time, datetime.timedelta),
           "store value.isoformat() (a str) or value.timestamp() (a float) instead"),
          (np.ndarray, "store torch.from_numpy(array) or array.tolist() instead"),
          (os.PathLike, "store str(path) instead"))


def _plain(value: Any, where: str) -> Any:
    """``value`` with numpy scalars as Python numbers; what ``weights_only=True`` refuses raises ``TypeError``."""
    if type(value) in _PLAIN_LEAVES or isinstance(value, torch.Tensor) or type(value) is torch.Size:
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":  # np.float32(0.1), np.int64(3)...
        return value.item()
    if type(value) in (list, tuple, set, frozenset):
        return type(value)(_plain(item, f"{where}[{i}]") for i, item in enumerate(value))
    if type(value) in (dict, OrderedDict, Counter):  # the mappings the safe loader rebuilds
        new = type(value)({_plain(k, where): _plain(v, f"{where}[{k!r}]") for k, v in value.items()})
        if hasattr(value, "_metadata"):  # a state_dict keeps its module versions here
            new._metadata = value._metadata
        return new
    hint = next((h for types, h in _HINTS if isinstance(value, types)),
                "store tensors, numbers, strings, lists and dicts only (e.g. .tolist(), str(...))")
    raise TypeError(f"{where} holds a {type(value).__module__}.{type(value).__qualname__}, which "
                    f"torch.load(weights_only=True) cannot read back, so the checkpoint was not written: {hint}")


def _check_parts(model: Any, optimizer: Any, scheduler: Any) -> None:
    """Refuse a non-Module model, a non-Optimizer optimizer (a model there saved its weights as optimizer state)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}: pass the model itself")
    check_optimizer(optimizer)
    if scheduler is not None and (isinstance(scheduler, (nn.Module, torch.optim.Optimizer))
                                  or not hasattr(scheduler, "state_dict")):
        raise TypeError(f"scheduler must be a learning-rate scheduler (torch.optim.lr_scheduler), got "
                        f"{type(scheduler).__name__}: pass the scheduler, or leave it out")


def save_checkpoint(path: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
                    scheduler: Any = None, step: int = 0, history: Any = None,
                    extra: dict[str, Any] | None = None) -> Path:
    """Atomically write a checkpoint (with RNG states) after ``step`` updates; return the path. ``history``: a
    ``History``, dict or ``None``; what the safe loader cannot read is a ``TypeError``; numpy scalars become numbers."""
    _check_parts(model, optimizer, scheduler)
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a non-negative int (the number of completed updates), got {step!r}")
    if extra is not None and not isinstance(extra, dict):
        raise TypeError(f"extra must be a dict of plain values, got {type(extra).__name__}")
    path = check_file_path(path, "checkpoint path")
    history = history.to_dict() if hasattr(history, "to_dict") else history
    payload = {"format": FORMAT, "step": step, "model": _plain(_unwrap(model).state_dict(), "the model's state_dict")}
    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        payload[name] = None if obj is None else _plain(obj.state_dict(), f"the {name}'s state_dict")
        payload[f"{name}_type"] = None if obj is None else type(obj).__name__
    payload.update(history=_plain(history, "history"), rng=get_rng_state(), extra=_plain(dict(extra or {}), "extra"),
                   torch_version=str(torch.__version__))  # TorchVersion is a class weights_only refuses
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    with defer_interrupts():
        write_atomic(path, payload)
    fsync_directory(path.parent)
    return path


def _read(path: Path, map_location: Any) -> dict[str, Any]:
    advice = f"delete {path} to start from scratch, or load an earlier checkpoint"
    if (problem := crc_problem(path)) is not None:
        raise CheckpointError(f"checkpoint {path} {problem}; {advice}")
    with open(path, "rb") as f:  # a pickle header, but neither torch format (a zip, or pre-1.6: a LONG1 magic)
        head = f.read(3)
    if head[:1] == b"\x80" and head[1:2] in b"\x02\x03\x04\x05" and head[2:3] != b"\x8a":
        raise CheckpointError(f"{path} is not a file written by save_checkpoint or torch.save (it is a plain "
                              "pickle.dump): load it the way it was written, or save the model with "
                              "save_checkpoint(path, model)")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises UnpicklingError, OSError, EOFError, KeyError... for damaged files
        if isinstance(err, pickle.UnpicklingError) and "unsupported global" in str(err).lower():
            raise CheckpointError(f"{path} holds Python objects ({torch_reason(err)}) that torch.load(weights_only="
                                  f"True) refuses, as unpickling them could run any code; {advice}") from None
        kind = "" if isinstance(err, pickle.UnpicklingError) else f"{type(err).__name__}: "
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated ({kind}{torch_reason(err)}); {advice}"
                              ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT or "model" not in ckpt:
        keys = sorted(map(str, ckpt))[:5] if isinstance(ckpt, dict) else type(ckpt).__name__
        raise CheckpointError(f"{path} is not a course_utils checkpoint (found {keys}). For a bare state_dict "
                              "use model.load_state_dict(torch.load(path, weights_only=True))")
    return ckpt


def load_checkpoint(path: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
                    scheduler: Any = None, map_location: Any = None, *, restore_rng: bool = False) -> dict[str, Any]:
    """Load a checkpoint into ``model`` (and ``optimizer`` / ``scheduler``, which must be of the saved run's kinds);
    return the whole dict. ``map_location=None``: tensors onto the CPU; ``restore_rng``: the global RNG states too."""
    path = check_file_path(path, "checkpoint path")
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: check the path, or train with fit(checkpoint_path=...)")
    _check_parts(model, optimizer, scheduler)
    if isinstance(map_location, (str, torch.device)):  # a device this machine lacks: not a damaged file
        kind = torch.device(map_location).type
        if kind == "meta" or (kind == "cuda" and not torch.cuda.is_available()) or (
                kind == "mps" and not torch.backends.mps.is_available()):
            raise ValueError(f"map_location={str(map_location)!r}: {kind} is not available here to hold the weights: "
                             "use map_location=None (the CPU) and move the model with model.to(device) afterwards")
    target = _unwrap(model)
    if any(t.is_meta for t in (*target.parameters(), *target.buffers())):
        raise ValueError("the model is on the meta device (shapes without storage), where loading weights does "
                         "nothing: build it on a real device, or call model.to_empty(device='cpu') first")
    remove_stale_temps(path)
    ckpt = _read(path, "cpu" if map_location is None else map_location)
    # Another kind of optimizer or schedule loads without error in torch, then fails or silently changes the lr
    if optimizer is not None:
        if ckpt.get("optimizer") is None:
            raise CheckpointError(f"{path} was saved without an optimizer state: load only the weights with "
                                  "load_checkpoint(path, model) and start the optimizer from scratch")
        saved_type, groups = ckpt.get("optimizer_type"), ckpt["optimizer"].get("param_groups") or [{}]
        if (saved_type or type(optimizer).__name__) != type(optimizer).__name__ or (  # no type: an older file
                saved_type is None and not set(groups[0]) <= set(optimizer.param_groups[0]) | {"initial_lr"}):
            raise CheckpointError(f"{path} holds the state of a {saved_type or 'different'} optimizer, but a "
                                  f"{type(optimizer).__name__} was passed: resume with the same optimizer (class "
                                  "and parameter groups), or load only the weights with load_checkpoint(path, model)")
    saved, saved_type = ckpt.get("scheduler"), ckpt.get("scheduler_type")
    if scheduler is not None and saved is None:
        raise CheckpointError(f"{path} was saved without a learning-rate schedule, so the one passed would restart "
                              "at step 0 mid-run: resume with the saved run's setting (fit(..., schedule=None))")
    if scheduler is None and saved is not None and optimizer is not None:
        raise CheckpointError(f"{path} was saved with a {saved_type or 'learning-rate'} schedule but none was passed, "
                              "so the learning rate would stay frozen: pass the same schedule")
    if scheduler is not None and saved_type is not None and saved_type != type(scheduler).__name__:
        raise CheckpointError(f"{path} holds the state of a {saved_type}, but a {type(scheduler).__name__} was "
                              "passed: resume with the same kind of schedule as the saved run")
    if not isinstance(ckpt["model"], dict):
        raise CheckpointError(f"{path}: its 'model' entry is a {type(ckpt['model']).__name__}, not a state_dict "
                              "(a dict of tensors): save the model with save_checkpoint(path, model)")
    try:
        target.load_state_dict(ckpt["model"])
    except RuntimeError as err:  # load_state_dict's list of missing/unexpected keys and size mismatches, whole
        lines = [line.strip() for line in str(err).splitlines()[1:] if line.strip()] or [str(err)]
        details = "; ".join(lines[:12]) + (f"; ... and {len(lines) - 12} more" if len(lines) > 12 else "")
        raise CheckpointError(f"checkpoint {path} does not match this model ({details}): build the model with the "
                              "same hyperparameters as when it was saved, or delete the checkpoint") from None
    if optimizer is not None:
        try:
            optimizer.load_state_dict(ckpt["optimizer"])
        except (ValueError, KeyError) as err:
            raise CheckpointError(f"the optimizer state in {path} does not fit this optimizer ({err}): use the same "
                                  "optimizer and parameter groups as the saved run") from None
    if scheduler is not None:
        scheduler.load_state_dict(ckpt["scheduler"])
    if restore_rng:
        if not isinstance(ckpt.get("rng"), dict):
            raise CheckpointError(f"{path} holds no RNG state to restore: load it with restore_rng=False")
        set_rng_state(ckpt["rng"])
    return ckpt
