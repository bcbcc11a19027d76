"""Losses for sequence models, written out (lesson 08).

Everything here is checked against PyTorch in ``tests/test_losses.py``:

* ``log_softmax(x)_i = x_i - m - log sum_j exp(x_j - m)`` with ``m = max_j x_j`` (keeps ``exp`` finite);
* ``cross_entropy`` = mean negative log-likelihood ``-log p(y)``, with PyTorch's ``ignore_index`` and
  ``label_smoothing`` semantics (classes in the **last** dimension, unlike ``F.cross_entropy``);
* ``perplexity = exp(mean NLL)``;
* ``sequence_nll`` = ``-sum_i log P(y_i | y_<i, X)`` per sequence, the score used to compare translations.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from .validation import reads_values

__all__ = ["log_softmax", "cross_entropy", "perplexity", "sequence_nll"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_logits(logits: object) -> None:
    if not isinstance(logits, Tensor):
        raise TypeError(f"logits must be a torch.Tensor, got {type(logits).__name__}: use torch.as_tensor()")
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point tensor, got {logits.dtype}: use logits.float()")


def log_softmax(logits: Tensor, dim: int = -1) -> Tensor:
    """Numerically stable ``log softmax`` (lesson 08).

    ``log_softmax(x)_i = (x_i - m) - log sum_j exp(x_j - m)`` with ``m = max_j x_j``.

    Subtracting ``m`` changes nothing mathematically (it cancels between numerator and denominator) but
    makes the largest exponent ``exp(0) = 1``, so logits of 1e4 do not overflow to ``inf``.
    """
    _check_logits(logits)
    # The shift is a constant for the gradient (d/dm of the result is 0), so detaching it is exact and
    # avoids routing gradient through argmax. A row that is all -inf has max -inf: shift by 0 there rather
    # than computing -inf - (-inf) = nan in the shift itself (the row's result is nan, as with torch).
    m = logits.detach().amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    shifted = logits - m
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def _check_targets(logits: Tensor, targets: Tensor, ignore_index: int) -> None:
    """Validate ``logits (..., V)`` against ``targets (...)``; each message says how to fix the mistake."""
    _check_logits(logits)
    if not isinstance(targets, Tensor):
        raise TypeError(f"targets must be a torch.Tensor, got {type(targets).__name__}: use torch.tensor()")
    if targets.is_floating_point() or targets.is_complex() or targets.dtype == torch.bool:
        raise TypeError(
            f"targets must hold integer class ids (torch.long), got {targets.dtype}: convert with "
            "targets.long(); soft (probability) targets are not supported here"
        )
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"ignore_index must be an int (e.g. -100 or the pad id), got {ignore_index!r}")
    if logits.dim() < 2:
        raise ValueError(
            f"logits must have shape (N, V) or (B, T, V), classes last; got shape {tuple(logits.shape)}"
        )
    vocab = logits.shape[-1]
    if vocab == 0:
        raise ValueError("logits have an empty class dimension (V=0): the model must output >= 1 class")
    if tuple(targets.shape) != tuple(logits.shape[:-1]):
        hint = "targets must have the shape of logits without the last (class) dimension"
        if logits.dim() == 3 and tuple(targets.shape) == (logits.shape[0], logits.shape[2]):
            hint = ("the classes must be the LAST dimension here (B, T, V); for logits laid out (B, V, T) "
                    "as F.cross_entropy wants them, pass logits.transpose(1, 2)")
        elif logits.dim() == 3 and targets.dim() == 2 and abs(targets.shape[1] - logits.shape[1]) == 1:
            hint = "for next-token prediction pair logits[:, :-1] with targets ids[:, 1:] (both length T-1)"
        raise ValueError(
            f"logits shape {tuple(logits.shape)} does not match targets shape {tuple(targets.shape)}: {hint}"
        )
    if not reads_values(targets):  # no host sync per call on a GPU (validation.strict_checks turns it on)
        return
    bad = (targets != ignore_index) & ((targets < 0) | (targets >= vocab))
    if bool(bad.any()):
        value = int(targets[bad][0])
        raise ValueError(
            f"target id {value} is outside the vocabulary of size V={vocab} (valid ids: 0..{vocab - 1}, "
            f"or ignore_index={ignore_index} for positions to skip): check that the tokenizer's vocab size "
            "matches the model's output size and that padding uses ignore_index"
        )


def cross_entropy(
    logits: Tensor,
    targets: Tensor,
    *,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> Tensor:
    """Cross-entropy of integer targets, built on :func:`log_softmax` (lesson 08).

    Shapes: ``logits (N, V)`` with ``targets (N,)``, or ``logits (B, T, V)`` with ``targets (B, T)``
    (any leading dimensions work: they are flattened). The classes are the **last** dimension, the
    natural output of a language-model head (``F.cross_entropy`` wants ``(B, V, T)`` instead).

    Per position ``i`` with ``p = softmax(logits_i)`` and smoothing ``eps`` (PyTorch's definition)::

        loss_i = (1 - eps) * (-log p[y_i]) + eps * mean_c(-log p[c])

    i.e. the target distribution puts ``1 - eps + eps/V`` on ``y_i`` and ``eps/V`` on every other class.
    Positions whose target equals ``ignore_index`` contribute 0 and are not counted.

    ``reduction``: ``"mean"`` divides by the number of non-ignored positions, ``"sum"`` adds them up,
    ``"none"`` returns per-position losses shaped like ``targets`` (0 at ignored positions).

    Note: when *every* target is ignored, ``F.cross_entropy(..., reduction="mean")`` returns ``nan``
    (0 / 0). We return ``0.0`` instead (with a zero gradient), so a batch made only of padding cannot
    poison training with NaN. Half-precision logits (fp16/bf16, e.g. under autocast) are upcast to
    float32 first, as autocast does for PyTorch's own cross-entropy: the log-sum-exp needs the digits.
    """
    _check_targets(logits, targets, ignore_index)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction={reduction!r} is not supported: use one of {_REDUCTIONS}")
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)):
        raise TypeError(f"label_smoothing must be a float in [0, 1], got {type(label_smoothing).__name__}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing={label_smoothing} must be in [0, 1] (the paper uses 0.1)")

    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    vocab = logits.shape[-1]
    flat_logits = logits.reshape(-1, vocab)  # (N, V)
    flat_targets = targets.reshape(-1).long()  # (N,)
    keep = flat_targets != ignore_index  # (N,) bool
    # Ignored targets may be any integer (e.g. -100): use a valid id for the gather, zero the result later.
    safe_targets = torch.where(keep, flat_targets, torch.zeros_like(flat_targets))

    logp = log_softmax(flat_logits, dim=-1)  # (N, V)
    nll = -logp.gather(-1, safe_targets.unsqueeze(-1)).squeeze(-1)  # (N,)
    if label_smoothing > 0.0:
        smooth = -logp.mean(dim=-1)  # (N,)  mean over classes of -log p
        per_position = (1.0 - label_smoothing) * nll + label_smoothing * smooth
    else:
        per_position = nll
    # torch.where, not a multiplication by the mask: an inf at an ignored position must not become 0*inf.
    per_position = torch.where(keep, per_position, torch.zeros_like(per_position))  # (N,)

    if reduction == "none":
        return per_position.reshape(targets.shape)
    total = per_position.sum()
    if reduction == "sum":
        return total
    count = keep.sum().clamp(min=1)  # all ignored: 0 / 1 = 0 instead of nan (see the docstring)
    return total / count


def perplexity(mean_nll: float | Tensor) -> float | Tensor:
    """Perplexity ``= exp(mean negative log-likelihood per token)`` (lesson 08).

    A model that is uniform over ``V`` tokens has NLL ``log V`` and perplexity ``V``: it is "as unsure as a
    uniform choice among ``V`` tokens". Accepts a number (returns a float, ``inf`` on overflow) or a tensor.
    """
    hint = "it looks like a log-probability (<= 0) was passed: negate it first"
    nan = "mean_nll is nan: the loss diverged, or every target was ignored upstream"
    if isinstance(mean_nll, Tensor):
        if not (mean_nll.is_floating_point() or mean_nll.dtype in (torch.int32, torch.int64)):
            raise TypeError(f"mean_nll must be a float tensor, got {mean_nll.dtype}: use mean_nll.float()")
        value = mean_nll.detach()
        if bool(torch.isnan(value).any()):
            raise ValueError(nan)
        if bool((value < 0).any()):
            raise ValueError(f"mean_nll must be >= 0 (a negative log-likelihood); {hint}")
        return torch.exp(mean_nll)
    # numbers.Real covers int, float and numpy's scalars (np.float32 is not a float subclass, np.float64 is)
    if isinstance(mean_nll, bool) or not isinstance(mean_nll, numbers.Real):
        raise TypeError(f"mean_nll must be a float or a tensor, got {type(mean_nll).__name__}")
    mean_nll = float(mean_nll)
    if math.isnan(mean_nll):
        raise ValueError(nan)
    if mean_nll < 0:
        raise ValueError(f"mean_nll={mean_nll} must be >= 0 (a negative log-likelihood); {hint}")
    try:
        return math.exp(mean_nll)
    except OverflowError:
        return math.inf


def sequence_nll(logits: Tensor, targets: Tensor, ignore_index: int = -100) -> Tensor:
    """Negative log-likelihood of each whole sequence, ``-sum_i log P(y_i | y_<i, X)`` (lesson 08).

    ``logits (B, T, V)`` must already be aligned with ``targets (B, T)``: ``logits[:, i]`` predicts
    ``targets[:, i]`` (for a decoder-only model: ``logits[:, :-1]`` with ``ids[:, 1:]``). Returns ``(B,)``.
    Positions equal to ``ignore_index`` (padding) are skipped, so sequences of different lengths can share
    a batch. ``exp(-sequence_nll)`` is the probability the model gives the whole sequence (chain rule).
    """
    _check_logits(logits)
    if logits.dim() != 3:
        raise ValueError(
            f"sequence_nll expects logits of shape (B, T, V), got {tuple(logits.shape)}: add a batch "
            "dimension with logits.unsqueeze(0)"
        )
    per_token = cross_entropy(logits, targets, ignore_index=ignore_index, reduction="none")  # (B, T)
    return per_token.sum(dim=-1)  # (B,)
