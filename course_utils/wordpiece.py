"""BERT's WordPiece tokenizer from scratch (lesson 13): 1. basic tokenization (clean, isolate CJK ideographs, strip
accents, lowercase, split on whitespace and punctuation), 2. greedy longest-match-first pieces per word (``unaffable``
-> ``una ##ffa ##ble``; no match -> ``[UNK]``), as the Rust ``tokenizers`` library (tests/test_pretrained.py)."""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence
from itertools import groupby
from pathlib import Path

from .tokenizers import Tokenizer, _not_a_folder, read_json_file

CLS, SEP, PAD, UNK, MASK = "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
# Written in the text, a special token is that token (case-sensitive), as in transformers: "the [MASK] of France".
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")
# The CJK ideograph blocks BERT treats as one-character words (not kana or hangul: WordPiece handles those).
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
               (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_cjk(ch: str) -> bool:
    return any(lo <= ord(ch) <= hi for lo, hi in _CJK_RANGES)


def is_whitespace(ch: str) -> bool:  # as Rust's char::is_whitespace (its control characters are removed before)
    return ch in "\t\n\r\u2028\u2029" or unicodedata.category(ch) == "Zs"


def is_control(ch: str) -> bool:
    """Categories Cc, Cf, Co, Cs but tab and newlines (whitespace); unassigned (Cn) kept as ``tokenizers`` does."""
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs")


def is_punctuation(ch: str) -> bool:
    """ASCII symbols such as ``$ + < = > ^ ` | ~`` count as punctuation too, as in BERT, besides category P*."""
    return (33 <= ord(ch) <= 126 and not ch.isalnum()) or unicodedata.category(ch).startswith("P")


def strip_accents(text: str) -> str:
    """``"Crème brûlée"`` → ``"Creme brulee"``: decompose (NFD), then drop the non-spacing marks (category Mn)."""
    return "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")


def normalize(text: str, lowercase: bool = True, accents: bool | None = None, cjk: bool = True) -> str:
    """Stage 1a: clean, isolate CJK characters, strip accents (default: when lowercasing), lowercase."""
    text = "".join(" " if is_whitespace(ch) else f" {ch} " if cjk and is_cjk(ch) else ch
                   for ch in text if ch not in "\x00\ufffd" and not is_control(ch))
    if lowercase if accents is None else accents:
        text = strip_accents(text)
    if lowercase:  # one character at a time: str.lower() turns a word-final Σ into ς, the tokenizers library not
        text = "".join(ch.lower() for ch in text)
    return text


def split_punctuation(word: str) -> list[str]:
    """``"don't!"`` → ``["don", "'", "t", "!"]``: every punctuation character is a word of its own."""
    return [piece for punct, run in groupby(word, is_punctuation) for piece in (run if punct else ["".join(run)])]


def load_vocab(path: str | os.PathLike) -> list[str]:
    """The tokens of ``vocab.txt``, in id order (line n holds the token with id n)."""
    _not_a_folder(path, "the vocabulary file inside it, such as", "vocab.txt")
    try:
        with open(path, encoding="utf-8") as f:  # universal newlines: \r\n and \r read as \n
            text = f.read().rstrip("\n")  # final newlines are not empty tokens
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: this vocab.txt is not UTF-8 text ({err.reason} at byte {err.start})") from None
    if not text:
        raise ValueError(f"{path} is empty: a WordPiece vocab.txt has one token per line")
    return text.split("\n")


