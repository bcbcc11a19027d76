"""course_utils: the companion package of the course "Transformers from scratch".

One concept per module (see docs/design.md). The core building blocks are importable from the top level::

    import course_utils as cu
    mha = cu.MultiHeadAttention(d_model=64, n_heads=4)

Other modules (``train``, ``data``, ``decoding``, ``pretrained`` …) load on first use, e.g. ``cu.train``, so
``import course_utils`` stays fast. The package needs only torch, numpy, safetensors and tqdm: the notebook layer
(plots, widgets, fonts, language, exercise checks, per-lesson demos) is the separate package ``course_lab``, which
``course_utils`` never imports.
"""

from __future__ import annotations

import importlib

from .attention import KVCache, MultiHeadAttention, attention_with_weights, record_attention
from .layers import DecoderLayer, EncoderLayer, PositionwiseFeedForward, Residual
from .masks import causal_mask, combine_masks, padding_mask
from .models import GPT, Decoder, Encoder, EncoderClassifier, MaskedLM, Transformer
from .norm import LayerNorm, RMSNorm
from .positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_encoding,
)

__version__ = "0.1.0"

_LAZY = {
    "attention",
    "multihead",
    "kv_cache",
    "sampling",
    "masks",
    "positional",
    "norm",
    "layers",
    "models",
    "interop",
    "losses",
    "decoding",
    "train",
    "schedules",
    "checkpoint",
    "data",
    "tokenizers",
    "validation",
    "pretrained",
    "wordpiece",
    "mlm",
    "lm_data",
    "speed",
    "gpt_train",
    "budget",
}

__all__ = [
    "KVCache",
    "MultiHeadAttention",
    "record_attention",
    "attention_with_weights",
    "DecoderLayer",
    "EncoderLayer",
    "PositionwiseFeedForward",
    "Residual",
    "causal_mask",
    "combine_masks",
    "padding_mask",
    "GPT",
    "Decoder",
    "Encoder",
    "EncoderClassifier",
    "MaskedLM",
    "Transformer",
    "LayerNorm",
    "RMSNorm",
    "LearnedPositionalEmbedding",
    "SinusoidalPositionalEncoding",
    "TokenEmbedding",
    "sinusoidal_encoding",
]


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'course_utils' has no attribute {name!r}")
