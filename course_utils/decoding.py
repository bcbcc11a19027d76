"""Decoding (lessons 10, 11): ``greedy_decode`` (y_t = argmax_y P(y | y_<t, X)), ``beam_search`` (``beam_size`` best by
Σ log P, finished ranked by score / lp(L) = ((5 + L) / 6)^α), ``generate`` / ``stream_tokens`` (``GPT`` sampling); all
under ``modes.evaluating``, one token per step via a ``KVCache`` (``use_cache=False``: slower, same numbers)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import torch

from .kv_cache import KVCache
from .modes import evaluating, model_device
from .sampling import _check_sampling, sample_next
from .validation import check_bool, check_int, check_number, check_rank, check_token_ids


def _check_ids(ids: torch.Tensor, name: str, layout: str) -> None:
    check_rank(ids, name, (2,), layout)
    if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise TypeError(f"{name} must hold integer token ids (torch.long), got {ids.dtype}: use {name}.long()")


def stream_tokens(model, ids: torch.Tensor, max_new_tokens: int, *, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None, use_cache: bool = True,
                  generator: torch.Generator | None = None) -> Iterator[torch.Tensor]:
    """Continue ``ids (B, T)`` with a ``GPT``, yielding each new token ``(B, 1)`` as soon as it is chosen. Once the
    context window is full it slides: the cropped window is recomputed from position 0 with a fresh cache."""
    try:  # can model(ids, cache=...) be called? (A wrapper's **kwargs is given the benefit of the doubt.)
        params = inspect.signature(getattr(model, "forward", model)).parameters.values()
    except (TypeError, ValueError):  # no signature to read: let the call itself decide
        params = [inspect.Parameter("cache", inspect.Parameter.KEYWORD_ONLY)]
    if hasattr(model, "encode") or not any(p.name == "cache" or p.kind is p.VAR_KEYWORD for p in params):
        raise TypeError(f"generate continues a decoder-only LM such as GPT, got {type(model).__name__}: for an "
                        "encoder-decoder Transformer use greedy_decode or beam_search")
    _check_ids(ids, "ids", "(B, T) token ids")
    if ids.size(1) == 0:
        raise ValueError("generate needs at least one context token per row (e.g. a newline or <bos>)")
    n = check_int(max_new_tokens, "max_new_tokens", 0)
    temperature, top_k, top_p = _check_sampling(temperature, top_k, top_p)
    check_bool(use_cache, "use_cache")
    window = check_int(getattr(model, "max_len", None), "model.max_len (the context window)")
    vocab = getattr(getattr(model, "embed", None), "vocab_size", None)
    if vocab is not None:  # up front, even when no step runs (max_new_tokens=0)
        check_token_ids(ids, vocab, "ids")
    out, cache = ids, None
    for _ in range(n):
        with evaluating(model):
            if use_cache and cache is not None and cache.offset < window:
                logits = model(out[:, -1:], cache=cache)  # only the newest token
            else:  # first step, no cache, or the window is full
                cache = KVCache() if use_cache else None
                logits = model(out[:, -window:], cache=cache)
            nxt = sample_next(logits[:, -1], temperature, top_k, top_p, generator)  # (B, 1)
        out = torch.cat([out, nxt], dim=1)
        yield nxt


def generate(model, ids: torch.Tensor, max_new_tokens: int, **sampling) -> torch.Tensor:
    """``ids (B, T)`` followed by ``max_new_tokens`` sampled tokens, ``(B, T + new)``; keywords as ``stream_tokens``
    (temperature, top_k, top_p, use_cache, generator)."""
    return torch.cat([ids, *stream_tokens(model, ids, max_new_tokens, **sampling)], dim=1)


def _check_seq2seq(model, src: torch.Tensor, max_new_tokens: int, bos_id: int, eos_id: int, use_cache: bool) -> int:
    if not (callable(getattr(model, "encode", None)) and callable(getattr(model, "decode", None))):
        raise TypeError(f"greedy_decode and beam_search take an encoder-decoder Transformer (encode + decode), got "
                        f"{type(model).__name__}: continue a GPT with generate(model, ids, max_new_tokens)")
    _check_ids(src, "src", "(B, S) token ids")
    if src.size(0) == 0:
        raise ValueError("src is an empty batch (B = 0): there is nothing to decode")
    n = check_int(max_new_tokens, "max_new_tokens", 1)
    table = getattr(model, "max_len", None)  # the model's context window
    if table is not None and n > table:
        raise ValueError(f"max_new_tokens={n} output tokens do not fit the model's positional table of {table} "
                         f"positions: use max_new_tokens <= {table} (or build the model with a larger max_len)")
    vocab = getattr(getattr(model, "tgt_embed", None), "vocab_size", None)
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        check_int(value, name, 0)
        if vocab is not None and value >= vocab:
            raise ValueError(f"{name}={value} is outside the target vocabulary [0, {vocab})")
    check_bool(use_cache, "use_cache")
    return n


def greedy_decode(model, src: torch.Tensor, max_new_tokens: int, bos_id: int, eos_id: int,
                  use_cache: bool = True) -> torch.Tensor:
    """Greedy decoding with a seq2seq ``Transformer``: src ``(B, S)`` -> generated ids ``(B, L)``, L <=
    ``max_new_tokens`` (no <bos>; after a row's <eos> the row is filled with the model's ``pad_id``)."""
    max_len = _check_seq2seq(model, src, max_new_tokens, bos_id, eos_id, use_cache)
    with evaluating(model):
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
        top = cand.view(-1).topk(min(2 * beam_size, cand.numel()))
        alive = []  # (parent beam, token, score) of the beams that go on
        for score, flat in zip(top.values.tolist(), top.indices.tolist()):
            origin, tok = divmod(flat, cand.size(1))
            if tok == eos_id:
                hyp = seqs[origin, 1:].tolist() + [eos_id]
                finished.append((score / length_penalty(len(hyp), alpha), hyp))
            else:
                alive.append((origin, tok, score))
            if len(alive) == beam_size:
                break
        if not alive:
            break
        origins, tokens, kept = zip(*alive)
        if len(finished) >= beam_size:
            # Stop only when no alive beam can still beat the beam_size-th best finished hypothesis (not as soon as
            # beam_size have ended: early low-ranked <eos> would cut off a better, longer one). Log-probs are <= 0
            # and lp(L) <= lp(max_len), so best_alive / lp(max_len) bounds every score an alive beam can reach.
            kth_best = sorted((f[0] for f in finished), reverse=True)[beam_size - 1]
            if max(kept) / length_penalty(max_len, alpha) <= kth_best:
                break
        index = torch.tensor(origins, device=src.device)
        seqs = torch.cat([seqs[index], torch.tensor(tokens, device=src.device)[:, None]], dim=1)
        scores = torch.tensor(kept, device=src.device)
        if cache is not None:
            cache.reorder(index)  # each beam keeps its parent's past
    if not finished:  # ran out of length: rank the alive
        lp = length_penalty(seqs.size(1) - 1, alpha)
        finished = [(s / lp, seqs[i, 1:].tolist()) for i, s in enumerate(scores.tolist())]
    return max(finished, key=lambda f: f[0])[1]


def beam_search(model, src: torch.Tensor, *, beam_size: int = 4, max_new_tokens: int = 50, bos_id: int, eos_id: int,
                length_penalty_alpha: float = 0.6, use_cache: bool = True) -> torch.Tensor:
    """Beam search with a seq2seq ``Transformer``; src ``(B, S)`` -> best hypothesis per row ``(B, L)`` (no <bos>,
    ending in <eos> when one was produced, padded with ``pad_id``). ``beam_size=1`` equals ``greedy_decode``."""
    max_len = _check_seq2seq(model, src, max_new_tokens, bos_id, eos_id, use_cache)
    beam_size = check_int(beam_size, "beam_size", 1)
    alpha = check_number(length_penalty_alpha, "length_penalty_alpha")
    args = (beam_size, max_len, bos_id, eos_id, alpha, use_cache)
    with evaluating(model):
        rows = [torch.tensor(_beam_one(model, row[None], *args), device=src.device) for row in src]  # >= 1 token each
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=model.pad_id)


def translate(model, texts, src_tok, tgt_tok, *, method: str = "greedy", beam_size: int = 4,
              max_new_tokens: int | None = None, batch_size: int = 256) -> list[str]:
    """Source texts -> target strings with ``greedy_decode`` or ``beam_search`` (KV cache on), ``batch_size`` rows
    at a time; ``max_new_tokens=None`` allows 2·S + 10 tokens for a batch of S source tokens."""
    if method not in ("greedy", "beam"):
        raise ValueError(f"method must be 'greedy' or 'beam', got {method!r}")
    bos, eos, out = tgt_tok.bos_id, tgt_tok.eos_id, []
    for i in range(0, len(texts), check_int(batch_size, "batch_size")):
        src = src_tok.encode_batch(list(texts[i:i + batch_size])).to(model_device(model))  # (B, S)
        n = min(2 * src.size(1) + 10, getattr(model, "max_len", 10**9)) if max_new_tokens is None else max_new_tokens
        ids = (greedy_decode(model, src, n, bos, eos) if method == "greedy" else
               beam_search(model, src, beam_size=beam_size, max_new_tokens=n, bos_id=bos, eos_id=eos))
        out += [tgt_tok.decode(row.cpu()) for row in ids]  # (B, L) -> B strings
    return out
