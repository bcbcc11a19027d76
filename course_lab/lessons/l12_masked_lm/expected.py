"""Lesson 12 · what the exercise checks compute for themselves, apart from the lesson's cells: the shares of the two
corruption recipes (exercise 1) and the count of the context table with back-off (exercise 4), plus the stand-in
data when exercise 4's check is called without the notebook's. Shared by checks.py only; it imports nothing of the
package."""

from __future__ import annotations

import torch

from course_utils.mlm import IGNORE_INDEX

from ...exercises import as_number


def _one_uniform(p_mask: float, p_random: float) -> tuple[float, float, float]:
    """One uniform u per selected token: u < p_mask → <mask>, then the next p_random of [0, 1) → random."""
    return p_mask, p_random, 1.0 - p_mask - p_random


def _two_draws(p_mask: float, p_random: float) -> tuple[float, float, float]:
    """Mask with probability p_mask; a second, independent draw randomises p_random of the rest."""
    return p_mask, (1.0 - p_mask) * p_random, (1.0 - p_mask) * (1.0 - p_random)


def _three_numbers(got) -> tuple[list[float] | None, tuple[str, str] | None]:
    """``(values, None)`` for three finite numbers (a tuple or list of numbers or 0-d tensors, or a tensor or NumPy
    array of three values), else ``(None, why)``."""
    if isinstance(got, torch.Tensor):
        got = got.detach().flatten().tolist()
    elif hasattr(got, "shape") and hasattr(got, "reshape") and hasattr(got, "tolist"):    # a NumPy array
        got = got.reshape(-1).tolist()
    if not isinstance(got, (tuple, list)):
        kind = type(got).__name__
        return None, (f"expected three numbers (mask, random, unchanged), got {kind}",
                      f"应该返回三个数 (mask, random, unchanged)，实际返回的是 {kind}")
    if len(got) != 3:
        return None, (f"expected three numbers (mask, random, unchanged), got {len(got)}",
                      f"应该返回三个数 (mask, random, unchanged)，实际返回了 {len(got)} 个")
    values = []
    for item in got:
        value, problem = as_number(item)
        if problem:
            return None, problem
        values.append(value)
    return values, None


def _near(a, b, tol: float = 1e-6) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b))


def _shares_text(values) -> str:
    return "(" + ", ".join(f"{v:.4g}" for v in values) + ")"


def _level_guesses(train: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor, k_max: int):
    """``(guesses, truth)``: for each k in 0..k_max, the guess (N,) of the k + k context alone at every scored
    position (−1 where the window's edge cuts the context or the training text never shows it), and the scored
    labels (N,). The check's own computation, written apart from the lesson's cell: one dense count table per k over
    the contexts the scored positions need (ties: the smallest id, as argmax)."""
    rows, cols = (labels != IGNORE_INDEX).nonzero(as_tuple=True)                 # (N,), (N,)
    truth, T, L = labels[rows, cols], inputs.size(1), len(train)
    base = int(max(int(train.max()), int(inputs.max()))) + 1
    guesses = []
    for k in range(k_max + 1):
        guess = torch.full_like(truth, -1)
        inside = (cols >= k) & (cols + k < T)
        offsets = [o for o in range(-k, k + 1) if o != 0]
        if L > 2 * k and bool(inside.any()):
            wanted = torch.zeros_like(cols)
            for o in offsets:
                wanted = wanted * base + inputs[rows, (cols + o).clamp(0, T - 1)]
            need, which = torch.unique(wanted[inside], return_inverse=True)       # contexts asked for
            t = torch.arange(k, L - k)
            seen = torch.zeros_like(t)
            for o in offsets:
                seen = seen * base + train[t + o]
            hit = torch.isin(seen, need)
            context = torch.searchsorted(need, seen[hit])
            counts = torch.bincount(context * base + train[t[hit]], minlength=len(need) * base).view(len(need), base)
            best = torch.where(counts.sum(1) > 0, counts.argmax(1), -1)
            guess[inside] = best[which]
        guesses.append(guess)
    return guesses, truth


def _backoff(guesses: list, K: int, truth: torch.Tensor, *, upwards: bool = False) -> float:
    """Accuracy of the K + K table backing off to K − 1, ..., 0 (``upwards``: the mistake of trying 0 first)."""
    guess = torch.full_like(truth, -1)
    for k in (range(K + 1) if upwards else range(K, -1, -1)):
        guess = torch.where(guess < 0, guesses[k], guess)
    return float((guess == truth).float().mean())


def _prose_case(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A stand-in for the notebook's data when the check is called without it: the bundled English prose, 10,000
    characters to count on and 48 windows of 64 with 15 % hidden behind <mask> (id 4, as every CharTokenizer)."""
    from course_utils.data.samples import sample_text
    from course_utils.tokenizers import CharTokenizer

    text = sample_text()
    ids = torch.tensor(CharTokenizer.from_text(text).encode(text))
    windows = ids[10_000:10_000 + 48 * 64].view(48, 64)
    selected = torch.rand(windows.shape, generator=g) < 0.15
    return ids[:10_000], windows.masked_fill(selected, 4), torch.where(selected, windows, IGNORE_INDEX)
