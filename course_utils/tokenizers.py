"""Character- and word-level tokenizers (lessons 9-12) and the tokenizer protocol WordPiece shares. Vocabularies
start with ``<pad>`` 0 (so ``torch.zeros`` is all padding), ``<unk>`` 1, ``<bos>`` 2, ``<eos>`` 3, ``<mask>`` 4."""

from __future__ import annotations

import importlib
import json
import numbers
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import torch

from .validation import check_bool, check_int

PAD, UNK, BOS, EOS, MASK = "<pad>", "<unk>", "<bos>", "<eos>", "<mask>"
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS, MASK)
PAD_ID, UNK_ID, BOS_ID, EOS_ID, MASK_ID = range(len(SPECIAL_TOKENS))

# CJK ideographs, kana and hangul: Chinese has no spaces between words, so each character is one token.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# a CJK character | a word (letters/digits, with inner apostrophes: don't) | any other visible character
_WORD_RE = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])\w)+(?:'(?:(?![{_CJK}])\w)+)*|\S")
_IS_CJK = re.compile(rf"[{_CJK}]")


def pad_batch(seqs: Sequence[Sequence[int] | torch.Tensor], pad_id: int = PAD_ID,
              max_len: int | None = None) -> torch.Tensor:
    """Stack sequences of ids into a ``(B, T)`` LongTensor right-padded with ``pad_id``; ``T`` is the longest
    sequence, or exactly ``max_len`` when given (longer sequences are cut at the end)."""
    rows = []  # each (T_i,) int64; floats, bools, strings and nested rows are refused, not cast
    for i, seq in enumerate(seqs):
        try:
            bools = isinstance(seq, (list, tuple)) and any(isinstance(v, bool) for v in seq)  # True would become 1
            row = None if isinstance(seq, (str, bytes)) or bools else torch.as_tensor(seq)
        except (TypeError, ValueError, RuntimeError):
            row = None
        if row is None or row.dim() != 1 or (row.numel() and (row.dtype == torch.bool or row.is_floating_point()
                                                              or row.is_complex())):
            raise TypeError(f"pad_batch row {i} must be a flat list of int ids, got {type(seq).__name__} {seq!r:.40}: "
                            "encode text with a tokenizer, round ids yourself (int(x)), one sequence per row")
        rows.append(row.long())
    width = max((len(r) for r in rows), default=0) if max_len is None else check_int(max_len, "max_len", 0)
    out = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : min(len(row), width)] = row[:width]
    return out


def _not_a_folder(path, want: str, file: str = "tokenizer.json") -> None:
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder: pass {want} {os.path.join(path, file)}")


