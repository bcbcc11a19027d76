"""Lesson 15 · byte-pair encoding: the exercise checks (they print a verdict, return True / False and never raise).

The lesson module re-exports them; this module never imports the lesson's ``__init__``."""

from __future__ import annotations

import random

from ...exercises import attempt, fail, fresh_generator, fresh_int, never_raises, passed, watching


def _library_targets() -> list:
    """What does the exercise's work for the student: the course's BPE (training, encoding, decoding)."""
    from course_utils import bpe, tokenizers

    return [(bpe, "train_merges"), (bpe, "chunk_counts"), (bpe, "_merge"), (bpe.BPETokenizer, "from_texts"),
            (bpe.BPETokenizer, "from_merges"), (bpe.BPETokenizer, "_encode_chunk"), (bpe.BPETokenizer, "encode_ids"),
            (bpe.BPETokenizer, "tokenize"), (bpe.BPETokenizer, "_join"), (tokenizers.Tokenizer, "encode"),
            (tokenizers.Tokenizer, "decode")]


def _used_library(calls) -> bool:
    names = ", ".join(sorted(set(calls)))
    return fail(f"You called {names}: the course's BPE does this exercise's work. Write it with lists, dicts and "
                "loops; compare with course_utils.bpe afterwards.",
                f"你调用了 {names}：课程库里的 BPE 把这道题的活儿都干了。请用列表、字典和循环自己写，"
                "写完再和 course_utils.bpe 对照。")


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: the best pair of a chunk-frequency table
# ------------------------------------------------------------------------------------------------------------


def _best_pair_cases(seed: int) -> list[dict[str, int]]:
    rng = random.Random(seed)
    words = ["the", " the", " cat", " sat", " at", "aaa", " 你好", "你们", "!!", " 🙂"]
    drawn = {rng.choice(words) + rng.choice(words): rng.randint(1, 9) for _ in range(12)}
    return [
        {"ab": 1, "cd": 5},                     # frequency counts: cd wins
        {"ba": 2, "ab": 2},                     # a tie: the smaller pair (97, 98) wins
        {"xa": 2, "by": 2, "ab": 1},            # across chunks (xa|by) "a"+"b" ties at 2 and wins: chunks do not touch
        {"aaaa": 1, "abab": 1},                 # (a, a) 3 times by windows
        drawn,
    ]


def _expected_pair(table: dict[str, int]) -> tuple[int, int]:
    from course_utils.bpe import train_merges

    return train_merges(table, 1, min_frequency=1)[0]


@never_raises
def check_best_pair(fn) -> bool:
    """Exercise 1: ``fn({chunk ids (tuple of ints): count})`` -> the most frequent adjacent pair, counted inside each
    chunk and weighted by the chunk's count; ties go to the smallest pair. Mistakes named: counting across chunk
    boundaries, ignoring the counts, a tie broken by first appearance."""
    cases = _best_pair_cases(fresh_int(0, 2**31, fresh_generator()))
    tables = [{tuple(c.encode("utf-8")): n for c, n in table.items()} for table in cases]
    results = []
    with watching(fn, _library_targets()) as calls:
        for table in tables:
            ok, got = attempt(fn, dict(table))
            if not ok:
                return False
            results.append(got)
    if calls:
        return _used_library(calls)
    for i, (table, got) in enumerate(zip(cases, results)):
        want = _expected_pair(table)
        if isinstance(got, list):
            got = tuple(got)
        if not (isinstance(got, tuple) and len(got) == 2 and all(isinstance(x, int) for x in got)):
            return fail(f"Return a pair of ints (left id, right id), got {type(got).__name__} {got!r:.40}.",
                        f"请返回一对整数（左 id，右 id），你返回的是 {type(got).__name__} {got!r:.40}。")
        if got == want:
            continue
        if i == 0:
            return fail(f"In {{'ab': 1, 'cd': 5}} the chunk 'cd' occurs 5 times: weight each pair by its chunk's "
                        f"count. Expected {want}, got {got}.",
                        f"在 {{'ab': 1, 'cd': 5}} 里，chunk 'cd' 出现了 5 次：每个字节对都要乘上所在 chunk 的次数。"
                        f"应为 {want}，你得到 {got}。")
        if i == 2 and got == (97, 98):
            return fail("You counted a pair across two chunks (x a | b y -> (a, b)): count inside each chunk only; "
                        "a merge never crosses a chunk boundary.",
                        "你把两个 chunk 之间的字节也算成了一对（x a | b y -> (a, b)）：只能在每个 chunk 内部数；"
                        "合并永远不会跨过 chunk 的边界。")
        if i == 1:
            return fail(f"(97, 98) and (98, 97) both occur twice: break the tie by the smaller pair, as the library "
                        f"does, got {got}.",
                        f"(97, 98) 和 (98, 97) 都出现了 2 次：平局时取较小的那一对（库里也是这样），你得到 {got}。")
        return fail(f"Table {table}: expected {want}, got {got}.", f"表 {table}：应为 {want}，你得到 {got}。")
    return passed("Correct: one training step of BPE is this pair, merged everywhere, and the counts updated.",
                  "正确：BPE 训练的一步，就是找到这一对，处处合并，再更新计数。")


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: encode a chunk with learnt merges, by rank
# ------------------------------------------------------------------------------------------------------------


