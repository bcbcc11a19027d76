"""Answers to the exercises of lesson 02, for tests/test_exercises.py: every exercise with a correct answer, a
wrong one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import dataclasses
import math

import torch
from exercise_answer import Answer

import course_utils
from course_lab.lessons import l02_positional as l02


def _omega(d_model):
    return 1 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def _shift_back(v, k):
    return l02.shift_matrix(k, v.shape[-1]).T @ v


def _shift_back_by_table_lookup(v, k):
    table = course_utils.sinusoidal_encoding(200, v.shape[-1], dtype=torch.float64)
    pos = int((table @ v).argmax())                          # the row most like v: its position
    return table[pos - k]


def _rotate(x, k):
    omega = _omega(x.shape[-1]).to(x.dtype)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([c * even + s * odd, -s * even + c * odd], dim=-1).flatten(-2)


def _rotate_backwards(x, k):
    return _rotate(x, -k)


L02 = [
    Answer("check_wavelengths", lambda d: 2 * math.pi / _omega(d),
           wrong=lambda d: 2 * math.pi * 10000 ** (torch.arange(d // 2, dtype=torch.float64) / d),   # i, not 2i
           shortcut=lambda d: 2 * math.pi / l02.inv_freq_exp(d, torch.float64), says="lesson's own frequencies"),
    Answer("check_shift_back", _shift_back, wrong=lambda v, k: l02.shift_matrix(k, v.shape[-1]) @ v,   # forward
           shortcut=_shift_back_by_table_lookup, says="builds the positional table"),
    Answer("check_rotate", _rotate, wrong=_rotate_backwards,
           shortcut=lambda x, k: x @ l02.shift_matrix(k, x.shape[-1]).T, says="builds the d × d matrix"),
]

ANSWERS = {"l02_positional": L02}


# --- right answers in other styles (issue 39 §1): each must pass -----------------------------------------------

def _shift_back_pairwise(v, k):                   # M_kᵀ = M_{-k}, pair by pair, no matrix
    omega = _omega(v.shape[-1]).to(v.dtype)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    even, odd = v[..., 0::2], v[..., 1::2]
    return torch.stack([c * even - s * odd, s * even + c * odd], dim=-1).flatten(-2)


def _rotate_complex(x, k):                        # each pair as a complex number, times e^{-ikω}
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    angle = -k * _omega(x.shape[-1])
    return torch.view_as_real(z * torch.polar(torch.ones_like(angle), angle).to(z.dtype)).flatten(-2)


_RIGHT = {"check_wavelengths": (lambda d: 2 * math.pi * 10000 ** (torch.arange(0, d, 2) / d),),
          "check_shift_back": (_shift_back_pairwise, lambda v, k: l02.shift_matrix(-k, v.shape[-1]) @ v),
          "check_rotate": (_rotate_complex,)}
L02[:] = [dataclasses.replace(a, right=_RIGHT.get(a.check, ())) for a in L02]
