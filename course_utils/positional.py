"""Token embeddings and positions (lessons 01, 02, 16): the first layer's input is
x_i = E[token_i] · √d_model + PE(pos_i), E ∈ ℝ^{|V|×d_model}, with the sinusoidal encoding (Vaswani et al., §3.5)::

    PE(pos, 2i)   = sin(pos / 10000^(2i/d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))

or a learned table P[pos], or nothing (RoPE: attention rotates q, k: ``rope_rotate``); ``make_positions`` builds the
choice, which refuses an input longer than ``max_len``."""

from __future__ import annotations

import math

import torch
from torch import nn

from .config import LayerConfig
from .validation import (
    check_bool,
    check_dtype,
    check_int,
    check_positive,
    check_probability,
    check_rank,
    check_same_device,
    check_token_ids,
    check_vectors,
)


def sinusoidal_encoding(max_len: int, d_model: int, base: float = 10000.0, dtype=torch.float32,
                        device=None) -> torch.Tensor:
    """The table PE of shape ``(max_len, d_model)``; even columns sin, odd columns cos (lesson 02). Computed in
    float64 and cast to ``dtype`` at the end, so its only error is that dtype's rounding."""
    check_int(max_len, "max_len")
    check_int(d_model, "d_model")
    check_positive(base, "base")
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a float dtype (sines lie in [-1, 1]), got {dtype!r}: e.g. dtype=torch.float32")
    position = torch.arange(max_len, dtype=torch.float64, device=device)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64, device=device)  # (ceil(d/2),)
    inv_freq = torch.exp(-two_i * (math.log(base) / d_model))  # 1 / base^(2i/d) without base^(2i/d) (lesson 02)
    angles = position * inv_freq  # (L, ceil(d/2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])  # odd d_model: one fewer cosine column
    return pe.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (−x2, x1) on the two halves of the last dimension: pair (i, i + d/2) turned by 90°."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_rotate(x: torch.Tensor, offset: int = 0, base: float = LayerConfig.rope_base) -> torch.Tensor:
    """RoPE (Su et al., 2021): x ``(…, T, d)`` at positions offset … offset+T−1, each pair (x_i, x_{i+d/2}) rotated by
    pos · base^(−2i/d) (Hugging Face Llama's pairing), so q·k depends only on the distance."""
    d, work = x.shape[-1], torch.float64 if x.dtype == torch.float64 else torch.float32  # float32: as Llama
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device, dtype=work) / d))  # (d/2,)
    pos = torch.arange(offset, offset + x.shape[-2], device=x.device, dtype=work)  # (T,)
    angles = torch.outer(pos, inv_freq).repeat(1, 2)  # (T, d): the same angle for i and i + d/2
    return x * angles.cos().to(x.dtype) + rotate_half(x) * angles.sin().to(x.dtype)


def check_rope_self_attention(rope_base: float | None, key) -> None:
    """RoPE (``rope_base`` set) rotates q and k of one sequence: refuse keys passed from another one."""
    if key is not None and rope_base is not None:
        raise ValueError("positions='rope' rotates queries and keys of one sequence (self-attention); these keys come "
                         "from another sequence: build cross-attention with MultiHeadAttention(..., cross=True), as "
                         "DecoderLayer does, or use positions='sinusoidal' / 'learned'")


class _Positions(nn.Module):
    """What every position scheme does: embedding dropout and the model's one length check (``offset`` + T ≤
    ``max_len``; ``offset`` shifts positions in KV-cache decoding)."""

    def __init__(self, d_model: int, *, max_len: int = 512, dropout: float = LayerConfig.dropout):
        super().__init__()
        self.d_model, self.max_len = check_int(d_model, "d_model"), check_int(max_len, "max_len")
        self.dropout = nn.Dropout(check_probability(dropout))

    def check_input(self, x: torch.Tensor, offset: int, table: torch.Tensor) -> int:
        check_vectors(x, "x", self.d_model, table.device, owner="the positional table",
                      layout="(B, T, d_model) token vectors (pass ids through TokenEmbedding first)")
        offset, seq_len, max_len = check_int(offset, "offset", 0), x.size(1), self.max_len
        if offset + seq_len > max_len:
            fix = f"crop it to its last {max_len - offset} tokens (generate() does this) or " * (offset < max_len)
            raise ValueError(f"sequence of length {seq_len} (starting at position {offset}) is longer than the "
                             f"model's context (max_len={max_len}): {fix}build the model with max_len >= "
                             f"{offset + seq_len}")
        return offset


class SinusoidalPositionalEncoding(_Positions):
    """Adds the fixed sinusoidal table to ``x (B, T, d_model)``."""

    def __init__(self, d_model: int, *, max_len: int = 5000, dropout: float = LayerConfig.dropout,
                 base: float = 10000.0):
        super().__init__(d_model, max_len=max_len, dropout=dropout)
        # A buffer, not a parameter: it moves with .to(device) but is never trained (nor saved: it is a formula).
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, base), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        offset = self.check_input(x, offset, self.pe)
        return self.dropout(x + self.pe[offset : offset + x.size(1)].to(x.dtype))  # (B, T, C)


class LearnedPositionalEmbedding(_Positions):
    """A trained table P ∈ ℝ^{max_len×d_model} (BERT, GPT-2): x + P[pos]."""

    def __init__(self, d_model: int, *, max_len: int = 512, dropout: float = LayerConfig.dropout):
        super().__init__(d_model, max_len=max_len, dropout=dropout)
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        offset = self.check_input(x, offset, self.embedding.weight)
        check_dtype(x, "x", self.embedding.weight.dtype, "the positional table")
        return self.dropout(x + self.embedding.weight[offset : offset + x.size(1)])  # P[pos], (B, T, C)


class RotaryPositions(_Positions):
    """``positions="rope"``: nothing is added to the input (attention rotates q and k); dropout and the length check."""

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        self.check_input(x, offset, x)
        return self.dropout(x)


def make_positions(d_model: int, max_len: int, config: LayerConfig) -> nn.Module:
    """The model's ``config.positions`` with the embedding dropout ``config.dropout``; refuses T > ``max_len``."""
    kind = {"sinusoidal": SinusoidalPositionalEncoding, "learned": LearnedPositionalEmbedding, "rope": RotaryPositions}
    return kind[config.positions](d_model, max_len=max_len, dropout=config.dropout)


class TokenEmbedding(nn.Module):
    """E[ids] · √d_model (lesson 01): E's entries are ~1/√d_model when tied to the output layer (and in the paper),
    so the scale brings token vectors to the magnitude of the ±1 positional encoding. ``scale=False``: E[ids]."""

    def __init__(self, vocab_size: int, d_model: int, *, scale: bool = True, padding_idx: int | None = None):
        super().__init__()
        self.vocab_size, self.d_model = check_int(vocab_size, "vocab_size"), check_int(d_model, "d_model")
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        self.scale = math.sqrt(d_model) if check_bool(scale, "scale") else 1.0

    @property
    def weight(self) -> nn.Parameter:
        return self.embedding.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_rank(ids, "ids", (1, 2), "(B, T) token ids")
        check_same_device(ids, "ids", self.embedding.weight.device, "the embedding")
        check_token_ids(ids, self.vocab_size)
        return self.embedding(ids) * self.scale  # (B, T, C)
