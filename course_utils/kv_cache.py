"""The key/value cache of incremental decoding (lessons 10, 11, 14): self-attention **appends** the new token's K and V,
cross-attention projects the encoder memory once; ``offset`` counts positions. One cache, one model and batch."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class KVCache:
    """Per-module keys and values of the positions decoded so far; see the module docstring."""

    def __init__(self):
        self.reset()

    def reset(self) -> KVCache:
        """Forget everything (entries, offset, batch size, owning model): ready for a new batch or a new model."""
        self._self: dict[nn.Module, tuple[torch.Tensor, torch.Tensor]] = {}
        self._cross: dict[nn.Module, tuple[torch.Tensor, int, torch.Tensor, torch.Tensor]] = {}
        self.offset = 0
        self.batch_size: int | None = None
        self.owner: nn.Module | None = None
        return self

    def bind(self, model: nn.Module, n_new: int = 1, extend: bool = False) -> None:
        """Tie the cache to ``model`` (called with the ``n_new`` tokens it is fed); several tokens into a non-empty
        cache are a new prompt, refused unless ``extend=True`` says they continue the cached sequence."""
        if self.owner is not None and self.owner is not model:
            raise ValueError(f"this KVCache holds the keys and values of another {type(self.owner).__name__}: create "
                             "one KVCache per model and per batch (or call cache.reset() before reusing it)")
        if not isinstance(extend, bool):
            raise TypeError(f"extend must be True or False, got {type(extend).__name__} {extend!r}")
        if self.offset and n_new > 1 and not extend:
            raise ValueError(f"this KVCache already holds {self.offset} positions of a sequence, and {n_new} tokens "
                             "came at once, as a new prompt would: use a fresh KVCache() (or cache.reset()) for each "
                             "prompt; to append them to the cached sequence, pass extend=True")
        self.owner = model

    def _check_batch(self, batch: int) -> None:
        if self.batch_size not in (None, batch):
            raise ValueError(f"this KVCache holds {self.batch_size} sequences but the call has a batch of {batch}: "
                             "cache.reset() (or a new KVCache) starts a new batch; cache.reorder(index) selects rows")
        self.batch_size = batch

    def get(self, module: nn.Module) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(k, v)`` stored for ``module``, each ``(B, h, T, d_k)``, or None."""
        return self._self.get(module) or (self._cross[module][2:] if module in self._cross else None)

    def append(self, module: nn.Module, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Self-attention: store ``k, v (B, h, T_new, d_k)`` after the past ones; returns all of them."""
        self._check_batch(k.shape[0])
        past = self._self.get(module)
        seen = 0 if past is None else past[0].shape[2]
        if seen != self.offset:
            raise ValueError(f"KVCache out of step: this attention layer has {seen} cached positions but the cache is "
                             f"at position {self.offset}. Feed each step through the whole model (it calls "
                             "cache.advance), use one KVCache per model and cache.reset() before a new batch")
        if past is not None:
            if (past[0].dtype, past[0].device) != (k.dtype, k.device):
                raise ValueError(f"the cached keys are {past[0].dtype} on {past[0].device}, the new ones {k.dtype} on "
                                 f"{k.device}: call cache.reset() after moving or converting the model")
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)  # (B, h, T_past + T_new, d_k)
        self._self[module] = (k, v)
        return k, v

    def cross(self, module: nn.Module, memory: torch.Tensor,
              project: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention: ``project()`` the memory's K, V on first use, then reuse them for the same memory: the
        same storage, shape (batch aside, so beam search may expand it) and version (an in-place edit bumps it)."""
        entry = self._cross.get(module)
        if entry is None:
            k, v = project()
            self._check_batch(k.shape[0])
            # an inference_mode tensor keeps no version counter (reading it raises): None stands for it
            self._cross[module] = (memory, None if memory.is_inference() else memory._version, k, v)
            return k, v
        old, version, k, v = entry
        same = memory is old or (memory.device == old.device and memory.device.type != "meta"  # meta: no data_ptr
                                 and (memory.data_ptr(), memory.shape[1:], memory.stride()[1:])
                                 == (old.data_ptr(), old.shape[1:], old.stride()[1:]))
        if not same or (None if memory.is_inference() else memory._version) != version:
            raise ValueError("this KVCache holds cross-attention keys of another encoder memory (or the memory was "
                             "modified in place): call cache.reset() (or use a new KVCache) before a new source")
        self._check_batch(memory.shape[0])
        return k, v

    def advance(self, n: int) -> None:
        """Move ``offset`` past the ``n`` positions just processed (models call this after each forward)."""
        self.offset += n

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` (a 1-D long tensor) of every entry (beam search re-ranks hypotheses)."""
        if not isinstance(index, torch.Tensor) or index.dim() != 1 or index.dtype != torch.long:
            raise TypeError(f"index must be a 1-D torch.long tensor of batch rows, got {index!r:.60}")
        if index.numel() and not 0 <= int(index.min()) <= int(index.max()) < (self.batch_size or 0):
            raise ValueError(f"index holds rows outside the cached batch [0, {self.batch_size}): {index.tolist()[:8]}")
        self._self = {m: (k.index_select(0, index), v.index_select(0, index)) for m, (k, v) in self._self.items()}
        self._cross = {m: (*e[:2], *(t.index_select(0, index) for t in e[2:])) for m, e in self._cross.items()}
        self.batch_size = int(index.numel())

    def __len__(self) -> int:
        return len(self._self) + len(self._cross)
