"""Reference solutions of the notebooks' exercises, and other test-only helpers.

They live here, not in ``course_lab``: the package ships what a notebook runs, and a solution is only needed to
show that each check accepts a correct answer. Lesson modules are imported inside the functions, so importing
this file needs only torch.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

UNK = "[UNK]"


# --- lesson 01 ------------------------------------------------------------------------------------------------
def one_hot_costs(n_tokens: int, vocab_size: int, d_model: int) -> tuple[int, int]:
    """Exercise 1: one_hot (n, |V|) @ E (|V|, d) costs n·|V|·d multiply-adds; the float32 matrix 4·n·|V| bytes."""
    return n_tokens * vocab_size * d_model, 4 * n_tokens * vocab_size


def embedding_grad(ids: torch.Tensor, grad_out: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Exercise 2: X = one_hot(ids)·E, so ∂L/∂E = one_hot(ids)ᵀ·∂L/∂X: (|V|, C), repeated tokens summed."""
    one_hot = F.one_hot(ids, vocab_size).to(grad_out.dtype)         # (B, T, |V|)
    return one_hot.flatten(0, 1).T @ grad_out.flatten(0, 1)         # (|V|, C)


def balanced_std(d_model: int) -> float:
    """Exercise 3: E[‖√d·E_t‖²] = std²·d² must equal ‖PE‖² = d/2, so std = 1/√(2d)."""
    return 1.0 / math.sqrt(2 * d_model)


# --- lesson 02 ------------------------------------------------------------------------------------------------
def wavelengths(d_model: int) -> torch.Tensor:
    """Exercise 1: λ_i = 2π / ω_i = 2π·10000^(2i/d), one per (sin, cos) pair."""
    return 2 * math.pi * 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def shift_back(pe_row: torch.Tensor, k: int) -> torch.Tensor:
    """Exercise 2: PE(pos − k) = M_k⁻¹ PE(pos) = M_kᵀ PE(pos) (a rotation's inverse)."""
    from course_lab.lessons.l02_positional import shift_matrix

    return shift_matrix(k, pe_row.shape[-1]).T @ pe_row.double()


def rotate(x: torch.Tensor, k: int) -> torch.Tensor:
    """Exercise 3: M_k x on the last dimension, pair by pair (no d × d matrix): RoPE's rotation."""
    omega = 10000 ** (-torch.arange(0, x.shape[-1], 2, dtype=x.dtype) / x.shape[-1])
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([c * even + s * odd, -s * even + c * odd], dim=-1).flatten(-2)


# --- lesson 13 ------------------------------------------------------------------------------------------------
def wordpiece(word: str, vocab) -> list[str]:
    """Exercise 3: greedy longest-match-first WordPiece for one word (no length limit)."""
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:
            return [UNK]
    return pieces


def fit_logistic_regression(x: torch.Tensor, y: torch.Tensor, max_iter: int = 100):
    """The notebook's linear probe (lesson 13): softmax(x W + b) fitted with L-BFGS on mean cross-entropy +
    ‖W‖² / 2N; returns ``predict(x) -> labels``."""
    n_classes = max(2, int(y.max()) + 1)
    w = torch.zeros(x.shape[1], n_classes, requires_grad=True)
    b = torch.zeros(n_classes, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(x @ w + b, y) + (w ** 2).sum() / (2 * len(x))
        loss.backward()
        return loss

    opt.step(closure)
    w, b = w.detach(), b.detach()
    return lambda z: (z @ w + b).argmax(-1)