def _apply_in_order(ids: list[int], merges: dict[tuple[int, int], int]) -> list[int]:
    """The slow encoder: every merge in the order it was learnt, over the whole sequence."""
    from course_utils.bpe import _merge

    for pair, new in merges.items():
        ids = _merge(ids, pair, new) or ids
    return ids


def _encode_cases(seed: int) -> list[tuple[list[int], dict[tuple[int, int], int]]]:
    from course_utils.bpe import BPETokenizer

    a, b, c = 97, 98, 99
    rank_matters = {(b, c): 256, (a, b): 257}           # learnt (b, c) first: abc -> a (bc)
    chain = {(a, a): 256, (256, a): 257, (256, 256): 258}
    rng = random.Random(seed)
    text = " ".join(rng.choice(["the cat", "that hat", "你们好", "a bat", "chat"]) for _ in range(30))
    tok = BPETokenizer.from_texts(text, 300, min_frequency=1)
    learnt = {(tok.stoi[x] - 5, tok.stoi[y] - 5): tok.stoi[x + y] - 5 for x, y in tok.merges}
    words = [list(w.encode()) for w in (" that", " chat", "你们好", " cathat", "thethe")]
    return ([([a, b, c], rank_matters), ([a, b, c, a, b], rank_matters), ([a] * 5, chain), ([a] * 4, chain)]
            + [(w, learnt) for w in words])


@never_raises
def check_encode_chunk(fn) -> bool:
    """Exercise 2: ``fn(ids, merges)`` with ``merges`` = {pair: new id} in the order learnt -> the chunk's tokens, as
    if every merge were applied in that order (repeatedly merge the present pair that was learnt first). Mistakes
    named: merging left to right, merging the most frequent pair of the chunk, one pass only."""
    cases = _encode_cases(fresh_int(0, 2**31, fresh_generator()))
    results = []
    with watching(fn, _library_targets()) as calls:
        for ids, merges in cases:
            ok, got = attempt(fn, list(ids), dict(merges))
            if not ok:
                return False
            results.append(got)
    if calls:
        return _used_library(calls)
    for i, ((ids, merges), got) in enumerate(zip(cases, results)):
        want = _apply_in_order(list(ids), merges)
        if isinstance(got, tuple):
            got = list(got)
        if not (isinstance(got, list) and all(isinstance(x, int) for x in got)):
            return fail(f"Return a list of int ids, got {type(got).__name__} {got!r:.40}.",
                        f"请返回由整数 id 组成的列表，你返回的是 {type(got).__name__} {got!r:.40}。")
        if got == want:
            continue
        if i in (0, 1):
            return fail(f"ids {ids} with merges {merges}: (98, 99) was learnt before (97, 98), so it is applied "
                        f"first: expected {want}, got {got}. Pick the present pair with the smallest rank (new id), "
                        "not the leftmost or the most frequent one.",
                        f"ids {ids}，合并规则 {merges}：(98, 99) 比 (97, 98) 先学到，所以要先用它："
                        f"应为 {want}，你得到 {got}。每次选当前序列里排名最靠前（新 id 最小）的字节对，"
                        "而不是最左边或最常见的那一对。")
        if i in (2, 3):
            return fail(f"ids {ids} with merges {merges}: expected {want}, got {got}. A merge creates new pairs "
                        "that later merges use: repeat until no learnt pair is left.",
                        f"ids {ids}，合并规则 {merges}：应为 {want}，你得到 {got}。合并之后会出现新的字节对，"
                        "还可能用得上别的规则：要一直重复，直到序列里没有学过的字节对为止。")
        return fail(f"ids {ids}: expected {want}, got {got}.", f"ids {ids}：应为 {want}，你得到 {got}。")
    return passed("Correct: applying the merges by rank gives exactly the tokens training would have made.",
                  "正确：按排名应用合并规则，得到的词元与训练时的切分完全一样。")


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: stream the decoded text token by token, never half a character
# ------------------------------------------------------------------------------------------------------------


