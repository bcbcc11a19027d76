"""Byte-level byte-pair encoding (lesson 15): GPT-2's tokenizer, trained here in seconds.

Training: split the text into chunks (words with their leading space, numbers, punctuation runs, runs of CJK
characters, whitespace: :data:`PATTERN`), write every chunk as its UTF-8 bytes, then repeat ``vocab_size - 261`` times:
count the adjacent pairs of tokens over all chunks (weighted by how often each chunk occurs), merge the most frequent
pair into a new token. Encoding a chunk applies the merges in the order they were learnt; decoding joins the bytes.
Every UTF-8 text round-trips, because the 256 bytes are always in the vocabulary: no ``<unk>`` is ever needed.

Tokens are strings in GPT-2's printable byte alphabet (:func:`bytes_to_unicode`: byte 32, the space, prints as
``Ġ``), as in Hugging Face ``tokenizers``; ids: the 5 special tokens, the 256 bytes in byte order, then the merges."""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import zip_longest

from .tokenizers import _CJK, SPECIAL_TOKENS, Tokenizer
from .validation import check_int

# GPT-2's split, with Python's re instead of \p{L}: a contraction | a run of CJK characters | a word | a number |
# a run of other visible characters (each with at most one leading space) | spaces not followed by text | spaces.
# CJK runs are chunks of their own, so that "中文abc" is two chunks and Chinese merges never cross into Latin words.
PATTERN = (rf"'(?:[sdmt]|ll|ve|re)| ?[{_CJK}]+| ?(?:(?![{_CJK}])[^\W\d_])+| ?\d+| ?(?:[^\s\w]|_)+"
           r"|\s+(?!\S)|\s+")
_SPLIT = re.compile(PATTERN)
N_SPECIAL, N_BYTES = len(SPECIAL_TOKENS), 256


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table: printable Latin-1 bytes stand for themselves, the other 68 bytes
    (control characters, the space, ...) take the characters from U+0100 on, in byte order (space -> ``Ġ``)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = iter(range(256, 512))
    return {b: chr(b) if b in keep else chr(next(shifted)) for b in range(256)}


BYTE_CHARS = [bytes_to_unicode()[b] for b in range(256)]  # byte -> its character
CHAR_BYTE = {c: b for b, c in enumerate(BYTE_CHARS)}  # its character -> byte


def pretokenize(text: str) -> list[str]:
    """The chunks that BPE merges inside (never across): ``"Hi there, 你好!"`` -> ``['Hi', ' there', ',', ' 你好',
    '!']``. The chunks joined give the text back."""
    if not isinstance(text, str):
        raise TypeError(f"pretokenize expects a str, got {type(text).__name__}: decode bytes with .decode('utf-8')")
    return _SPLIT.findall(text)


def _texts(texts, where: str) -> list[str]:
    if isinstance(texts, str):
        return [texts]
    if not isinstance(texts, Iterable):
        raise TypeError(f"{where} expects a str or a list of str, got {type(texts).__name__}")
    texts = list(texts)
    if bad := [t for t in texts if not isinstance(t, str)][:1]:
        raise TypeError(f"{where} expects a list of str, got a {type(bad[0]).__name__} {bad[0]!r:.40}: "
                        "decode bytes to str first")
    return texts


def chunk_counts(texts: str | Iterable[str]) -> Counter:
    """How often each chunk occurs in ``texts``: the table BPE trains on (Shakespeare: ~1M characters, ~25k chunks)."""
    return Counter(c for t in _texts(texts, "chunk_counts") for c in pretokenize(t))


