"""The guard rails of ``MultiHeadAttention`` (lesson 04): refusing PyTorch habits (a 4th positional mask,
``key_padding_mask=``), a result that will not unpack as ``(out, weights)``, input checks, the merge of the masks."""

from __future__ import annotations

import torch

from .masks import check_key_keep_mask, check_mask, check_self_mask
from .validation import _compiling, check_bool, check_like, check_vectors

_TORCH_KWARGS = {
    "key_padding_mask": "key_keep_mask=~key_padding_mask (ours is True = attend, torch's True = ignore)",
    "attn_mask": "mask= (ours is True = attend; torch's bool attn_mask is True = not allowed: pass ~attn_mask)",
    "average_attn_weights": "nothing: mha.last_weights keeps every head, (B, h, T_q, T_k)",
}


class AttentionOutput(torch.Tensor):
    """The ``(B, T_q, d_model)`` result of ``MultiHeadAttention``: a plain tensor in every operation (results are
    ``torch.Tensor``), except that unpacking it like torch's ``(out, weights)`` pair raises a TypeError."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __iter__(self):
        raise TypeError("MultiHeadAttention returns one tensor (B, T_q, d_model), not nn.MultiheadAttention's (output, "
                        "weights) pair: write `out = mha(...)`, then read mha.last_weights (after need_weights=True)")

    def __repr__(self, **kwargs) -> str:
        return self.as_subclass(torch.Tensor).__repr__(**kwargs)


def as_output(out: torch.Tensor) -> torch.Tensor:
    """``out`` as an :class:`AttentionOutput` (a plain tensor while ``torch.compile`` traces)."""
    return out if _compiling() else out.as_subclass(AttentionOutput)


def refuse_torch_style(positional: tuple, torch_style: dict) -> None:
    """Say what to write instead of ``nn.MultiheadAttention``'s positional mask or keywords."""
    if positional:
        raise TypeError("MultiHeadAttention takes query, key, value positionally and the rest by keyword (mask=, "
                        "key_keep_mask=, True = attend): a 4th positional argument is nn.MultiheadAttention's "
                        "key_padding_mask, whose True means the opposite (ignore)")
    for name in torch_style:
        fix = _TORCH_KWARGS.get(name)
        raise TypeError(f"MultiHeadAttention got {name}=, " + (f"PyTorch's keyword: pass {fix}" if fix else
                        "which it does not take (keywords: mask, key_keep_mask, is_causal, cache, need_weights)"))


def checked_mask(mha, query, key, value, mask, key_keep_mask, cache, need_weights) -> torch.Tensor | None:
    """Check one call of ``mha`` and return its one mask (True = attend): ``mask`` AND ``key_keep_mask``."""
    if key is None and value is not None:
        raise ValueError("value without key: pass key=value=memory (cross-attention) or neither (self-attention)")
    w = mha.out_proj.weight
    check_vectors(query, "query", mha.d_model, w.device, w.dtype, "MultiHeadAttention", "(B, T, d_model)")
    for name, t in (("key", key), ("value", value)):
        if t is None:
            continue
        check_like(check_vectors(t, name, mha.d_model, layout="(B, T_k, d_model)"), name, query, "query")
        if t.shape[0] != query.shape[0]:
            raise ValueError(f"query and {name} have different batch sizes ({query.shape[0]} vs {t.shape[0]}): "
                             "cross-attention pairs each target sequence with its own source sequence")
    if value is not None and value.shape[1] != key.shape[1]:
        raise ValueError(f"key and value must have the same length T_k (one value per key), got {tuple(key.shape)} "
                         f"and {tuple(value.shape)}")
    check_bool(need_weights, "need_weights")
    t_k = (query if key is None else key).shape[1]
    if key_keep_mask is not None:
        keep = check_key_keep_mask(key_keep_mask, query.shape[0], t_k, query.device)
        if cache is not None and key is None:
            raise ValueError("key_keep_mask with a self-attention KVCache: pass a full mask= for the cached keys")
        if mask is not None:
            check_mask(mask, (query.shape[0], mha.n_heads, query.shape[1], t_k), device=query.device)
            keep = mask & keep if mask.dtype == torch.bool else torch.where(keep, mask, float("-inf"))
        mask = keep
    if mask is not None and key is None and cache is None:  # self-attention: the diagonal is each token itself
        check_self_mask(check_mask(mask, (query.shape[0], mha.n_heads, t_k, t_k), device=query.device), t_k)
    return mask
