"""Answers to the exercises of lesson 15 (byte-pair encoding), for tests/test_exercises.py: every exercise with a
correct answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import codecs

from exercise_answer import Answer

from course_utils.bpe import BPETokenizer, train_merges


def _best_pair(table):
    counts = {}
    for chunk, n in table.items():
        for pair in zip(chunk, chunk[1:]):
            counts[pair] = counts.get(pair, 0) + n
    return min(counts, key=lambda p: (-counts[p], p))


def _best_pair_across_chunks(table):            # joins the chunks (each as often as it occurs): pairs cross them
    ids = [i for chunk, n in table.items() for _ in range(n) for i in chunk]
    counts = {}
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return min(counts, key=lambda p: (-counts[p], p))


def _best_pair_unweighted(table):               # each chunk once
    return _best_pair(dict.fromkeys(table, 1))


def _best_pair_first_seen(table):               # ties to the pair seen first (max keeps the first)
    counts = {}
    for chunk, n in table.items():
        for pair in zip(chunk, chunk[1:]):
            counts[pair] = counts.get(pair, 0) + n
    return max(counts, key=counts.get)


def _best_pair_by_library(table):
    text = {bytes(chunk).decode("utf-8"): n for chunk, n in table.items()}
    return train_merges(text, 1, min_frequency=1)[0]


def _merge(ids, pair, new):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _encode_chunk(ids, merges):
    ids = list(ids)
    while len(ids) > 1:
        pairs = [p for p in zip(ids, ids[1:]) if p in merges]
        if not pairs:
            break
        pair = min(pairs, key=merges.get)
        ids = _merge(ids, pair, merges[pair])
    return ids


def _encode_in_order(ids, merges):              # the notebook's slow encoder: also right
    for pair, new in merges.items():
        ids = _merge(ids, pair, new)
    return ids


def _encode_leftmost(ids, merges):              # merges the leftmost learnt pair first
    ids = list(ids)
    while True:
        hits = [p for p in zip(ids, ids[1:]) if p in merges]
        if not hits:
            return ids
        ids = _merge(ids, hits[0], merges[hits[0]])


def _encode_most_frequent(ids, merges):         # merges the pair most frequent in the chunk
    ids = list(ids)
    while True:
        hits = [p for p in zip(ids, ids[1:]) if p in merges]
        if not hits:
            return ids
        best = max(hits, key=hits.count)
        ids = _merge(ids, best, merges[best])


def _encode_one_pass(ids, merges):              # each learnt pair of the chunk once, in rank order, no repeat
    present = sorted({p for p in zip(ids, ids[1:]) if p in merges}, key=merges.get)
    for pair in present:
        ids = _merge(ids, pair, merges[pair])
    return ids


def _encode_by_library(ids, merges):
    strings = [BPETokenizer.from_merges([]).itos[5 + b] for b in range(256)]
    learnt = []
    for (a, b), new in sorted(merges.items(), key=lambda kv: kv[1]):
        while len(strings) < new:
            strings.append(None)
        learnt.append((strings[a], strings[b]))
        strings.append(strings[a] + strings[b])
    tok = BPETokenizer.from_merges(learnt)
    text_ids = tok._encode_chunk(bytes(ids).decode("utf-8", errors="replace"))
    return [i - 5 for i in text_ids]


def _encode_by_tokenizer(ids, merges):          # another alias: the protocol's encode
    tok = BPETokenizer.from_merges([])
    return [i - 5 for i in tok.encode(bytes(ids).decode("utf-8", errors="replace"))]


def _stream(ids, tok):
    dec = codecs.getincrementaldecoder("utf-8")()
    return [dec.decode(tok.token_bytes(i)) for i in ids]


def _stream_by_hand(ids, tok):
    out, pending = [], b""
    for i in ids:
        pending += tok.token_bytes(i)
        cut = len(pending)
        while cut > 0:
            try:
                text = pending[:cut].decode("utf-8")
                break
            except UnicodeDecodeError:
                cut -= 1
        else:
            text = ""
        out.append(text)
        pending = pending[cut:]
    return out


def _stream_each_alone(ids, tok):               # decodes every token alone: U+FFFD for a cut character
    return [tok.token_bytes(i).decode("utf-8", errors="replace") for i in ids]


def _stream_prefix(ids, tok):                   # decodes the whole prefix again at every token: O(n²)
    out, shown = [], ""
    for k in range(1, len(ids) + 1):
        text = tok.decode(ids[:k]).rstrip("\ufffd")
        out.append(text[len(shown):])
        shown = text
    return out


def _stream_at_the_end(ids, tok):               # waits for the last token
    return [""] * (len(ids) - 1) + [b"".join(tok.token_bytes(i) for i in ids).decode("utf-8")]


L15 = [
    Answer("check_best_pair", _best_pair, wrong=_best_pair_across_chunks, shortcut=_best_pair_by_library,
           says="the course's BPE", also=((_best_pair_unweighted, "count"), (_best_pair_first_seen, "tie"))),
    Answer("check_encode_chunk", _encode_chunk, wrong=_encode_leftmost, shortcut=_encode_by_library,
           says="the course's BPE", also=((_encode_most_frequent, "smallest rank"), (_encode_one_pass, "repeat"))),
    Answer("check_stream_decode", _stream, wrong=_stream_each_alone, shortcut=_stream_prefix,
           says="O(n²)", also=((_stream_at_the_end, "too late"),)),
]

EXTRA_RIGHT = {"check_encode_chunk": (_encode_in_order,), "check_stream_decode": (_stream_by_hand,)}

ANSWERS = {"l15_bpe": L15}
