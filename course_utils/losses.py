"""Losses for sequence models, written out and checked against PyTorch (lesson 08)."""

from __future__ import annotations

import torch
from torch import Tensor

from .validation import check_float, check_int, check_number, check_rank, check_tensor, is_real_number, reads_values

__all__ = ["log_softmax", "cross_entropy", "perplexity", "sequence_nll"]


def log_softmax(logits: Tensor, dim: int = -1) -> Tensor:
    """``log_softmax(x)_i = (x_i - m) - log sum_j exp(x_j - m)``, ``m = max_j x_j`` (lesson 08): ``m`` cancels but
    makes the largest exponent ``exp(0) = 1``, so logits of 1e4 do not overflow."""
    check_float(logits, "logits")
    # d(result)/dm = 0, so detaching the shift is exact (no gradient through argmax). A row all -inf has max -inf:
    # shift by 0 there, not -inf - (-inf) = nan in the shift itself (the row's result is nan, as with torch).
    m = logits.detach().amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    shifted = logits - m
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100, label_smoothing: float = 0.0,
                  reduction: str = "mean") -> Tensor:
    """``loss_i = (1 - eps) * (-log p[y_i]) + eps * mean_c(-log p[c])``, ``p = softmax(logits_i)``: ``logits (N, V)`` /
    ``targets (N,)`` or ``(B, T, V)`` / ``(B, T)``, classes **last** (unlike ``F.cross_entropy``). ``ignore_index``: 0,
    uncounted; ``reduction`` ``"mean"`` (all ignored: ``0.0``), ``"sum"``, ``"none"``; fp16/bf16: fp32."""
    check_float(logits, "logits")
    if check_tensor(targets, "targets").is_floating_point() or targets.is_complex() or targets.dtype == torch.bool:
        raise TypeError(f"targets must hold integer class ids (torch.long), got {targets.dtype}: use targets.long() "
                        "(soft, probability targets are not supported here)")
    check_int(ignore_index, "ignore_index", None)
    if targets.device != logits.device:
        raise ValueError(f"targets are on {targets.device} but logits on {logits.device}: move them with "
                         "targets.to(logits.device) (one computation, one device)")
    if logits.dim() < 2:
        raise ValueError(f"logits must have shape (N, V) or (B, T, V), classes last; got {tuple(logits.shape)}")
    vocab = logits.shape[-1]
    if vocab == 0:
        raise ValueError("logits have an empty class dimension (V=0): the model must output >= 1 class")
    if targets.shape != logits.shape[:-1]:
        hint = "targets must have the shape of logits without the last (class) dimension"
        if logits.dim() == 3 and tuple(targets.shape) == (logits.shape[0], logits.shape[2]):
            hint = ("the classes must be the LAST dimension here (B, T, V); for logits laid out (B, V, T) "
                    "as F.cross_entropy wants them, pass logits.transpose(1, 2)")
        elif logits.dim() == 3 and targets.dim() == 2 and abs(targets.shape[1] - logits.shape[1]) == 1:
            hint = "for next-token prediction pair logits[:, :-1] with targets ids[:, 1:] (both length T-1)"
        raise ValueError(f"logits shape {tuple(logits.shape)} does not match targets {tuple(targets.shape)}: {hint}")
    if reads_values(targets):  # no host sync per call on a GPU (validation.strict_checks turns it on)
        bad = (targets != ignore_index) & ((targets < 0) | (targets >= vocab))
        if bool(bad.any()):
            raise ValueError(f"target id {int(targets[bad][0])} is outside the vocabulary of size V={vocab} (ids "
                             f"0..{vocab - 1}, or ignore_index={ignore_index} to skip a position): make the "
                             "tokenizer's vocab size match the model's output size, and pad with ignore_index")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction={reduction!r} is not supported: use 'mean', 'sum' or 'none'")
    if not 0.0 <= check_number(label_smoothing, "label_smoothing") <= 1.0:
        raise ValueError(f"label_smoothing={label_smoothing} must be in [0, 1] (the paper uses 0.1)")

    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    flat_targets = targets.reshape(-1).long()  # (N,)
    keep = flat_targets != ignore_index  # (N,) bool
    logp = log_softmax(logits.reshape(-1, logits.shape[-1]), dim=-1)  # (N, V)
    # Ignored targets may be any integer (e.g. -100): gather at id 0 there, zero the result below.
    nll = -logp.gather(-1, flat_targets.masked_fill(~keep, 0)[:, None]).squeeze(-1)  # (N,)
    if label_smoothing > 0.0:  # skipped at 0: a -inf logit would make 0 * inf = nan
        nll = (1.0 - label_smoothing) * nll + label_smoothing * -logp.mean(dim=-1)  # mean over classes of -log p
    # torch.where, not a multiplication by the mask: an inf at an ignored position must not become 0*inf.
    per_position = torch.where(keep, nll, torch.zeros_like(nll))  # (N,)
    if reduction == "none":
        return per_position.reshape(targets.shape)
    total = per_position.sum()
    return total if reduction == "sum" else total / keep.sum().clamp(min=1)  # all ignored: 0 / 1 = 0, not nan


def perplexity(mean_nll: float | Tensor) -> float | Tensor:
    """Perplexity ``= exp(mean negative log-likelihood per token)`` (lesson 08): a model uniform over ``V`` tokens
    has NLL ``log V`` and perplexity ``V``. A number gives a float (``inf`` on overflow), a tensor a tensor."""
    if isinstance(mean_nll, Tensor):
        if not (mean_nll.is_floating_point() or mean_nll.dtype in (torch.int32, torch.int64)):
            raise TypeError(f"mean_nll must be a float tensor, got {mean_nll.dtype}: use mean_nll.float()")
        value = mean_nll.detach()
    elif not is_real_number(mean_nll):  # numpy scalars included (np.float32 is not a float subclass)
        raise TypeError(f"mean_nll must be a float or a tensor, got {type(mean_nll).__name__}")
    else:
        value = torch.tensor(float(mean_nll), dtype=torch.float64)
    if bool(torch.isnan(value).any()):
        raise ValueError("mean_nll is nan: the loss diverged, or every target was ignored upstream")
    if bool((value < 0).any()):
        raise ValueError("mean_nll must be >= 0 (a negative log-likelihood): negate a log-probability (<= 0) first")
    return torch.exp(mean_nll) if isinstance(mean_nll, Tensor) else float(torch.exp(value))


def sequence_nll(logits: Tensor, targets: Tensor, ignore_index: int = -100) -> Tensor:
    """``-sum_i log P(y_i | y_<i, X)`` per sequence, ``(B,)`` (lesson 08): ``logits[:, i]`` of ``(B, T, V)`` predicts
    ``targets[:, i]``; ``ignore_index`` (padding) is skipped, so lengths may differ; ``exp(-nll)``: its probability."""
    check_rank(check_float(logits, "logits"), "logits", (3,), "(B, T, V)")
    per_token = cross_entropy(logits, targets, ignore_index=ignore_index, reduction="none")  # (B, T)
    return per_token.sum(dim=-1)  # (B,)
