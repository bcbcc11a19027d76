"""Safe, atomic, resumable checkpoints (lesson 09; used by ``course_utils.train.fit``).

A checkpoint is one ``torch.save`` file holding only tensors and plain Python containers, numbers and
strings, so it is always read back with ``torch.load(path, weights_only=True)``: unpickling arbitrary
objects can run arbitrary code, and a course must never teach loading checkpoints that way. Contents::

    {"format": "course_utils.checkpoint/1", "step": int, "model": state_dict,
     "optimizer": state_dict | None, "scheduler": state_dict | None, "history": dict | None,
     "rng": {...}, "extra": dict, "torch_version": str}

Writes are atomic: the data goes to a temporary file in the same directory, is flushed and ``fsync``-ed,
then ``os.replace``-d over the old file. An interrupted save (Ctrl+C, a full disk, a crash) therefore
leaves the previous complete checkpoint untouched.
"""

from __future__ import annotations

import os
import pickle
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "get_rng_state", "set_rng_state"]

FORMAT = "course_utils.checkpoint/1"


class CheckpointError(ValueError):
    """A checkpoint file cannot be read or does not fit the model it is loaded into."""


def _unwrap(model: nn.Module) -> nn.Module:
    # torch.compile wraps the model in an OptimizedModule (keys "_orig_mod.…"), DistributedDataParallel in a
    # module whose keys start with "module.": saving/loading the inner module keeps checkpoints interchangeable
    # between compiled, distributed and plain models.
    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


def get_rng_state() -> dict[str, Any]:
    """Every global RNG state as tensors / plain Python values (safe for ``weights_only=True``)."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": [str(name), [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
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
    if "cuda" in state and torch.cuda.is_available():
        saved = [s.cpu() for s in state["cuda"]]
        if len(saved) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(saved)
        else:  # a different machine: restore what matches, the rest stays seeded
            for index, s in enumerate(saved[: torch.cuda.device_count()]):
                torch.cuda.set_rng_state(s, index)
    if "mps" in state and hasattr(torch, "mps") and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["mps"].cpu())


def _check_plain(value: Any, where: str) -> None:
    """Refuse, at save time, anything ``weights_only=True`` would refuse at load time."""
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_plain(item, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_plain(key, where)
            _check_plain(item, f"{where}[{key!r}]")
    else:
        raise TypeError(
            f"{where} holds a {type(value).__name__}, which torch.load(weights_only=True) cannot "
            "read back: store tensors, numbers, strings, lists and dicts only (e.g. .tolist())"
        )


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    step: int = 0,
    history: Any = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Atomically write a checkpoint after ``step`` completed updates; returns the path.

    ``history`` may be a ``course_utils.train.History`` (stored via ``.to_dict()``), a plain dict or ``None``.
    ``extra`` must hold only tensors and plain Python values (it is loaded with ``weights_only=True``).
    The current RNG states are stored too, so a resumed run draws the same dropout masks and batches.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a non-negative int (the number of completed updates), got {step!r}")
    if extra is not None and not isinstance(extra, dict):
        raise TypeError(f"extra must be a dict of plain values, got {type(extra).__name__}")
    _check_plain(extra, "extra")
    history_dict = history.to_dict() if hasattr(history, "to_dict") else history
    _check_plain(history_dict, "history")
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"checkpoint path {path} is a directory: pass a file name like {path / 'last.pt'}")
    payload = {
        "format": FORMAT,
        "step": step,
        "model": _unwrap(model).state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "history": history_dict,
        "rng": get_rng_state(),
        "extra": dict(extra or {}),
        "torch_version": str(torch.__version__),  # TorchVersion is a class weights_only refuses
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    # The temporary file lives in the same directory so os.replace is a rename within one file system,
    # which is atomic: readers see either the old checkpoint or the new one, never a partial file.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the rename makes them "the" checkpoint
        os.replace(tmp_name, path)
    except BaseException:  # including KeyboardInterrupt: never leave a stray temp file, never touch `path`
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(path.parent)
    return path


def _fsync_directory(directory: Path) -> None:
    # Make the rename itself durable (POSIX); not possible/needed on Windows, hence the broad OSError guard.
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _read(path: Path, map_location: Any) -> dict[str, Any]:
    advice = f"delete {path} to start from scratch, or load an earlier checkpoint"
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        if "unsupported global" in str(err).lower():  # a class/function the safe loader will not import
            raise CheckpointError(
                f"{path} contains Python objects that are not tensors or plain values, so "
                "torch.load(weights_only=True) refused it (unpickling them could run arbitrary code); "
                f"course_utils.save_checkpoint never writes such files. {advice[0].upper()}{advice[1:]}"
            ) from err
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated ({err}); {advice}") from err
    except Exception as err:  # torch raises OSError, EOFError, KeyError, RuntimeError... for damaged files
        raise CheckpointError(
            f"checkpoint {path} is corrupt or truncated ({type(err).__name__}: {err}); {advice}"
        ) from err
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT or "model" not in ckpt:
        keys = sorted(ckpt)[:5] if isinstance(ckpt, dict) else type(ckpt).__name__
        raise CheckpointError(
            f"{path} is not a course_utils checkpoint (found {keys}). For a bare state_dict use "
            "model.load_state_dict(torch.load(path, weights_only=True))"
        )
    return ckpt


def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    map_location: Any = None,
    *,
    restore_rng: bool = False,
) -> dict[str, Any]:
    """Load a checkpoint into ``model`` (and ``optimizer`` / ``scheduler`` if given); return the whole dict.

    The file is read with ``torch.load(..., weights_only=True)``. ``map_location=None`` reads tensors onto
    the CPU first (so a GPU checkpoint opens on any machine); ``load_state_dict`` then copies them to
    wherever the model and optimizer live. ``restore_rng=True`` (what ``fit`` does when resuming) also
    restores the global RNG states, so training continues with exactly the random numbers it would have
    drawn. The returned dict has ``"step"``, ``"history"`` (a plain dict), ``"extra"`` and the state dicts.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {path}: check the path, or train first with fit(..., checkpoint_path=...)"
        )
    ckpt = _read(path, "cpu" if map_location is None else map_location)
    try:
        _unwrap(model).load_state_dict(ckpt["model"])
    except RuntimeError as err:
        raise CheckpointError(
            f"checkpoint {path} does not match this model ({str(err).splitlines()[0]}): build the model "
            "with the same hyperparameters as when it was saved, or delete the checkpoint to start over"
        ) from err
    if optimizer is not None and ckpt.get("optimizer") is not None:
        try:
            optimizer.load_state_dict(ckpt["optimizer"])
        except (ValueError, KeyError) as err:
            raise CheckpointError(
                f"the optimizer state in {path} does not fit this optimizer ({err}): use the same "
                "optimizer and parameter groups as the saved run, or delete the checkpoint"
            ) from err
    if scheduler is not None and ckpt.get("scheduler") is not None:
        scheduler.load_state_dict(ckpt["scheduler"])
    if restore_rng:
        set_rng_state(ckpt["rng"])
    return ckpt
