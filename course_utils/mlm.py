"""BERT's masked-LM recipe (Devlin et al., 2019; lesson 12): select each non-special position with probability ``p``
(0.15); 80 % of those become ``<mask>``, 10 % a random token, 10 % stay; labels -100 elsewhere."""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F

from .validation import check_int, check_tensor

__all__ = ["IGNORE_INDEX", "mask_tokens", "masked_logits", "mlm_loss", "masked_accuracy", "unigram_baseline"]

IGNORE_INDEX = -100  # PyTorch's default ignore_index: the label of every position that is not scored


def _check_id(value, name: str, vocab_size: int) -> int:
    if not 0 <= check_int(value, name, None) < vocab_size:
        raise ValueError(f"{name}={value} is outside the vocabulary [0, {vocab_size - 1}]: pass the tokenizer's id "
                         "(e.g. tok.mask_id) and vocab_size=tok.vocab_size")
    return int(value)


def mask_tokens(ids: torch.Tensor, vocab_size: int, mask_id: int, special_ids: Iterable[int], p: float = 0.15,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, labels)`` shaped like ``ids``: ``labels[i] = ids[i]`` where ``i`` was selected, else -100.
    ``special_ids`` (with ``mask_id`` and the padding id) are never selected nor drawn; ``generator`` fixes masks."""
    if check_tensor(ids, "ids").is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"ids must hold integer token ids (torch.long), got {ids.dtype}: use ids.long()")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size must be an int >= 2 (tok.vocab_size), got {vocab_size!r}")
    mask_id = _check_id(mask_id, "mask_id", vocab_size)
    if isinstance(special_ids, torch.Tensor):
        special_ids = special_ids.tolist()
    special = sorted({_check_id(s, "special id", vocab_size) for s in special_ids})
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a probability in [0, 1], got {p!r}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"ids must lie in [0, {vocab_size - 1}] (vocab_size={vocab_size}), got values in "
                         f"[{int(ids.min())}, {int(ids.max())}]: encode with the tokenizer of this vocabulary")
    vocab = torch.arange(vocab_size)
    ordinary_ids = vocab[~torch.isin(vocab, torch.tensor(special, dtype=torch.long))]  # the ids a replacement may take
    if len(ordinary_ids) == 0:
        raise ValueError("every id is special, so there is no ordinary token to draw random replacements from")

    # Every random draw comes from the generator's device (a CPU generator cannot fill a CUDA tensor), then
    # moves to the data; the draws are made for all positions, so the result depends only on the seed.
    draw_device = generator.device if generator is not None else ids.device

    def uniform() -> torch.Tensor:
        return torch.rand(ids.shape, generator=generator, device=draw_device).to(ids.device)

    eligible = ~torch.isin(ids, torch.tensor(special, dtype=ids.dtype, device=ids.device))
    selected = (uniform() < p) & eligible
    u = uniform()  # splits the selected: u < 0.8 -> <mask>, 0.8 <= u < 0.9 -> random, the rest unchanged
    to_mask = selected & (u < 0.8)
    to_random = selected & (u >= 0.8) & (u < 0.9)
    inputs = ids.clone()
    inputs[to_mask] = mask_id
    pick = torch.randint(len(ordinary_ids), ids.shape, generator=generator, device=draw_device)
    random_ids = ordinary_ids.to(draw_device)[pick].to(device=ids.device, dtype=ids.dtype)
    inputs[to_random] = random_ids[to_random]
    labels = torch.where(selected, ids, torch.full_like(ids, IGNORE_INDEX))
    return inputs, labels


def _check_pair(logits: torch.Tensor, labels: torch.Tensor) -> None:
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} do not match: logits "
                         "must be labels' shape plus the vocabulary dimension")


def _selected(labels: torch.Tensor) -> torch.Tensor:
    keep = labels != IGNORE_INDEX
    if not bool(keep.any()):
        raise ValueError("no position is selected (every label is -100): nothing to score")
    return keep


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the selected positions only: logits ``(B, T, V)``, labels ``(B, T)``."""
    _check_pair(logits, labels)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=IGNORE_INDEX)


def masked_accuracy(logits: torch.Tensor, labels: torch.Tensor, k: int = 1) -> float:
    """Fraction of the selected positions (label != -100) whose label is among the ``k`` best logits."""
    _check_pair(logits, labels)
    keep = _selected(labels)
    top = logits[keep].topk(k, dim=-1).indices  # (N, k)
    return float((top == labels[keep][:, None]).any(dim=-1).float().mean())


def unigram_baseline(train_ids: torch.Tensor, labels: torch.Tensor, vocab_size: int,
                     special_ids: Iterable[int] = ()) -> tuple[int, float]:
    """``(most frequent ordinary id in train_ids, its accuracy on labels)``: the best a model that ignores its input
    can do; a masked language model has learned something from the context only if it beats this number."""
    counts = torch.bincount(train_ids.reshape(-1).cpu(), minlength=vocab_size).float()
    counts[list(special_ids)] = -1.0
    best = int(counts.argmax())
    keep = _selected(labels)
    return best, float((labels[keep] == best).float().mean())


def masked_logits(model, inputs: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logits (N, V), targets (N,))`` of a :class:`~course_utils.models.MaskedLM` at the N selected positions:
    ``model(inputs)[labels != -100]``, but the output layer runs only there (about 7× less work with 15 % selected)."""
    selected = labels != IGNORE_INDEX
    return model(inputs, select=selected), labels[selected]