def train_merges(counts: dict[str, int], n_merges: int, min_frequency: int = 2,
                 ties: str = "bytes") -> list[tuple[int, int]]:
    """Learn up to ``n_merges`` merges from a ``{chunk: count}`` table: ``[(left id, right id), ...]``, byte ids 0-255,
    merge ``i`` makes id ``256 + i``. Stops early when the best pair occurs fewer than ``min_frequency`` times.

    Ties (equal counts) go to the pair with the smallest ``(left, right)`` ids, the 256 bytes in byte order
    (``ties="bytes"``) or in the order of their printed characters (``ties="chars"``, as Hugging Face's trainer,
    whose alphabet is sorted by character: ``g`` (U+0067) before ``Ġ`` (U+0120), the space). Pair counts are
    updated only in the chunks that contain the merged pair (``where``), and a heap finds the best pair: seconds,
    not hours."""
    check_int(n_merges, "n_merges", 0)
    check_int(min_frequency, "min_frequency", 1)
    if ties not in ("bytes", "chars"):
        raise ValueError(f"ties must be 'bytes' or 'chars', got {ties!r}")
    order = sorted(range(N_BYTES), key=BYTE_CHARS.__getitem__) if ties == "chars" else list(range(N_BYTES))
    rank = {b: i for i, b in enumerate(order)}  # byte -> its id while training
    words = [[rank[b] for b in c.encode("utf-8")] for c in counts]  # each chunk as token ids, edited in place
    freqs = list(counts.values())
    if bad := [f for f in freqs if isinstance(f, bool) or not isinstance(f, int) or f < 1][:1]:
        raise ValueError(f"chunk counts must be positive ints, got {bad[0]!r}: build the table with chunk_counts")
    pairs: Counter = Counter()  # (a, b) -> occurrences, weighted by chunk frequency
    where: defaultdict[tuple[int, int], set[int]] = defaultdict(set)  # (a, b) -> chunks that may contain it
    for w, (word, f) in enumerate(zip(words, freqs)):
        for p in zip(word, word[1:]):
            pairs[p] += f
            where[p].add(w)
    heap = [(-c, p) for p, c in pairs.items()]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    while heap and len(merges) < n_merges:
        neg, pair = heapq.heappop(heap)
        if pairs.get(pair, 0) != -neg:  # a stale entry: the count changed since it was pushed
            continue
        if -neg < min_frequency:
            break
        new = N_BYTES + len(merges)
        merges.append(pair)
        delta: Counter = Counter()
        for w in where.pop(pair):
            merged = _merge(words[w], pair, new, delta, freqs[w])
            if merged is not None:  # None: the pair left this chunk in an earlier merge
                words[w] = merged
                for p in zip(merged, merged[1:]):
                    if new in p:
                        where[p].add(w)
        for p, d in delta.items():
            if d:
                pairs[p] += d
                if pairs[p] > 0:
                    heapq.heappush(heap, (-pairs[p], p))
                else:
                    del pairs[p]
        pairs.pop(pair, None)
    back = order + list(range(N_BYTES, N_BYTES + len(merges)))  # training id -> byte or merge id
    return [(back[a], back[b]) for a, b in merges]


def _merge(ids: list[int], pair: tuple[int, int], new: int, delta: Counter | None = None, f: int = 1):
    """Replace every occurrence of ``pair`` in ``ids``, left to right (``aaa`` with (a, a) -> ``[aa, a]``); None when
    there is none. ``delta`` (training) receives the change of each pair count, ``f`` times: only the neighbours
    of a merge change, so only they are counted (x a b y -> x N y: -(x,a) -(a,b) -(b,y) +(x,N) +(N,y))."""
    a, b = pair
    out, i, n, found = [], 0, len(ids), False
    while i < n:
        try:
            j = ids.index(a, i, n - 1)  # the next a that has a right neighbour
        except ValueError:
            break
        if ids[j + 1] != b:
            out.extend(ids[i:j + 1])
            i = j + 1
            continue
        out.extend(ids[i:j])
        if delta is not None:
            delta[pair] -= f
            if j > 0:  # the left neighbour: already final in out (N itself after a b a b)
                delta[ids[j - 1], a] -= f
                delta[out[-1], new] += f
            if j + 2 < n and not (ids[j + 2] == a and j + 3 < n and ids[j + 3] == b):  # else the next merge's left
                delta[b, ids[j + 2]] -= f
                delta[new, ids[j + 2]] += f
        out.append(new)
        i, found = j + 2, True
    if not found:
        return None
    out.extend(ids[i:])
    return out


def _check_merges(merges) -> list[tuple[str, str]]:
    if isinstance(merges, str) or not isinstance(merges, Iterable):
        raise TypeError(f"merges must be a list of [left, right] token pairs, got {type(merges).__name__}")
    merges = [tuple(m) if isinstance(m, (list, tuple)) else m for m in merges]
    if bad := [m for m in merges if not (isinstance(m, tuple) and len(m) == 2
                                         and all(isinstance(s, str) for s in m))][:1]:
        raise TypeError(f"each merge must be a pair of token strings [left, right], got {bad[0]!r:.60}")
    return merges


