"""course_utils: the companion package of the course "Transformers from scratch" (one concept per module, see
docs/design.md). Needs only torch, numpy, safetensors and tqdm; never imports the notebook layer ``course_lab``."""

from __future__ import annotations

import importlib

from .attention import attention_with_weights
from .kv_cache import KVCache
from .layers import DecoderLayer, EncoderLayer, PositionwiseFeedForward, Residual
from .masks import causal_mask, combine_masks, padding_mask
from .models import GPT, Decoder, Encoder, EncoderClassifier, MaskedLM, Transformer
from .multihead import MultiHeadAttention, record_attention
from .norm import LayerNorm, RMSNorm
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, TokenEmbedding, sinusoidal_encoding

__version__ = "0.1.0"

# Modules loaded on first attribute access (``cu.train``), so that ``import course_utils`` stays fast.
_LAZY = {"attention", "multihead", "kv_cache", "sampling", "masks", "positional", "norm", "layers", "models", "interop",
         "losses", "decoding", "train", "schedules", "checkpoint", "data", "tokenizers", "validation", "pretrained",
         "wordpiece", "bpe", "mlm", "lm_data", "speed", "budget", "modes"}

__all__ = ["KVCache", "MultiHeadAttention", "record_attention", "attention_with_weights", "DecoderLayer",
           "EncoderLayer", "PositionwiseFeedForward", "Residual", "causal_mask", "combine_masks", "padding_mask", "GPT",
           "Decoder", "Encoder", "EncoderClassifier", "MaskedLM", "Transformer", "LayerNorm", "RMSNorm",
           "LearnedPositionalEmbedding", "SinusoidalPositionalEncoding", "TokenEmbedding", "sinusoidal_encoding"]


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'course_utils' has no attribute {name!r}")
