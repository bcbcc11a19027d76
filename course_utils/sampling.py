"""The next-token distribution of sampling (lesson 11): ``p = softmax(filter(logits / τ))``, τ = 0 greedy; top-k keeps
the k largest logits, then top-p the fewest top tokens of probability sum ≥ p (``None``, 0 / 1.0: off); float32."""

from __future__ import annotations

import torch

from .validation import check_float, check_int, check_number, check_rank, reads_values


def _check_sampling(temperature, top_k, top_p) -> tuple[float, int | None, float | None]:
    """The checked arguments, a filter that is off (top_k 0, top_p 1.0) as None."""
    if check_number(temperature, "temperature") < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    top_k = None if top_k is None or check_int(top_k, "top_k", 0) == 0 else int(top_k)
    if top_p is not None and not 0.0 < check_number(top_p, "top_p") <= 1.0:
        raise ValueError(f"top_p must be in (0, 1] (1.0 = no filtering), got {top_p}")
    return float(temperature), top_k, None if top_p is None or top_p == 1.0 else float(top_p)


def top_k_filter(logits: torch.Tensor, top_k: int | None) -> torch.Tensor:
    """Set every logit outside the k largest of each row to −inf (ties kept); ``None`` or 0: unchanged."""
    check_float(logits, "logits")
    top_k = _check_sampling(1.0, top_k, None)[1]
    if top_k is None or top_k >= logits.size(-1):
        return logits
    kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # (…, 1): the k-th largest logit
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, top_p: float | None) -> torch.Tensor:
    """Nucleus filtering: keep the most probable tokens until their probabilities add up to ``top_p``; every
    other logit becomes −inf. The best token always stays (``None`` or 1.0: unchanged)."""
    check_float(logits, "logits")
    top_p = _check_sampling(1.0, None, top_p)[2]
    if top_p is None:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    before = probs.cumsum(-1) - probs  # probability mass of the better tokens
    drop_sorted = before >= top_p  # already enough mass without this token
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def sampling_distribution(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                          top_p: float | None = None) -> torch.Tensor:
    """``logits (…, V)`` -> the probabilities ``(…, V)`` (float32) that ``sample_next`` draws from."""
    check_float(logits, "logits")
    temperature, top_k, top_p = _check_sampling(temperature, top_k, top_p)  # checked even when greedy ignores them
    if logits.dim() == 0 or logits.size(-1) == 0:
        raise ValueError(f"logits must end in a vocabulary axis of size V >= 1, got shape {tuple(logits.shape)}")
    logits = logits.float()
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.size(-1)).float()
    # subtract each row's max first: its best logit becomes 0 / τ = 0, so a tiny τ (1e-45) gives near-greedy
    # probabilities instead of inf - inf = NaN
    logits = logits - logits.amax(dim=-1, keepdim=True)
    return torch.softmax(top_p_filter(top_k_filter(logits / temperature, top_k), top_p), dim=-1)


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """logits ``(B, V)`` -> next ids ``(B, 1)`` drawn from ``sampling_distribution``; ``temperature=0`` is argmax."""
    check_rank(logits, "logits", (2,), "(B, V): the logits of the last position, logits[:, -1]")
    probs = sampling_distribution(logits, temperature, top_k, top_p)  # also checks the arguments
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    if reads_values(probs) and not bool(torch.isfinite(probs).all()):
        raise ValueError("the logits hold NaN or +inf (or a row is all -inf): there is no distribution to sample "
                         "from; the model diverged, check the loss and the learning rate")
    return torch.multinomial(probs, 1, generator=generator)
