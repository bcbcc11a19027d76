"""Normalisation layers (lesson 06). LayerNorm normalises each position's feature vector x ∈ ℝ^d on its own::

    μ = (1/d) Σ_j x_j          σ² = (1/d) Σ_j (x_j − μ)²   (biased: divide by d, not d − 1)
    LN(x) = γ ⊙ (x − μ) / √(σ² + ε) + β                       (ε inside the square root)
    RMS(x) = γ ⊙ x / √((1/d) Σ_j x_j² + ε)                    (RMSNorm, Zhang & Sennrich 2019: no centring, no β)"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import LayerConfig
from .validation import check_bool, check_int, check_positive, check_vectors


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm written out from the formula (``F.rms_norm`` arrived in torch 2.4). Half-precision inputs are
    normalised in float32, as the fused kernels do: in float16, x² overflows at |x| ≈ 256."""
    dtype, x = x.dtype, x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight).to(dtype)


class LayerNorm(nn.Module):
    """LayerNorm over the last dimension with the fused kernel (one pass over memory instead of five; lesson 06
    writes it out), parameters named like ``nn.LayerNorm``."""

    def __init__(self, d_model: int, *, eps: float = LayerConfig.eps, bias: bool = LayerConfig.bias):
        super().__init__()
        self.d_model, self.eps = check_int(d_model, "d_model"), check_positive(eps, "eps")
        self.weight = nn.Parameter(torch.ones(d_model))  # γ
        self.bias = nn.Parameter(torch.zeros(d_model)) if check_bool(bias, "bias") else None  # β

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_vectors(x, "x", self.d_model, self.weight.device, owner="the norm")
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


class RMSNorm(nn.Module):
    """RMSNorm: γ ⊙ x / √(mean(x²) + ε); no mean subtraction, no β."""

    def __init__(self, d_model: int, *, eps: float = LayerConfig.eps, fused: bool = True):
        super().__init__()
        self.d_model, self.eps = check_int(d_model, "d_model"), check_positive(eps, "eps")
        self.fused = check_bool(fused, "fused") and hasattr(F, "rms_norm")  # F.rms_norm arrived in torch 2.4
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_vectors(x, "x", self.d_model, self.weight.device, owner="the norm")
        if self.fused:
            return F.rms_norm(x, (self.d_model,), self.weight, self.eps)
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


def make_norm(d_model: int, config: LayerConfig | None = None) -> nn.Module:
    """``config.norm``: ``"layer"`` -> LayerNorm (β only with ``config.bias``), ``"rms"`` -> RMSNorm (never a β)."""
    c = config or LayerConfig()
    return LayerNorm(d_model, eps=c.eps, bias=c.bias) if c.norm == "layer" else RMSNorm(d_model, eps=c.eps)
