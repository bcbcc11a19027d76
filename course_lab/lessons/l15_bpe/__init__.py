"""Lesson 15 · byte-pair encoding: demo sentences, readable tokens, the measured GPT result, widgets, exercise checks.

* :data:`DEMO` (EN / ZH sentence pairs), :func:`readable` (a token's bytes as text, a cut character as ``<e4>``),
  :func:`token_costs` (tokens per sentence of a list of texts under a tokenizer or a splitting function);
* :func:`hf_bpe`: the reference, Hugging Face ``tokenizers``' byte-level BPE trainer (optional package);
* :func:`load_bpe_vs_char` (``course_lab/assets/results/cpu/bpe_vs_char.json``, written by
  ``benchmarks/train_bpe_vs_char.py``);
* :func:`build_merge_widget` (step through the merges on a sentence), :func:`build_cost_widget` (tokens per sentence
  as the vocabulary grows, English against Chinese) and the ``check_*`` functions of the exercises.

The BPE trainer and encoder the lesson teaches are written in the notebook; ``course_utils.bpe`` is the fast one."""

from __future__ import annotations

import json

from course_utils.bpe import BPETokenizer
from course_utils.tokenizers import SPECIAL_TOKENS

from ... import i18n
from ...assets import asset
from ...widgets import LessonWidget, dropdown, slider
from .checks import check_best_pair as check_best_pair
from .checks import check_encode_chunk as check_encode_chunk
from .checks import check_stream_decode as check_stream_decode

DEMO = [
    ("The cat sat on the mat.", "猫坐在垫子上。"),
    ("I don't know what to do.", "我不知道该怎么办。"),
    ("We are going to school tomorrow.", "我们明天去学校。"),
]
COLORS = ["#cfe2f3", "#fce5cd", "#d9ead3", "#ead1dc", "#fff2cc", "#d0e0e3"]