def _stream_cases(seed: int):
    from course_utils.bpe import BPETokenizer

    raw = BPETokenizer.from_merges([])  # bytes only: every multi-byte character is cut
    trained = BPETokenizer.from_texts("你好世界，你好 hello world 🙂🙂 e\u0301" * 4, 290, min_frequency=1)
    rng = random.Random(seed)
    pieces = ["héllo", " 你好", "！", "🙂", " Mañana", "🇨🇳", " 世界", "e\u0301", "\u200d", "\x00", " ok", "ß"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(3, 9))) for _ in range(3)]
    return [(tok, tok.encode(t), t) for tok in (raw, trained) for t in texts]


def _expected_stream(tok, ids) -> list[str]:
    import codecs

    dec = codecs.getincrementaldecoder("utf-8")()
    return [dec.decode(tok.token_bytes(i)) for i in ids]


@never_raises
def check_stream_decode(fn) -> bool:
    """Exercise 3: ``fn(ids, tok)`` -> one string per token: the text that token completes ('' while a character is
    still cut), so that the pieces joined are the text and no piece holds U+FFFD. Mistakes named: decoding each
    token alone (replacement characters), waiting for the end; decoding the whole prefix again at every token is
    the quadratic shortcut refused."""
    from course_utils import tokenizers
    from course_utils.bpe import BPETokenizer

    cases = _stream_cases(fresh_int(0, 2**31, fresh_generator()))
    results = []
    targets = [(BPETokenizer, "_join"), (tokenizers.Tokenizer, "decode")]
    with watching(fn, targets) as calls:
        for tok, ids, _ in cases:
            ok, got = attempt(fn, list(ids), tok)
            if not ok:
                return False
            results.append(got)
    if calls:
        return fail("You called tok.decode: decoding the whole prefix again at every token costs O(n²) and is what "
                    "the exercise asks you to avoid. Keep the bytes of an unfinished character and wait for the rest.",
                    "你调用了 tok.decode：每来一个词元就把整个前缀重新解码一遍，代价是 O(n²)，这正是本题要避免的。"
                    "请把还没凑齐的那个字符的字节留着，等后面的字节到了再解码。")
    for (tok, ids, text), got in zip(cases, results):
        want = _expected_stream(tok, ids)
        if not (isinstance(got, list) and all(isinstance(s, str) for s in got)):
            return fail(f"Return a list of str, one per token, got {type(got).__name__}.",
                        f"请返回字符串列表，每个词元一个，你返回的是 {type(got).__name__}。")
        if got == want:
            continue
        if len(got) != len(ids):
            return fail(f"{len(ids)} tokens but {len(got)} pieces: return one string per token ('' when the token "
                        "ends inside a character).",
                        f"共有 {len(ids)} 个词元，你却返回了 {len(got)} 段：每个词元对应一个字符串"
                        "（词元停在一个字符中间时返回 ''）。")
        if any("\ufffd" in s for s in got):
            return fail(f"{text!r}: a piece holds U+FFFD (�): a token ended inside a multi-byte character and you "
                        "decoded it alone. Keep the unfinished bytes until the character is complete.",
                        f"{text!r}：有一段里出现了 U+FFFD（�）：某个词元停在多字节字符的中间，你却单独解码了它。"
                        "请把没凑齐的字节留着，等这个字符完整了再解码。")
        if "".join(got) == text:
            return fail(f"{text!r}: the pieces join to the text, but too late: each piece must appear as soon as its "
                        f"characters are complete. Expected {want}, got {got}.",
                        f"{text!r}：拼起来是对的，但出来得太晚了：每个字符一凑齐就要输出。应为 {want}，你得到 {got}。")
        return fail(f"{text!r}: expected {want}, got {got}.", f"{text!r}：应为 {want}，你得到 {got}。")
    return passed("Correct: what a chat interface does with the tokens it streams.",
                  "正确：聊天界面流式显示模型输出时，做的正是这件事。")
