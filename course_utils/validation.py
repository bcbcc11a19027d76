"""Input checks shared by every module: a wrong value or shape raises ``ValueError``, a wrong type or dtype
``TypeError``, saying how to fix it. Checks of a tensor's *values* (a host sync on a GPU) run on CPU always, on
accelerators only under ``strict_checks(True)`` (``COURSE_STRICT_CHECKS=1``), never when compiling or on ``meta``."""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path

import torch

_STRICT = os.environ.get("COURSE_STRICT_CHECKS", "") == "1"


def strict_checks(enabled: bool = True) -> bool:
    """Turn value checks on accelerator tensors on/off (each costs a host sync); returns the previous setting."""
    global _STRICT
    previous, _STRICT = _STRICT, bool(enabled)
    return previous


def _compiling() -> bool:
    return bool(getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)())


def reads_values(x: torch.Tensor) -> bool:
    """May a check read ``x``'s values here? (CPU: yes; CUDA/MPS: only in strict mode; meta / compiling: no.)"""
    return x.device.type != "meta" and not _compiling() and (x.device.type == "cpu" or _STRICT)


def check_optimizer(optimizer) -> None:
    """Refuse what is not a torch.optim.Optimizer (a model there would be saved as optimizer state); None passes."""
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}: pass the "
                        "optimizer (e.g. torch.optim.AdamW(model.parameters())), or leave it out")


def check_file_path(path, name: str = "checkpoint_path"):
    """``path`` as a ``Path``; refused: another type, a directory (a file inside was meant), a path through a file."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise TypeError(f"{name} must be a str or pathlib.Path, got {type(path).__name__} {path!r:.40}: pass a file "
                        "name such as 'runs/last.pt'")
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{name} {path} is a directory: pass a file name like {path / 'last.pt'}")
    if blocker := next((up for up in path.parents if up.exists() and not up.is_dir()), None):
        raise ValueError(f"{blocker} is a file, not a folder: choose another {name} ({path} cannot be made)")
    return path


def check_tensor(x, name: str) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a tensor."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}: wrap it with torch.as_tensor(...)")
    return x


def check_rank(x: torch.Tensor, name: str, ranks: tuple[int, ...], layout: str) -> torch.Tensor:
    """Raise ``ValueError`` unless ``x.dim()`` is one of ``ranks``; ``layout`` describes the expected shape."""
    check_tensor(x, name)
    if x.dim() not in ranks:
        hint = " (add a batch dimension with x.unsqueeze(0))" if x.dim() + 1 in ranks else ""
        raise ValueError(f"{name} must have shape {layout}, got a {x.dim()}-D tensor of shape {tuple(x.shape)}{hint}")
    return x


def check_float(x: torch.Tensor, name: str) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a floating-point tensor (token ids go through an embedding first)."""
    check_tensor(x, name)
    if not torch.is_floating_point(x):
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}: embed token ids first, else x.float()")
    return x


def check_vectors(x, name: str, size: int, device: torch.device | None = None, dtype: torch.dtype | None = None,
                  owner: str = "the module", layout: str | None = None) -> torch.Tensor:
    """The input check of a layer over ``size``-vectors: a float tensor ``(…, size)`` (of rank 3 when a ``layout``
    such as ``"(B, T, d_model)"`` is given), on ``device`` and in ``dtype`` when given."""
    if layout is not None:
        check_rank(x, name, (3,), layout)
    if check_float(x, name).shape[-1] != size:
        raise ValueError(f"{name} has last dimension {x.shape[-1]} but {owner} was built with d_model={size}: project "
                         f"the input to {size} features or build it with d_model={x.shape[-1]}")
    if device is not None:
        check_same_device(x, name, device, owner)
    return x if dtype is None else check_dtype(x, name, dtype, owner)


def check_like(x: torch.Tensor, name: str, ref: torch.Tensor, ref_name: str) -> torch.Tensor:
    """Raise unless ``x`` has ``ref``'s device (``ValueError``) and dtype (``TypeError``), e.g. k and v beside q."""
    check_same_device(x, name, ref.device, ref_name)
    if x.dtype != ref.dtype:
        raise TypeError(f"{ref_name} is {ref.dtype} but {name} is {x.dtype}: convert both to one dtype")
    return x


