"""Attention masks (lesson 05): bool ``True`` = a query *may attend* a key (as in ``F.scaled_dot_product_attention``),
broadcast to the scores ``(B, h, T_q, T_k)``; an *additive* float mask M enters softmax(QKᵀ/√d_k + M) (0 keeps, −inf
hides). ``nn.MultiheadAttention``'s True = *ignore* (``to_torch_*`` / ``from_torch_*``). No key left: zero weights."""

from __future__ import annotations

import torch

from .validation import check_int, check_rank, check_same_device, check_tensor, reads_values


def _check_bool(mask: torch.Tensor, who: str, fix: str = "use mask.bool()") -> torch.Tensor:
    check_tensor(mask, "mask")
    if mask.dtype != torch.bool:
        raise TypeError(f"{who} takes bool masks (True = attend), got {mask.dtype}: {fix}")
    return mask


def padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """``True`` for real tokens, ``False`` for padding. ids ``(B, T)`` -> mask ``(B, 1, 1, T)``."""
    check_rank(ids, "ids", (2,), "(B, T) token ids")
    return (ids != check_int(pad_id, "pad_id", None))[:, None, None, :]


def causal_mask(t_q: int, t_k: int | None = None, device=None) -> torch.Tensor:
    """Lower-triangular ``(T_q, T_k)`` bool mask: query i may see key j iff ``j <= i + (T_k - T_q)`` (no look-ahead;
    with a KV cache the queries are the *last* ``T_q`` positions of ``T_k``, hence the offset)."""
    t_q = check_int(t_q, "T_q", 0)
    t_k = t_q if t_k is None else check_int(t_k, "T_k", 0)
    if t_k < t_q:
        raise ValueError(f"causal_mask needs 0 <= T_q <= T_k, got T_q={t_q}, T_k={t_k}")
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of boolean masks with broadcasting; ``None`` entries are skipped (None if all are None)."""
    out = None
    for m in (m for m in masks if m is not None):
        _check_bool(m, "combine_masks", "convert additive masks with from_additive_mask first")
        if out is not None:
            try:
                torch.broadcast_shapes(out.shape, m.shape)
            except RuntimeError:
                raise ValueError(f"masks of shapes {tuple(out.shape)} and {tuple(m.shape)} do not broadcast: give each "
                                 "the axes it lacks as size 1, e.g. a (B, T_k) key mask as mask[:, None, :]") from None
        out = m if out is None else out & m
    return out


def check_mask(mask: torch.Tensor, scores_shape: tuple[int, ...], name: str = "mask", device=None) -> torch.Tensor:
    """Check that ``mask`` is bool (True = attend) or additive float, broadcast *to* ``scores_shape``; refuses int, rank
    3 for 4-D scores, a float 0/1 mask, NaN/+inf, another ``device`` (values: ``validation.reads_values``)."""
    check_tensor(mask, name)
    scores_shape = tuple(scores_shape)
    four_d = len(scores_shape) == 4
    scores = f"{'(B, h, T_q, T_k)' if four_d else '(…, T_q, T_k)'} = {scores_shape}"
    if mask.dtype != torch.bool and not torch.is_floating_point(mask):
        raise TypeError(f"{name} has dtype {mask.dtype}; use a bool mask (True = may attend, as from padding_mask / "
                        "causal_mask) or an additive float mask (0 or -inf): convert a 0/1 keep-mask with mask.bool()")
    if four_d and mask.dim() == 3:
        raise ValueError(f"{name} of shape {tuple(mask.shape)} is 3-D but the scores are {scores}: is its first axis "
                         f"the batch or the heads? For a (B, T_q, T_k) mask add the head axis: {name}[:, None]")
    target = scores_shape[len(scores_shape) - mask.dim():]  # more mask dimensions than scores would enlarge them
    if mask.dim() > len(scores_shape) or any(m not in (1, s) for m, s in zip(mask.shape, target)):
        hint = "a padding mask is (B, 1, 1, T_k), a causal mask (T_q, T_k)"
        if four_d and tuple(mask.shape) == (scores_shape[0], scores_shape[3]):
            hint = f"this looks like a (B, T_k) key mask: pass it as key_keep_mask=, or use {name}[:, None, None, :]"
        raise ValueError(f"{name} of shape {tuple(mask.shape)} does not broadcast to the attention scores {scores} "
                         f"(each mask dimension must equal the scores' or be 1): {hint}")
    if four_d and mask.dim() == 2 and tuple(mask.shape) == (scores_shape[0], scores_shape[3]) == scores_shape[2:]:
        # a bool mask shaped both (T_q, T_k) and (B, T_k) (B = T_q) runs only if all True or causal, else is refused
        if mask.dtype == torch.bool and reads_values(mask) and not (
                bool(mask.all()) or torch.equal(mask, causal_mask(*mask.shape, device=mask.device))):
            raise ValueError(f"{name} of shape {tuple(mask.shape)} is ambiguous (B = T_q = {mask.shape[0]}): a (B, T_k)"
                             f" padding mask goes in key_keep_mask=; a (T_q, T_k) mask, pass it as {name}[None, None]")
    if mask.is_floating_point() and mask.numel() and reads_values(mask):
        if bool(torch.isnan(mask).any()) or bool((mask == float("inf")).any()):
            raise ValueError(f"additive {name} holds NaN or +inf, which turns the softmax into NaN: add 0 to keep a "
                             "key and -inf to hide it (or pass a bool mask, True = attend)")
        if bool(((mask == 0) | (mask == 1)).all()) and bool((mask == 1).any()):
            raise ValueError(f"float {name} holds only 0 and 1: it looks like a keep-mask, but a float mask is *added* "
                             f"to the scores (0 = keep, -inf = hide). Pass {name}.bool() (True = attend)")
    if device is not None:
        check_same_device(mask, name, device, "the attention inputs")
    return mask


def check_self_mask(mask: torch.Tensor, t: int) -> torch.Tensor:
    """Self-attention (T_q = T_k = t): refuse a bool mask where a query sees key j while query j is blocked from
    itself: causal and padding masks never do that, an inverted one (PyTorch's True = blocked) does."""
    if mask.dtype != torch.bool or t < 1 or not mask.numel() or not reads_values(mask):
        return mask
    full = (mask if mask.dim() >= 2 else mask[None]).expand(*mask.shape[:-2], t, t)  # (…, t, t), a view
    if bool((full.any(dim=-2) & ~full.diagonal(dim1=-2, dim2=-1)).any()):  # (…, t) keys seen but blind to themselves
        raise ValueError("mask lets queries see keys whose own query is blocked from itself (a False diagonal): it "
                         "looks inverted. Here True = attend (PyTorch's attn_mask: True = blocked): pass ~mask")
    return mask


def check_key_keep_mask(keep: torch.Tensor, batch: int, t_k: int, device: torch.device) -> torch.Tensor:
    """Validate a ``(B, T_k)`` bool keep-mask (True = real key) and return it as ``(B, 1, 1, T_k)``."""
    check_rank(keep, "key_keep_mask", (2,), "(B, T_k), True at keys that may be attended")
    fix = "use key_keep_mask.bool(); from PyTorch's key_padding_mask (True = ignore) use ~key_padding_mask"
    _check_bool(keep, "key_keep_mask", fix)
    if tuple(keep.shape) != (batch, t_k):
        raise ValueError(f"key_keep_mask has shape {tuple(keep.shape)} but the keys are (B, T_k) = ({batch}, {t_k})")
    check_same_device(keep, "key_keep_mask", device, "the attention inputs")
    return keep[:, None, None, :]


def to_additive_mask(mask: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Bool keep-mask -> additive float mask (0 where True, −inf where False)."""
    _check_bool(mask, "to_additive_mask")
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


def from_additive_mask(mask: torch.Tensor) -> torch.Tensor:
    """Additive float mask -> bool keep-mask (True where the added value is finite)."""
    check_tensor(mask, "mask")
    if not torch.is_floating_point(mask):
        raise TypeError(f"from_additive_mask takes a float mask, got {mask.dtype}")
    return torch.isfinite(mask)


def to_torch_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our ``(B, 1, 1, T)`` keep-mask -> ``nn.MultiheadAttention``'s ``key_padding_mask`` ``(B, T)`` (True = ignore)."""
    _check_bool(check_rank(mask, "mask", (2, 4), "(B, 1, 1, T) or (B, T) bool keep-mask"), "to_torch_key_padding_mask")
    if mask.dim() == 4:
        if mask.shape[1:3] != (1, 1):
            raise ValueError(f"a key padding mask is (B, 1, 1, T), got {tuple(mask.shape)}")
        mask = mask[:, 0, 0, :]
    return ~mask


def from_torch_key_padding_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """``nn.MultiheadAttention``'s ``(B, T)`` key_padding_mask (True = ignore) -> our ``(B, 1, 1, T)`` keep-mask."""
    check_rank(key_padding_mask, "key_padding_mask", (2,), "(B, T)")
    return ~key_padding_mask.bool()[:, None, None, :]


def to_torch_attn_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our ``(T_q, T_k)`` keep-mask -> ``nn.MultiheadAttention``'s bool ``attn_mask`` (True = not allowed)."""
    return ~_check_bool(mask, "to_torch_attn_mask")
