"""Input checks shared by every module, so that a student's mistake ends in one clear sentence.

Each check raises ``ValueError`` (wrong value or shape) or ``TypeError`` (wrong type or dtype) with a message that
says what was received, what was expected and how to fix it, instead of a stack trace from deep inside torch.
"""

from __future__ import annotations

import torch


def check_tensor(x, name: str) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a tensor."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(x).__name__}: wrap it with torch.as_tensor(...)"
        )
    return x


def check_rank(x: torch.Tensor, name: str, ranks: tuple[int, ...], layout: str) -> torch.Tensor:
    """Raise ``ValueError`` unless ``x.dim()`` is one of ``ranks``; ``layout`` describes the expected shape."""
    check_tensor(x, name)
    if x.dim() not in ranks:
        hint = " (add a batch dimension with x.unsqueeze(0))" if x.dim() + 1 in ranks else ""
        raise ValueError(
            f"{name} must have shape {layout}, got a {x.dim()}-D tensor of shape {tuple(x.shape)}{hint}"
        )
    return x


def check_last_dim(x: torch.Tensor, name: str, size: int, what: str = "d_model") -> torch.Tensor:
    """Raise ``ValueError`` unless the last dimension equals ``size``."""
    if x.shape[-1] != size:
        raise ValueError(
            f"{name} has last dimension {x.shape[-1]} but the module was built with {what}={size}: "
            f"project the input to {size} features or build the module with {what}={x.shape[-1]}"
        )
    return x


def check_float(x: torch.Tensor, name: str) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a floating-point tensor (token ids go through an embedding first)."""
    if not torch.is_floating_point(x):
        raise TypeError(
            f"{name} must be a floating-point tensor, got dtype {x.dtype}: if these are token ids, "
            "pass them through an embedding first; otherwise convert with x.float()"
        )
    return x


def _compiling() -> bool:
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and getattr(compiler, "is_compiling", lambda: False)())


def check_token_ids(ids: torch.Tensor, vocab_size: int, name: str = "token ids") -> torch.Tensor:
    """Raise unless ``ids`` is an integer tensor with every value in ``[0, vocab_size)``.

    The range check reads the tensor's values (a device sync on a GPU). Under ``torch.compile`` it is skipped:
    a data-dependent branch would break the graph, and the eager run before compiling has already checked.
    """
    check_tensor(ids, name)
    if ids.dtype in (torch.bool,) or torch.is_floating_point(ids) or torch.is_complex(ids):
        raise TypeError(f"{name} must be an integer tensor (torch.long), got {ids.dtype}: use ids.long()")
    if _compiling():
        return ids
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        bad = int(ids.max()) if int(ids.max()) >= vocab_size else int(ids.min())
        raise ValueError(
            f"{name} contain {bad}, outside the vocabulary [0, {vocab_size}): "
            f"encode with the tokenizer the model was built for, or build the model with vocab_size > {bad}"
        )
    return ids


def check_divisible(d_model: int, n_heads: int) -> int:
    """Return ``d_k = d_model // n_heads``; raise if the split is impossible."""
    if not isinstance(d_model, int) or not isinstance(n_heads, int) or d_model <= 0 or n_heads <= 0:
        raise ValueError(
            f"d_model and n_heads must be positive integers, got d_model={d_model!r}, n_heads={n_heads!r}"
        )
    if d_model % n_heads:
        lo, hi = (d_model // n_heads) * n_heads, (d_model // n_heads + 1) * n_heads
        lo_txt = f"{lo} or " if lo > 0 else ""
        raise ValueError(
            f"d_model={d_model} is not divisible by n_heads={n_heads}: each head gets d_k = d_model / n_heads "
            f"features, so choose d_model as a multiple of n_heads (e.g. {lo_txt}{hi}) or another n_heads"
        )
    return d_model // n_heads


def check_positive(value, name: str, allow_zero: bool = False):
    """Raise ``ValueError`` unless ``value`` is a positive (or non-negative) number."""
    ok = value >= 0 if allow_zero else value > 0
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return value


def check_probability(p: float, name: str = "dropout") -> float:
    """Raise ``ValueError`` unless ``0 <= p < 1``."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {p!r}: it is a probability (0.1 is a common choice)")
    return p


def check_mask(mask: torch.Tensor, scores_shape: tuple[int, ...], name: str = "mask") -> torch.Tensor:
    """Check that ``mask`` is bool (True = attend) or float (additive) and broadcasts to ``scores_shape``.

    ``scores_shape`` is ``(B, h, T_q, T_k)``. Integer masks are rejected because 0/1 is ambiguous between
    "keep" and "block" conventions.
    """
    check_tensor(mask, name)
    if mask.dtype != torch.bool and not torch.is_floating_point(mask):
        raise TypeError(
            f"{name} has dtype {mask.dtype}; use a bool mask (True = may attend, as in "
            "course_utils.masks.padding_mask / causal_mask) or an additive float mask (0 or -inf): "
            "convert a 0/1 keep-mask with mask.bool()"
        )
    if mask.dim() > len(scores_shape):
        raise ValueError(
            f"{name} has {mask.dim()} dimensions but attention scores have {len(scores_shape)} "
            f"(B, h, T_q, T_k) = {tuple(scores_shape)}"
        )
    try:
        torch.broadcast_shapes(tuple(mask.shape), tuple(scores_shape))
    except RuntimeError:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} cannot broadcast to the attention scores (B, h, T_q, T_k) = "
            f"{tuple(scores_shape)}: a padding mask is (B, 1, 1, T_k), a causal mask (T_q, T_k)"
        ) from None
    return mask


def check_same_device(x: torch.Tensor, name: str, expected: torch.device, owner: str = "the module") -> torch.Tensor:
    """Raise ``ValueError`` when ``x`` lives on another device than ``expected`` (e.g. cuda model, cpu input)."""
    if x.device != expected:
        raise ValueError(
            f"{name} is on {x.device} but {owner} is on {expected}: move it with {name}.to({str(expected)!r}) "
            "(or move the model with model.to(device)); every tensor of one computation must be on one device"
        )
    return x