def check_dtype(x: torch.Tensor, name: str, expected: torch.dtype, owner: str = "the module") -> torch.Tensor:
    """Raise ``TypeError`` when ``x`` has another float dtype than ``expected`` (autocast regions excepted)."""
    if x.dtype == expected:
        return x
    try:
        autocasting = torch.is_autocast_enabled(x.device.type)
    except (TypeError, RuntimeError):  # an unknown device type (meta) has no autocast
        autocasting = False
    if not autocasting:
        raise TypeError(f"{name} has dtype {x.dtype} but {owner} computes in {expected}: convert with {name}.to("
                        f"{expected}) (or the module with .to({x.dtype})), or use torch.autocast for mixed precision")
    return x


def check_token_ids(ids: torch.Tensor, vocab_size: int, name: str = "token ids") -> torch.Tensor:
    """Raise unless ``ids`` is an integer tensor with values in ``[0, vocab_size)`` (read as ``reads_values`` says)."""
    if check_tensor(ids, name).dtype == torch.bool or torch.is_floating_point(ids) or torch.is_complex(ids):
        raise TypeError(f"{name} must be an integer tensor (torch.long), got {ids.dtype}: convert with .long()")
    if ids.dtype not in (torch.int64, torch.int32):  # what nn.Embedding indexes with (uint8 would read as a mask)
        raise TypeError(f"{name} must be int64 (or int32), got {ids.dtype}: convert them with ids.long()")
    if not ids.numel() or not reads_values(ids):
        return ids
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0:
        raise ValueError(f"{name} contain {lo}, a negative id: ids index the vocabulary [0, {vocab_size}); negative "
                         "numbers are often a padding or ignore value (-100): replace them by the pad id first")
    if hi >= vocab_size:
        raise ValueError(f"{name} contain {hi}, outside the vocabulary [0, {vocab_size}): encode with the tokenizer "
                         f"the model was built for, or build the model with vocab_size > {hi}")
    return ids


def is_real_number(value) -> bool:
    """True for an int or float (NumPy scalars included), False for a bool, a string, a tensor..."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(value, name: str, minimum: int | None = 1) -> int:
    """Raise ``TypeError`` unless ``value`` is an int (not bool/float/str), ``ValueError`` if below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}: e.g. {name}=int(...)")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_number(value, name: str, minimum: float | None = None) -> float:
    """Raise ``TypeError`` unless ``value`` is a real number; ``ValueError`` if NaN, inf or below ``minimum``."""
    if not is_real_number(value):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_bool(value, name: str) -> bool:
    """Raise ``TypeError`` unless ``value`` is a bool (a string "False" would be truthy)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return value


def check_divisible(d_model: int, n_heads: int) -> int:
    """Return ``d_k = d_model // n_heads``; raise if the split is impossible."""
    for name, v in (("d_model", d_model), ("n_heads", n_heads)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name} must be a positive int, got {type(v).__name__} {v!r}")
    if d_model <= 0 or n_heads <= 0:
        raise ValueError(f"d_model and n_heads must be positive integers, got d_model={d_model!r}, n_heads={n_heads!r}")
    if d_model % n_heads:
        lo = d_model - d_model % n_heads
        near = f"{lo} or {lo + n_heads}" if lo > 0 else f"{n_heads}"
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads} (each head gets d_k = d_model / "
                         f"n_heads features): choose d_model as a multiple of n_heads (e.g. {near}) or another n_heads")
    return d_model // n_heads


def check_positive(value, name: str):
    """Raise ``TypeError`` unless ``value`` is a number, ``ValueError`` unless it is positive."""
    if not is_real_number(value) or math.isnan(value):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return value


def check_probability(p: float, name: str = "dropout") -> float:
    """Raise unless ``0 <= p < 1``."""
    if not is_real_number(p):
        raise TypeError(f"{name} must be a float in [0, 1), got {type(p).__name__} {p!r}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {p!r}: it is a probability (0.1 is a common choice)")
    return float(p)


def check_same_device(x: torch.Tensor, name: str, expected: torch.device, owner: str = "the module") -> torch.Tensor:
    """Raise ``ValueError`` when ``x`` lives on another device than ``expected`` (e.g. cuda model, cpu input)."""
    if x.device != expected:
        raise ValueError(f"{name} is on {x.device} but {owner} is on {expected}: move it with {name}.to("
                         f"{str(expected)!r}) (or the model with model.to(device)): one computation, one device")
    return x
