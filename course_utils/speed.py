"""Measuring speed honestly (lesson 14, ``benchmarks/``): warm-up calls thrown away, ``torch.cuda.synchronize()``
before reading the clock (GPU kernels run asynchronously), medians."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from .interop import load_mha_from_torch
from .multihead import MultiHeadAttention

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def attention_weights_bytes(batch: int, n_heads: int, seq_len: int, dtype: str = "float32") -> int:
    """Bytes of the ``(B, h, T, T)`` attention weights the written-out path keeps for backward: B·h·T²·bytes."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype={dtype!r} is not one of {sorted(DTYPE_BYTES)}: pass the name, e.g. 'bfloat16'")
    return batch * n_heads * seq_len**2 * DTYPE_BYTES[dtype]


def synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_samples(fn: Callable[[], object], device="cpu", repeats: int = 5, inner: int = 2,
                 warmup: int = 2) -> list[float]:
    """``repeats`` samples in seconds, each the mean time of ``inner`` calls of ``fn``, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        synchronize(device)
        samples.append((time.perf_counter() - start) / inner)
    return samples


def forward_backward(call: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> Callable[[], None]:
    """A closure running ``call(x)`` forward and backward once (what one training step of the layer costs)."""
    def step() -> None:
        x.grad = None
        call(x).float().sum().backward()
    return step


def attention_samples(batch: int, seq_len: int, d_model: int, n_heads: int, device="cpu", dtype=torch.float32,
                      repeats: int = 5, inner: int = 2) -> dict[str, list[float]]:
    """:func:`time_samples` (seconds, one per repeat) of forward+backward for ``nn.MultiheadAttention`` (``"torch"``),
    ours on the SDPA path (``"sdpa"``) and ours written out, weights kept (``"written"``)."""
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(d_model, n_heads, batch_first=True, device=device, dtype=dtype)
    ours = load_mha_from_torch(MultiHeadAttention(d_model, n_heads).to(device, dtype), ref)
    x = torch.randn(batch, seq_len, d_model, device=device, dtype=dtype, requires_grad=True)
    run = lambda call: time_samples(forward_backward(call, x), device, repeats, inner)  # noqa: E731
    return {"torch": run(lambda y: ref(y, y, y, need_weights=False)[0]), "sdpa": run(lambda y: ours(y)),
            "written": run(lambda y: ours(y, need_weights=True))}


def attention_timings(batch: int, seq_len: int, d_model: int, n_heads: int, device="cpu", dtype=torch.float32,
                      repeats: int = 5, inner: int = 2) -> dict[str, float]:
    """Forward+backward seconds of ``nn.MultiheadAttention``, ours (SDPA path) and ours written out (weights kept):
    the medians of :func:`attention_samples`."""
    samples = attention_samples(batch, seq_len, d_model, n_heads, device, dtype, repeats, inner)
    return {name: statistics.median(runs) for name, runs in samples.items()}