def readable(raw: bytes) -> str:
    """A token's bytes for the eye: UTF-8 text as itself, a byte that does not finish a character as ``<e4>``."""
    if not isinstance(raw, bytes):
        raise TypeError(f"readable expects bytes, got {type(raw).__name__}: use tok.token_bytes(i)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(chr(b) if b < 128 else f"<{b:02x}>" for b in raw)


def token_costs(texts, split) -> float:
    """Mean tokens per text; ``split`` is a tokenizer (``encode``) or a function text -> sequence."""
    texts = list(texts)
    if not texts:
        raise ValueError("token_costs needs at least one text")
    fn = split.encode if hasattr(split, "encode") else split
    return sum(len(fn(t)) for t in texts) / len(texts)


def load_bpe_vs_char() -> dict:
    """The measured GPT comparison (bits per character, per seed) written by ``benchmarks/train_bpe_vs_char.py``."""
    with open(asset("results/cpu/bpe_vs_char.json"), encoding="utf-8") as f:
        return json.load(f)


def hf_bpe(texts, vocab_size: int, *, gpt2_split: bool = False):
    """Hugging Face ``tokenizers``' byte-level BPE trainer (the reference implementation), with the course's special
    tokens and the 256-byte alphabet: ``(tokenizer, merges)``, or ``None`` when ``tokenizers`` is not installed.
    ``gpt2_split=False``: no split of its own (pass our chunks as the texts); True: its GPT-2 regex."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        return None
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=gpt2_split)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    hf.train_from_iterator(texts, trainer)
    return hf, [tuple(m) for m in json.loads(hf.to_str())["model"]["merges"]]


def _draw_tokens(ax, rows: list[tuple[str, list[str]]]) -> None:
    """One line of coloured boxes per sentence, a box per token."""
    from ...fonts import find_cjk_font

    cjk = find_cjk_font()  # token boxes show Chinese in the English notebook too
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(-len(rows), 0.6)
    for r, (label, pieces) in enumerate(rows):
        ax.text(0, -r + 0.25, label, fontsize=10, color="#555")
        x = 0.0
        for k, piece in enumerate(pieces):
            shown = piece.replace(" ", "·").replace("\n", "\\n") or "-"
            width = 0.012 + 0.0125 * sum(2 if ord(c) > 0x2E80 else 1 for c in shown)
            if x + width > 1:
                break
            ax.text(x, -r - 0.25, shown, fontsize=11, family="monospace" if all(ord(c) < 128 for c in shown)
                    else cjk, bbox=dict(boxstyle="round,pad=0.2", fc=COLORS[k % len(COLORS)], ec="#999"))
            x += width + 0.006


def build_merge_widget(tok: BPETokenizer, sentences=None, n_merges: int = 0) -> LessonWidget:
    """A slider over the number of merges applied: the sentences' tokens and their count, and the last merge."""
    import matplotlib.pyplot as plt

    from ...fonts import find_cjk_font

    if not isinstance(tok, BPETokenizer):
        raise TypeError(f"build_merge_widget needs a BPETokenizer, got {type(tok).__name__}")
    sentences = [s for pair in DEMO for s in pair][:4] if sentences is None else list(sentences)
    prefixes: dict[int, BPETokenizer] = {}

    def render(n_merges):
        sub = prefixes.setdefault(n_merges, BPETokenizer.from_merges(tok.merges[:n_merges]))
        rows, counts = [], []
        for s in sentences:
            pieces = [readable(sub.token_bytes(i)) for i in sub.encode(s)]
            counts.append(len(pieces))
            rows.append((i18n.pick({"en": f"{len(pieces)} tokens, {len(s.encode())} bytes",
                                    "zh": f"{len(pieces)} 个词元，{len(s.encode())} 个字节"}), pieces))
        fig, ax = plt.subplots(figsize=(10, 0.9 * len(sentences) + 0.6))
        _draw_tokens(ax, rows)
        last = "–" if not n_merges else " + ".join(readable(bytes(sub.token_bytes(sub.stoi[t])))
                                                   for t in tok.merges[n_merges - 1])
        ax.set_title(i18n.pick({"en": f"{n_merges} merges; the last one: {last}",
                                "zh": f"已做 {n_merges} 次合并；最后一次：{last}"}), fontsize=12,
                     family=None if last.isascii() else find_cjk_font())
        return fig, {"n_merges": n_merges, "tokens": counts, "last_merge": last}

    controls = {"n_merges": slider("n_merges", 0, len(tok.merges), 1, int(n_merges),
                                   label={"en": "merges applied", "zh": "已应用的合并次数"})}
    return LessonWidget(controls, render, title={"en": "Byte-pair encoding, one merge at a time",
                                                 "zh": "字节对编码：一次合并一步"})


def build_cost_widget(tokenizers: dict[str, BPETokenizer], pairs, vocab_size: int = 1000) -> LessonWidget:
    """Tokens per sentence of held-out ``pairs`` (english, chinese) as the vocabulary grows, for the tokenizer
    trained on English, Chinese or both (``tokenizers``: {"en": ..., "zh": ..., "both": ...}): the first merges of a
    trained BPE are the BPE of a smaller vocabulary."""
    import matplotlib.pyplot as plt

    pairs = list(pairs)
    biggest = min(len(t) for t in tokenizers.values())
    names = {"en": {"en": "trained on English", "zh": "只用英文训练"},
             "zh": {"en": "trained on Chinese", "zh": "只用中文训练"},
             "both": {"en": "trained on both", "zh": "中英文一起训练"}}
    sizes = sorted({261, *range(261, biggest + 1, max(1, (biggest - 261) // 8)), biggest})
    cache: dict[tuple[str, int], tuple[float, float]] = {}

    def cost(which: str, size: int) -> tuple[float, float]:
        if (which, size) not in cache:
            sub = BPETokenizer.from_merges(tokenizers[which].merges[: size - 261])
            cache[which, size] = (token_costs((p[0] for p in pairs), sub), token_costs((p[1] for p in pairs), sub))
        return cache[which, size]

    def render(trained_on, vocab_size):
        en, zh = cost(trained_on, vocab_size)
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6))
        ax.bar([i18n.pick({"en": "English", "zh": "英文"}), i18n.pick({"en": "Chinese", "zh": "中文"})], [en, zh],
               color=["#4a86e8", "#e06666"])
        ax.set_ylabel(i18n.pick({"en": "tokens per sentence", "zh": "每句词元数"}))
        ax.set_title(i18n.pick({"en": f"vocabulary {vocab_size}: Chinese/English = {zh / en:.2f}",
                                "zh": f"词表 {vocab_size}：中文/英文 = {zh / en:.2f}"}), fontsize=11)
        curve = [cost(trained_on, s) for s in sizes]
        bx.plot(sizes, [c[0] for c in curve], "o-", color="#4a86e8", label=i18n.pick({"en": "English", "zh": "英文"}))
        bx.plot(sizes, [c[1] for c in curve], "s-", color="#e06666", label=i18n.pick({"en": "Chinese", "zh": "中文"}))
        bx.axvline(vocab_size, color="#999", ls="--")
        bx.set_xlabel(i18n.pick({"en": "vocabulary size", "zh": "词表大小"}))
        bx.legend()
        fig.tight_layout()
        return fig, {"en": en, "zh": zh, "ratio": zh / en, "vocab_size": vocab_size}

    controls = {
        "trained_on": dropdown("trained_on", [(names[k], k) for k in tokenizers], "both",
                               label={"en": "BPE", "zh": "BPE"}),
        "vocab_size": slider("vocab_size", 261, biggest, 1, min(max(261, int(vocab_size)), biggest),
                             label={"en": "vocabulary size", "zh": "词表大小"}),
    }
    return LessonWidget(controls, render, title={"en": "What a tokenizer costs each language",
                                                 "zh": "分词器让每种语言付出多少"})
