"""Answers to the exercises of lessons 00-07, for tests/test_exercises.py: per lesson, every exercise with a correct
answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids.

Each check must accept the first and reject the other two; for the shortcut it must also print the teaching message
``says`` (in English; the Chinese message is printed by the same branch).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from exercise_answers_08_14 import Answer

import course_utils
import course_utils.train

# --- lesson 00 -------------------------------------------------------------------------------------------------


def _device():
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


L00 = [
    Answer("check_device_choice", _device, wrong=lambda: "cpu",
           shortcut=lambda: course_utils.train.pick_device().type, says="pick_device"),
    Answer("check_mha_parameter_count", lambda d, h: 4 * d * d + 4 * d, wrong=lambda d, h: 4 * d * d,
           shortcut=lambda d, h: sum(p.numel() for p in course_utils.MultiHeadAttention(d, h).parameters()),
           says="the formula"),
    Answer("check_attention_memory", lambda b, h, t: 4 * b * h * t * t, wrong=lambda b, h, t: 4 * b * h * t,
           shortcut=lambda b, h, t: 4 * b * h * t * t if course_utils.MultiHeadAttention(8, h) else 0,
           says="from the shape"),
]

ANSWERS = {"l00_welcome": L00}
