"""Turning a trained model into sequences (lessons 10 and 11).

* ``greedy_decode``: y_t = argmax_y P(y | y_<t, X), one token at a time, for the encoder–decoder ``Transformer``.
* ``beam_search``: keep the ``beam_size`` best partial hypotheses by Σ log P; rank finished ones by
  score / lp(L) with the GNMT length penalty lp(L) = ((5 + L) / 6)^α (Wu et al., 2016), so that α > 0 stops
  the search from preferring short outputs.
* ``generate``: sample from a ``GPT`` with temperature (logits / τ) and top-k filtering.

All three feed only the newest token per step and keep earlier keys/values in a ``KVCache``; ``use_cache=False``
recomputes the whole prefix each step (same numbers, slower: lesson 11 measures the difference).
"""

from __future__ import annotations

import torch

from .attention import KVCache
from .validation import check_positive, check_rank


def top_k_filter(logits: torch.Tensor, top_k: int | None) -> torch.Tensor:
    """Set every logit outside the k largest of each row to −inf (``top_k=None``: unchanged)."""
    if top_k is None or top_k >= logits.size(-1):
        return logits
    check_positive(top_k, "top_k")
    kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # (B, 1): the k-th largest logit
    return logits.masked_fill(logits < kth, float("-inf"))


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """logits ``(B, V)`` -> next ids ``(B, 1)``. ``temperature=0`` means greedy (argmax)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    probs = torch.softmax(top_k_filter(logits.float() / temperature, top_k), dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


@torch.no_grad()
def generate(
    model,
    ids: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Continue ``ids (B, T)`` by ``max_new_tokens`` sampled tokens with a ``GPT``; returns ``(B, T + new)``."""
    check_rank(ids, "ids", (2,), "(B, T) token ids")
    if ids.size(1) == 0:
        raise ValueError("generate needs at least one context token per row (e.g. a newline or <bos>)")
    block = model.block_size
    out, cache = ids, None
    for _ in range(max_new_tokens):
        if use_cache and cache is not None and cache.offset < block:
            logits = model(out[:, -1:], cache=cache)  # only the newest token
        else:
            # First step, no cache, or the window is full: learned absolute positions mean the cropped window
            # has to be recomputed from position 0.
            cache = KVCache() if use_cache else None
            logits = model(out[:, -block:], cache=cache)
        out = torch.cat([out, sample_next(logits[:, -1], temperature, top_k, generator)], dim=1)
    return out


@torch.no_grad()
def greedy_decode(
    model, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int, use_cache: bool = True
) -> torch.Tensor:
    """Greedy decoding with a seq2seq ``Transformer``: src ``(B, S)`` -> generated ids ``(B, L)`` (no <bos>; after
    a row's <eos> the row is filled with the model's ``pad_id``)."""
    check_rank(src, "src", (2,), "(B, S) token ids")
    memory, src_mask = model.encode(src)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    cache = KVCache() if use_cache else None
    for _ in range(max_len):
        logits = model.decode(ys[:, -1:] if use_cache else ys, memory, src_mask, cache)[:, -1]  # (B, V)
        nxt = logits.argmax(dim=-1).masked_fill(done, model.pad_id)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done |= nxt == eos_id
        if bool(done.all()):
            break
    return ys[:, 1:]


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty ((5 + L) / 6)^α; α = 0 gives 1 (plain sum of log-probabilities)."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def _beam_one(model, src, beam_size, max_len, bos_id, eos_id, alpha, use_cache):
    memory, src_mask = model.encode(src)  # (1, S, C), (1, 1, 1, S)
    seqs = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (n_alive, t)
    scores = torch.zeros(1, device=src.device)  # Σ log P of each alive beam
    cache = KVCache() if use_cache else None
    finished: list[tuple[float, list[int]]] = []
    for _ in range(max_len):
        n = seqs.size(0)
        mem, mask = memory.expand(n, -1, -1), src_mask.expand(n, -1, -1, -1)
        logits = model.decode(seqs[:, -1:] if use_cache else seqs, mem, mask, cache)[:, -1]
        cand = scores[:, None] + torch.log_softmax(logits.float(), dim=-1)  # (n, V)
        vocab = cand.size(1)
        top = cand.view(-1).topk(min(2 * beam_size, cand.numel()))
        origins, tokens, kept = [], [], []
        for score, flat in zip(top.values.tolist(), top.indices.tolist()):
            origin, tok = divmod(flat, vocab)
            if tok == eos_id:
                hyp = seqs[origin, 1:].tolist() + [eos_id]
                finished.append((score / length_penalty(len(hyp), alpha), hyp))
            else:
                origins.append(origin), tokens.append(tok), kept.append(score)
            if len(kept) == beam_size:
                break
        if not kept:
            break
        if len(finished) >= beam_size:
            # Stop only when no alive beam can still beat the beam_size-th best finished hypothesis. Log-probs are
            # <= 0, so an alive score can only fall, and lp(L) <= lp(max_len): best_alive / lp(max_len) bounds
            # every normalised score it can still reach. (Stopping as soon as beam_size hypotheses had ended let
            # low-ranked early <eos> candidates end the search before the best, longer hypothesis was complete.)
            kth_best = sorted((f[0] for f in finished), reverse=True)[beam_size - 1]
            if max(kept) / length_penalty(max_len, alpha) <= kth_best:
                break
        index = torch.tensor(origins, device=src.device)
        seqs = torch.cat([seqs[index], torch.tensor(tokens, device=src.device)[:, None]], dim=1)
        scores = torch.tensor(kept, device=src.device)
        if cache is not None:
            cache.reorder(index)  # each beam keeps its parent's past
    if not finished:  # ran out of length: rank the alive
        finished = [
            (s / length_penalty(seqs.size(1) - 1, alpha), seqs[i, 1:].tolist())
            for i, s in enumerate(scores.tolist())
        ]
    return max(finished, key=lambda f: f[0])[1]


def beam_search(
    model,
    src: torch.Tensor,
    *,
    beam_size: int = 4,
    max_len: int = 50,
    bos_id: int,
    eos_id: int,
    length_penalty_alpha: float = 0.6,
    use_cache: bool = True,
) -> torch.Tensor:
    """Beam search with a seq2seq ``Transformer``; src ``(B, S)`` -> best hypothesis per row ``(B, L)`` (no <bos>,
    ending in <eos> when one was produced, padded with ``pad_id``). ``beam_size=1`` equals ``greedy_decode``."""
    check_rank(src, "src", (2,), "(B, S) token ids")
    check_positive(beam_size, "beam_size")
    hyps = [
        _beam_one(model, src[b : b + 1], beam_size, max_len, bos_id, eos_id, length_penalty_alpha, use_cache)
        for b in range(src.size(0))
    ]
    width = max(1, max(len(h) for h in hyps))
    out = torch.full((len(hyps), width), model.pad_id, dtype=torch.long, device=src.device)
    for b, h in enumerate(hyps):
        out[b, : len(h)] = torch.tensor(h, dtype=torch.long)
    return out