class BPETokenizer(Tokenizer):
    """Byte-level BPE with the course's tokenizer protocol (``encode``, ``decode``, ``encode_batch``, ``save`` /
    ``load``, course-model manifests). ``BPETokenizer.from_texts(texts, vocab_size=1000)`` trains one;
    ``merges`` are pairs of token strings, ``tokens`` = 5 special tokens + 256 bytes + one token per merge."""

    _OPTIONS = ("merges",)

    def __init__(self, tokens: Iterable[str], merges: Sequence[Sequence[str]]):
        super().__init__(tokens)
        merges = _check_merges(merges)
        expected = [*SPECIAL_TOKENS, *BYTE_CHARS, *(a + b for a, b in merges)]
        if self.itos != expected:
            first = next(i for i, (x, y) in enumerate(zip_longest(self.itos, expected)) if x != y)
            raise ValueError(f"tokens and merges disagree at id {first}: a BPE vocabulary is the 5 special tokens, "
                             "the 256 byte characters in byte order, then left+right of each merge in order; "
                             "build it with BPETokenizer.from_texts or from_merges")
        self.merges: list[tuple[str, str]] = merges
        self._ranks = {(self.stoi[a], self.stoi[b]): self.stoi[a + b] for a, b in merges}  # pair -> merged id
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_merges(cls, merges: Sequence[Sequence[str]]) -> BPETokenizer:
        """The tokenizer that applies these merges (pairs of token strings, in the order they were learnt)."""
        merges = _check_merges(merges)
        return cls([*SPECIAL_TOKENS, *BYTE_CHARS, *(a + b for a, b in merges)], merges)

    @classmethod
    def from_texts(cls, texts: str | Iterable[str], vocab_size: int, *, min_frequency: int = 2,
                   ties: str = "bytes") -> BPETokenizer:
        """Train on ``texts``: ``vocab_size`` counts the 5 special tokens and the 256 bytes (at least 261). The
        vocabulary is smaller when no pair occurs ``min_frequency`` times any more; ``ties``: see train_merges."""
        check_int(vocab_size, "vocab_size", N_SPECIAL + N_BYTES)
        ids = train_merges(chunk_counts(texts), vocab_size - N_SPECIAL - N_BYTES, min_frequency, ties)
        strings = list(BYTE_CHARS)  # id - 5 -> its string: the 256 bytes, then one per merge
        for a, b in ids:
            strings.append(strings[a] + strings[b])
        return cls.from_merges([(strings[a], strings[b]) for a, b in ids])

    def _encode_chunk(self, chunk: str) -> list[int]:
        """Apply the merges to one chunk, the earliest-learnt pair first (the order training made them)."""
        if (hit := self._cache.get(chunk)) is not None:
            return hit
        ids = [N_SPECIAL + b for b in chunk.encode("utf-8")]
        while len(ids) > 1:
            pair = min(zip(ids, ids[1:]), key=lambda p: self._ranks.get(p, 1 << 62))
            if pair not in self._ranks:
                break
            ids = _merge(ids, pair, self._ranks[pair])  # never None: the pair is in ids
        if len(self._cache) < 100_000:
            self._cache[chunk] = ids
        return ids

    def encode_ids(self, text: str) -> list[int]:
        """text -> ids without special tokens (what ``encode`` returns without flags)."""
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}: use encode_batch for a list, "
                            ".decode('utf-8') for bytes")
        return [i for chunk in pretokenize(text) for i in self._encode_chunk(chunk)]

    def tokenize(self, text: str) -> list[str]:
        """text -> token strings in the byte alphabet (``' the'`` -> ``'Ġthe'``)."""
        return [self.itos[i] for i in self.encode_ids(text)]

    def token_bytes(self, i: int) -> bytes:
        """The bytes token ``i`` stands for (a special token: its name in ASCII)."""
        return bytes(CHAR_BYTE[c] for c in self.id_to_token(i)) if i >= N_SPECIAL else self.itos[i].encode()

    def _join(self, tokens: list[str]) -> str:
        """Token strings -> bytes -> text; a cut UTF-8 character (a lone byte of 你) decodes as U+FFFD."""
        raw = b"".join(t.encode() if t in SPECIAL_TOKENS else bytes(CHAR_BYTE[c] for c in t) for t in tokens)
        return raw.decode("utf-8", errors="replace")