def read_json_file(path: str | os.PathLike, what: str = "JSON file"):
    """``json.load`` that names the file when it is not UTF-8 or not valid JSON (a truncated download, say)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: this {what} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: this {what} is not valid JSON ({err.msg}, line {err.lineno} column "
                         f"{err.colno}): is the file complete?") from None


class Tokenizer:
    """The protocol of the course's tokenizers (character, word, WordPiece): ``itos`` / ``stoi``, the special ids,
    ``encode(text, *, max_len=None, <flags>) -> ids`` (``max_len`` counts the special tokens), ``decode(ids) -> text``,
    ``encode_batch(texts) -> (B, T)`` right-padded with ``pad_id``. Subclasses define :meth:`tokenize` (text ->
    tokens), ``_join`` (tokens -> text) and ``_wrap`` (the special ids an encoding starts and ends with)."""

    pad_id, unk_id, bos_id, eos_id, mask_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID, MASK_ID
    special_ids = frozenset(range(len(SPECIAL_TOKENS)))
    default_max_len: int | None = None  # encode's max_len when none is given (WordPiece: the model's length)
    _OPTIONS: tuple[str, ...] = ()  # constructor options that save() stores besides the tokens
    _KINDS: dict[str, type] = {}  # every subclass by name, for from_dict (each registers itself when imported)
    _MODULES = {"WordPieceTokenizer": "wordpiece", "BPETokenizer": "bpe"}  # imported by from_dict when needed

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        Tokenizer._KINDS[cls.__name__] = cls

    def __init__(self, tokens: Iterable[str]):
        if isinstance(tokens, str) or not isinstance(tokens, Iterable):
            raise TypeError(f"Tokenizer takes a list of token strings, got {type(tokens).__name__} {tokens!r:.40}: "
                            "build one from text with from_texts(...)")
        tokens = list(tokens)
        if bad := [t for t in tokens if not isinstance(t, str)][:1]:
            raise TypeError(f"tokens must be str, got {type(bad[0]).__name__} {bad[0]!r:.40}: pass token strings, "
                            "not ids (ids are positions in this list)")
        if tokens[: len(SPECIAL_TOKENS)] != list(SPECIAL_TOKENS):
            tokens = list(SPECIAL_TOKENS) + [t for t in tokens if t not in SPECIAL_TOKENS]
        if len(set(tokens)) != len(tokens):
            raise ValueError("the vocabulary has duplicate tokens: each token must appear once")
        self.itos: list[str] = tokens  # id -> token
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(tokens)}  # token -> id

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def __len__(self) -> int:
        return len(self.itos)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"

    def token_to_id(self, token: str) -> int:
        return self.stoi.get(token, self.unk_id)

    def id_to_token(self, i: int) -> str:
        return self.itos[self._check_ids([i])[0]]

    def tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        return [self.token_to_id(t) for t in tokens]

    def ids_to_tokens(self, ids: Iterable[int] | torch.Tensor) -> list[str]:
        return [self.itos[i] for i in self._check_ids(ids)]

    def tokenize(self, text: str) -> list[str]:
        raise NotImplementedError  # pragma: no cover - defined by every subclass

    def _wrap(self, add_bos: bool = False, add_eos: bool = False) -> tuple[list[int], list[int]]:
        return [self.bos_id] * add_bos, [self.eos_id] * add_eos

    def encode(self, text: str, *, max_len: int | None = None, **flags) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}: use encode_batch for a list")
        head, tail = self._wrap(**flags)
        ids = self.tokens_to_ids(self.tokenize(text))
        max_len = self.default_max_len if max_len is None else max_len
        if max_len is not None:
            room = len(head) + len(tail)
            if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < max(room, 1):
                raise ValueError(f"max_len must be an int >= {max(room, 1)} (room for special tokens), got {max_len!r}")
            ids = ids[: max_len - room]
        return head + ids + tail

    def decode(self, ids: Iterable[int] | torch.Tensor, *, skip_special: bool = True) -> str:
        """ids -> text. ``skip_special`` drops the special tokens but ``unk``: it stands for a real piece of text."""
        hidden = self.special_ids - {self.unk_id} if skip_special else set()
        return self._join([self.itos[i] for i in self._check_ids(ids) if i not in hidden])

    def _check_ids(self, ids) -> list[int]:
        if isinstance(ids, (str, bytes)) or not isinstance(ids, (Iterable, torch.Tensor)):
            raise TypeError(f"decode expects a list or 1-D tensor of token ids, got {type(ids).__name__} {ids!r:.30}")
        if isinstance(ids, torch.Tensor) and ids.dim() != 1:
            raise ValueError(f"decode expects one sequence (1-D), got shape {tuple(ids.shape)}: decode each row")
        checked = []
        for i in ids.tolist() if isinstance(ids, torch.Tensor) else ids:  # a str gives characters: refused
            i = i.tolist() if isinstance(i, torch.Tensor) else i  # a 0-d tensor -> a Python number
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):  # numpy integers pass, floats do not
                raise TypeError(f"token ids must be integers, got {i!r} ({type(i).__name__})")
            j = int(i)
            if not 0 <= j < self.vocab_size:
                raise ValueError(f"token id {j} is outside the vocabulary (vocab_size={self.vocab_size}, ids in "
                                 f"[0, {self.vocab_size - 1}]): decode with the tokenizer that made the ids")
            checked.append(j)
        return checked

    def encode_batch_with_mask(self, texts: Sequence[str], *, max_len: int | None = None,
                               pad_to: int | None = None, **flags) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ids (B, T) long, keep (B, T) bool)``, right-padded, True at real tokens; T: the longest, or ``pad_to``."""
        if isinstance(texts, str):
            raise TypeError("encode_batch expects a list of texts; for one text use encode(text) or [text]")
        rows = [self.encode(t, max_len=max_len, **flags) for t in texts]
        width = max((len(r) for r in rows), default=0)
        if pad_to is not None:
            if check_int(pad_to, "pad_to", 0) < width:
                raise ValueError(f"pad_to={pad_to} is shorter than the longest encoded text ({width} tokens): "
                                 f"pass max_len={pad_to} to truncate, or a larger pad_to")
            width = pad_to
        keep = torch.arange(width)[None, :] < torch.tensor([len(r) for r in rows], dtype=torch.long)[:, None]
        return pad_batch(rows, self.pad_id, width), keep  # (B, T) ids, (B, T) True = real token

    def encode_batch(self, texts: Sequence[str], *, max_len: int | None = None, pad_to: int | None = None,
                     **flags) -> torch.Tensor:
        """Several texts as one ``(B, T)`` LongTensor right-padded with ``pad_id``: see encode_batch_with_mask."""
        return self.encode_batch_with_mask(texts, max_len=max_len, pad_to=pad_to, **flags)[0]

    def pad_batch(self, seqs, max_len: int | None = None) -> torch.Tensor:  # the function, with our pad id
        return pad_batch(seqs, self.pad_id, max_len)

    # --- persistence (a trained model is useless without the exact vocabulary it was trained with)
    def to_dict(self) -> dict:
        return {"type": type(self).__name__, "tokens": self.itos, **{k: getattr(self, k) for k in self._OPTIONS}}

    @staticmethod
    def from_dict(d: dict) -> Tokenizer:
        kinds = Tokenizer._KINDS
        if isinstance(d, dict) and d.get("type") in Tokenizer._MODULES and d["type"] not in kinds:
            importlib.import_module(f".{Tokenizer._MODULES[d['type']]}", __package__)  # registers the class
        if not isinstance(d, dict) or d.get("type") not in kinds:
            raise ValueError(f"unknown tokenizer type {d.get('type') if isinstance(d, dict) else d!r}: "
                             f"expected one of {sorted(set(kinds) | set(Tokenizer._MODULES))}")
        cls, tokens = kinds[d["type"]], d.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            found = "no 'tokens' list" if tokens is None else f"a 'tokens' entry of type {type(tokens).__name__}"
            raise ValueError(f"not a saved tokenizer: the dict has {found} ('tokens' must be a list of strings, as "
                             "Tokenizer.to_dict() writes it)")
        for option in (k for k in d if k not in ("type", "tokens", *cls._OPTIONS)):
            others = [name for name, kind in sorted(kinds.items()) if option in kind._OPTIONS]
            takes = f" ({' and '.join(others)} {'does' if len(others) == 1 else 'do'})" if others else ""
            raise ValueError(f"{cls.__name__} takes no option {option!r}{takes}: remove it, or set 'type' to the "
                             f"tokenizer the dict was saved from ({cls.__name__}'s: {list(cls._OPTIONS) or 'none'})")
        return cls(tokens, **{k: v for k, v in d.items() if k not in ("type", "tokens")})

    def save(self, path: str | os.PathLike) -> None:
        _not_a_folder(path, "a file name such as")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, ensure_ascii=False, indent=0)

    @staticmethod
    def load(path: str | os.PathLike) -> Tokenizer:
        _not_a_folder(path, "the tokenizer file inside it, such as")
        d = read_json_file(path, "tokenizer file")
        try:
            return Tokenizer.from_dict(d)
        except (ValueError, TypeError, KeyError) as err:
            raise ValueError(f"{path}: not a tokenizer saved by Tokenizer.save ({err})") from None


