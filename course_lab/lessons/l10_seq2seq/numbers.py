"""Lesson 10 · the data: English number words (``num2words``) and Chinese numerals (``cn2an``), the split by
length and the two fixed-vocabulary tokenizers. Shared by the lesson module and its checks (checks.py imports
this module, never the lesson's ``__init__``)."""

from __future__ import annotations

import random

import numpy as np

from course_utils.tokenizers import CharTokenizer, WordTokenizer

try:
    import cn2an
    from num2words import num2words
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "Lesson 10 needs the packages num2words and cn2an (number words and Chinese numerals): "
        "pip install num2words cn2an   (or, from the repository root: pip install -e \".[lessons]\")"
    ) from err

MAX_NUMBER = 99_999          # the lesson's range: 0 .. 99,999 (English "… thousand" meets Chinese 万)
LARGEST_TEXT = 999_999_999   # source_text / target_text accept more, to probe numbers outside the range

# Every word num2words uses below a million, plus the two punctuation tokens: the whole source vocabulary.
SOURCE_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand and"
).split() + [",", "-"]
TARGET_CHARS = "零一二三四五六七八九十百千万"


def _digit_words() -> dict[str, set[str]]:
    """The English words each Chinese digit character can come from: 四 ← four, forty, fourteen (一 ← ten too:
    10010 is 一万零一十)."""
    units = "one two three four five six seven eight nine".split()
    tens = "ten twenty thirty forty fifty sixty seventy eighty ninety".split()
    teens = "eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
    words = {c: {units[i], tens[i], teens[i]} for i, c in enumerate("一二三四五六七八九")}
    return words


DIGIT_WORDS = _digit_words()


# ------------------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------------------

def _check_number(n, largest: int = LARGEST_TEXT) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"expected a whole number (int), got {n!r} ({type(n).__name__})")
    n = int(n)
    if not 0 <= n <= largest:
        raise ValueError(f"the number must be between 0 and {largest:,}, got {n:,}")
    return n


def source_text(n: int) -> str:
    """English words for ``n``: ``312`` → ``"three hundred and twelve"`` (British style, with "and")."""
    return num2words(_check_number(n))


def target_text(n: int) -> str:
    """Chinese numerals for ``n``: ``312`` → ``"三百一十二"``, ``20305`` → ``"二万零三百零五"``."""
    return cn2an.an2cn(_check_number(n))


def number_length(n: int) -> int:
    """Number of decimal digits: 0..9 → 1, 10..99 → 2, ..., 10000..99999 → 5."""
    return len(str(_check_number(n)))


def split_numbers(n_test_per_length: int = 100, n_train_per_length: int = 8000, test_lengths=(3, 4, 5),
                  max_digits: int = 5, seed: int = 0) -> tuple[list[int], list[int]]:
    """Split ``0 .. 10**max_digits - 1`` *by number*: (training numbers, held-out test numbers), disjoint.

    The test set has ``n_test_per_length`` random numbers of each length in ``test_lengths``. Training gets, for
    every length, the numbers not held out, at most ``n_train_per_length`` of them (a random sample). Numbers
    of one and two digits are never held out: they are the words everything else is built from.
    """
    if n_test_per_length < 1 or n_train_per_length < 1:
        raise ValueError("n_test_per_length and n_train_per_length must be >= 1")
    if not set(test_lengths) <= set(range(1, max_digits + 1)):
        raise ValueError(f"test_lengths={tuple(test_lengths)} must be digit counts between 1 and {max_digits}")
    rng = random.Random(seed)
    train, test = [], []
    for length in range(1, max_digits + 1):
        numbers = range(0 if length == 1 else 10 ** (length - 1), 10 ** length)
        held = rng.sample(numbers, n_test_per_length) if length in test_lengths else []
        if len(held) >= len(numbers):
            raise ValueError(f"holding out {n_test_per_length} of the {len(numbers)} numbers with {length} "
                             "digits leaves none to train on: lower n_test_per_length")
        held_set = set(held)
        rest = [n for n in numbers if n not in held_set]
        train += sorted(rng.sample(rest, min(n_train_per_length, len(rest))))
        test += held
    return train, test


def make_tokenizers() -> tuple[WordTokenizer, CharTokenizer]:
    """(source tokenizer over English words, target tokenizer over Chinese characters), fixed vocabularies."""
    return WordTokenizer(SOURCE_WORDS), CharTokenizer(list(TARGET_CHARS))
