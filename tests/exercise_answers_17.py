"""Answers to the exercises of lesson 17, for tests/test_exercises.py: every exercise with a correct answer, a wrong
one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import math

import torch
from exercise_answer import Answer
from torch import nn

from course_utils import lora


def _count(d, n, r, c):
    return n * 4 * r * (d + d) + d * c + c


class _LoRA(nn.Module):
    def __init__(self, base, r, alpha):
        super().__init__()
        self.base, self.scale = base.requires_grad_(False), alpha / r
        self.A = nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(base.in_features))
        self.B = nn.Parameter(torch.zeros(base.out_features, r))

    def forward(self, x):
        return self.base(x) + self.scale * (x @ self.A.T) @ self.B.T


class _LoRAWithLinears(nn.Module):              # another right answer: A and B as the weights of two nn.Linear
    def __init__(self, base, r, alpha):
        super().__init__()
        base.requires_grad_(False)
        self.base, self.r, self.alpha = base, r, alpha
        self.down, self.up = nn.Linear(base.in_features, r, bias=False), nn.Linear(r, base.out_features, bias=False)
        nn.init.zeros_(self.up.weight)
        self.A, self.B = self.down.weight, self.up.weight

    def forward(self, x):
        return self.base(x) + self.up(self.down(x)) * (self.alpha / self.r)


class _LoRAScaleSwapped(_LoRA):                # r / α instead of α / r
    def __init__(self, base, r, alpha):
        super().__init__(base, r, alpha)
        self.scale = r / alpha


class _LibraryLoRA(nn.Module):                 # the course's finished LoRA under the exercise's names
    def __init__(self, base, r, alpha):
        super().__init__()
        self.inner = lora.LoRALinear(base, r, alpha)
        self.A, self.B = self.inner.lora_A, self.inner.lora_B

    def forward(self, x):
        return self.inner(x)


def _merge(layer):
    out = nn.Linear(layer.base.in_features, layer.base.out_features, bias=layer.base.bias is not None)
    with torch.no_grad():
        out.weight.copy_(layer.base.weight + layer.scale * layer.lora_B @ layer.lora_A)
        if layer.base.bias is not None:
            out.bias.copy_(layer.base.bias)
    return out


def _merge_functional(layer):                  # another right answer: build it from the tensors
    w = layer.base.weight.detach() + layer.scale * (layer.lora_B @ layer.lora_A).detach()
    out = nn.Linear(w.shape[1], w.shape[0])
    out.weight, out.bias = nn.Parameter(w.clone()), nn.Parameter(layer.base.bias.detach().clone())
    return out


def _merge_without_scale(layer):
    out = nn.Linear(layer.base.in_features, layer.base.out_features)
    with torch.no_grad():
        out.weight.copy_(layer.base.weight + layer.lora_B @ layer.lora_A)
        out.bias.copy_(layer.base.bias)
    return out


def _merge_by_library(layer):
    import copy
    merged = copy.deepcopy(layer)
    merged.merge()
    return merged.base


def _which(steps):
    return set() if steps == 0 else {"B"} if steps == 1 else {"A", "B"}


def _which_by_experiment(steps):               # runs the course's LoRA instead of predicting
    layer = lora.LoRALinear(nn.Linear(3, 3), r=1, alpha=1.0)
    return _which(steps) if layer is not None else set()


L17 = [
    Answer("check_lora_count", _count,
           wrong=lambda d, n, r, c: n * 4 * r * (d + d),                                  # the head forgotten
           shortcut=lambda d, n, r, c: lora.count_parameters(nn.Linear(1, 1))[0] * 0 + _count(d, n, r, c),
           says="course_utils.lora",
           also=((lambda d, n, r, c: n * 4 * r * d + d * c + c, "TWO matrices"),
                 (lambda d, n, r, c: n * 4 * d * d + d * c + c, "frozen weights"))),
    Answer("check_lora_layer", _LoRA, wrong=_LoRAScaleSwapped, shortcut=_LibraryLoRA, says="course_utils.lora"),
    Answer("check_merge", _merge, wrong=_merge_without_scale, shortcut=_merge_by_library, says="course_utils.lora"),
    Answer("check_which_change", _which, wrong=lambda steps: set() if steps == 0 else {"A", "B"},
           shortcut=_which_by_experiment, says="Predict, do not run"),
]

ANSWERS = {"l17_fine_tuning": L17}

# Other right answers each check must accept (tests/test_lesson_17.py).
ALSO_RIGHT = {"check_lora_layer": (_LoRAWithLinears,), "check_merge": (_merge_functional,),
              "check_which_change": (lambda steps: "" if steps == 0 else "b" if steps == 1 else ["a", "B"],)}