class CharTokenizer(Tokenizer):
    """One token per character (Unicode code point): tiny vocabulary, long sequences, never out of words."""

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """Vocabulary = the 5 special tokens + every distinct character of ``text``, in sorted order."""
        if not isinstance(text, str):
            raise TypeError(f"from_text expects one str, got {type(text).__name__}: join a list with ''.join")
        return cls(sorted(set(text)))

    def tokenize(self, text: str) -> list[str]:
        return list(text)

    def _join(self, tokens: list[str]) -> str:
        return "".join(tokens)


class WordTokenizer(Tokenizer):
    """Words, numbers and punctuation marks are tokens, a CJK character too: ``"Don't stop!"`` -> ``["don't",
    "stop", "!"]`` (lowercase=True). Decoding puts one space between tokens (none between CJK characters)."""

    _OPTIONS = ("lowercase",)

    def __init__(self, tokens: Iterable[str], lowercase: bool = True):
        super().__init__(tokens)
        self.lowercase = check_bool(lowercase, "lowercase")  # a string "false" would be truthy

    @classmethod
    def from_texts(cls, texts: Iterable[str], min_freq: int = 1, max_size: int | None = None,
                   lowercase: bool = True) -> WordTokenizer:
        """Build the vocabulary from ``texts``: tokens seen at least ``min_freq`` times, most frequent first
        (ties alphabetical), at most ``max_size`` entries *including* the 5 special tokens."""
        if isinstance(texts, str):
            raise TypeError("from_texts expects a list of strings, got one str: wrap it as [text]")
        texts = list(texts) if isinstance(texts, Iterable) else [texts]
        if bad := [t for t in texts if not isinstance(t, str)][:1]:
            raise TypeError(f"from_texts expects a list of strings, got a {type(bad[0]).__name__} {bad[0]!r:.40}")
        check_int(min_freq, "min_freq", 1)
        if max_size is not None:  # room for the special tokens at least
            check_int(max_size, "max_size", len(SPECIAL_TOKENS))
        splitter = cls([], lowercase=lowercase)
        counts = Counter(tok for text in texts for tok in splitter.tokenize(text))
        kept = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(kept[: None if max_size is None else max_size - len(SPECIAL_TOKENS)], lowercase=lowercase)

    def tokenize(self, text: str) -> list[str]:
        return _WORD_RE.findall(text.lower() if self.lowercase else text)

    def _join(self, tokens: list[str]) -> str:  # a space between tokens, but not between two CJK characters
        return "".join(tokens[:1] + [" " * (not (_IS_CJK.fullmatch(a) and _IS_CJK.fullmatch(b))) + b
                                     for a, b in zip(tokens, tokens[1:])])