class WordPieceTokenizer(Tokenizer):
    """BERT tokenizer with the course's Tokenizer protocol; ``encode`` adds [CLS] … [SEP] (add_special_tokens=True)."""

    bos_id = eos_id = None                          # BERT has [CLS] (cls_id) and [SEP] (sep_id) instead
    _OPTIONS = ("lowercase", "strip_accents", "tokenize_chinese_chars", "max_input_chars_per_word",
                "model_max_length", "clean_up_spaces")

    def __init__(self, vocab: Sequence[str], lowercase: bool = True, strip_accents: bool | None = None,
                 tokenize_chinese_chars: bool = True, max_input_chars_per_word: int = 100,
                 model_max_length: int = 512, clean_up_spaces: bool = True):
        if isinstance(vocab, (str, bytes)) or not isinstance(vocab, Sequence):
            raise TypeError("vocab must list the tokens in id order: for vocab.txt use WordPieceTokenizer.from_file")
        self.itos = list(vocab)
        self.stoi = {token: i for i, token in enumerate(self.itos)}  # a duplicate: the last id wins, as in HF
        missing = [t for t in SPECIAL_TOKENS if t not in self.stoi]
        if missing:
            raise ValueError(f"the vocabulary lacks the special token(s) {missing}: is it a BERT vocab.txt?")
        self.lowercase, self.strip_accents = lowercase, strip_accents
        self.tokenize_chinese_chars, self.clean_up_spaces = tokenize_chinese_chars, clean_up_spaces
        self.max_input_chars_per_word, self.model_max_length = max_input_chars_per_word, model_max_length
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (self.stoi[t] for t in SPECIAL_TOKENS)
        self.special_ids = frozenset(self.stoi[t] for t in SPECIAL_TOKENS)

    @property
    def default_max_len(self) -> int:              # encode cuts at the model's length unless told otherwise
        return self.model_max_length

    @classmethod
    def from_file(cls, vocab_path: str | os.PathLike, **kwargs) -> WordPieceTokenizer:
        return cls(load_vocab(vocab_path), **kwargs)

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike) -> WordPieceTokenizer:
        """Read ``vocab.txt`` and, when present, the options of ``tokenizer_config.json`` from ``folder``."""
        folder = Path(folder)
        vocab_path, config_path = folder / "vocab.txt", folder / "tokenizer_config.json"
        if not vocab_path.is_file():
            raise FileNotFoundError(f"no vocab.txt in {folder}: a WordPiece model folder needs one")
        cfg = read_json_file(config_path, "tokenizer configuration") if config_path.is_file() else {}
        if not isinstance(cfg, dict):
            raise ValueError(f"{config_path} must hold a JSON object of options, got a {type(cfg).__name__}")
        if cfg.get("do_basic_tokenize", True) is False:
            raise ValueError(f"{config_path}: do_basic_tokenize=false is not supported")
        flags = {key: cfg.get(key, key != "strip_accents") for key in ("do_lower_case", "strip_accents",
                                                                       "tokenize_chinese_chars")}
        if bad := {k: v for k, v in flags.items() if not isinstance(v, bool) and v is not None}:  # "false" is truthy
            raise ValueError(f"{config_path}: {bad} must be JSON true or false, not a string or number: fix the file")
        options = {"lowercase": bool(flags["do_lower_case"]), "strip_accents": flags["strip_accents"],
                   "tokenize_chinese_chars": bool(flags["tokenize_chinese_chars"])}
        if isinstance(cfg.get("model_max_length"), int) and cfg["model_max_length"] < 10 ** 6:  # not "no limit"
            options["model_max_length"] = cfg["model_max_length"]
        return cls.from_file(vocab_path, **options)

    def __repr__(self) -> str:
        return (f"WordPieceTokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase}, "
                f"model_max_length={self.model_max_length})")

    def basic_tokenize(self, text: str) -> list[str]:
        """Stage 1: normalised words and punctuation, e.g. ``"Héllo, 世界!"`` → ``['hello', ',', '世', '界', '!']``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        text = normalize(text, self.lowercase, self.strip_accents, self.tokenize_chinese_chars)
        return [piece for word in text.split() for piece in split_punctuation(word)]

    def wordpiece(self, word: str) -> list[str]:
        """Stage 2 for one word: greedy longest-match-first pieces, or ``["[UNK]"]``."""
        if len(word) > self.max_input_chars_per_word:
            return [UNK]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):   # the longest vocabulary entry that starts at `start`
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.stoi:
                    break
            else:                                      # nothing matched: the whole word is unknown
                return [UNK]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """Both stages: ``"Unaffable!"`` → ``['una', '##ffa', '##ble', '!']``; in ``"a [MASK] b"`` [MASK] stays one."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        tokens = []
        for i, part in enumerate(_SPECIAL_RE.split(text)):      # plain text, special token, plain text, ...
            tokens += [part] if i % 2 else [p for word in self.basic_tokenize(part) for p in self.wordpiece(word)]
        return tokens

    def _wrap(self, add_special_tokens: bool = True) -> tuple[list[int], list[int]]:
        return ([self.cls_id], [self.sep_id]) if add_special_tokens else ([], [])

    def _join(self, tokens: list[str]) -> str:
        """Pieces joined by spaces, ``##`` pieces glued on, (``clean_up_spaces``) no space before ``. , ! ?``."""
        text = " ".join(tokens).replace(" ##", "").strip()
        if self.clean_up_spaces:
            for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                                  (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
                text = text.replace(before, after)
        return text
