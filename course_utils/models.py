"""Whole models built from the layers (lessons 07, 09–13).

* ``Encoder`` / ``Decoder``: N stacked layers (+ an optional final norm, needed with pre-norm).
* ``Transformer``: the paper's encoder–decoder for seq2seq, with embeddings ×√d_model, sinusoidal positions, the
  output layer (logits over the target vocabulary) and optional weight tying.
* ``EncoderClassifier``: encoder + masked mean (or [CLS]) pooling + linear head.
* ``GPT``: decoder-only language model (causal self-attention, no cross-attention), KV cache for generation.
* ``MaskedLM``: BERT-style encoder with a masked-token prediction head.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import KVCache
from .layers import DecoderLayer, EncoderLayer
from .masks import padding_mask
from .norm import make_norm
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, TokenEmbedding
from .validation import check_rank


def _positions(kind: str, d_model: int, max_len: int, dropout: float) -> nn.Module:
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, max_len, dropout)
    if kind == "learned":
        return LearnedPositionalEmbedding(max_len, d_model, dropout)
    raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {kind!r}")


class _LayerStack(nn.Module):
    """N identical layers (``layer_class``) plus the final norm that pre-norm needs."""

    layer_class: type[nn.Module]

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        final_norm: bool | None = None,
        eps: float = 1e-5,
        norm: str = "layer",
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            self.layer_class(d_model, n_heads, d_ff, dropout, activation, norm_first, eps, norm)
            for _ in range(n_layers)
        )
        # Pre-norm leaves the residual stream un-normalised, so it needs one last norm; post-norm does not.
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = make_norm(norm, d_model, eps) if final_norm else nn.Identity()


class Encoder(_LayerStack):
    """N encoder layers; input and output ``(B, T, d_model)`` vectors (embeddings are the model's job)."""

    layer_class = EncoderLayer

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask, is_causal=is_causal, cache=cache)
        return self.norm(x)


class Decoder(_LayerStack):
    """N decoder layers attending to the encoder's output ``memory``."""

    layer_class = DecoderLayer

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        *,
        is_causal: bool = True,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        for layer in self.layers:
            y = layer(y, memory, self_mask, memory_mask, is_causal=is_causal, cache=cache)
        return self.norm(y)


class Transformer(nn.Module):
    """Encoder–decoder Transformer for sequence-to-sequence (lessons 07, 10).

    ``forward(src (B, T_s), tgt_in (B, T_t)) -> logits (B, T_t, tgt_vocab)`` where ``tgt_in`` is the target shifted
    right (starts with <bos>); the loss compares the logits with the target shifted left (teacher forcing).
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 512,
        n_heads: int = 8,
        n_encoder_layers: int = 6,
        n_decoder_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 512,
        pad_id: int = 0,
        tie_weights: bool = False,
        norm_first: bool = False,
        activation: str = "relu",
        final_norm: bool | None = None,
    ):
        super().__init__()
        self.pad_id, self.d_model = pad_id, d_model
        self.src_embed = TokenEmbedding(src_vocab, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab, d_model)
        self.src_pos = SinusoidalPositionalEncoding(d_model, max_len, dropout)
        self.tgt_pos = SinusoidalPositionalEncoding(d_model, max_len, dropout)
        kw = dict(dropout=dropout, activation=activation, norm_first=norm_first, final_norm=final_norm)
        self.encoder = Encoder(n_encoder_layers, d_model, n_heads, d_ff, **kw)
        self.decoder = Decoder(n_decoder_layers, d_model, n_heads, d_ff, **kw)
        self.generator = nn.Linear(d_model, tgt_vocab)  # the output layer: logits
        for emb in (self.src_embed, self.tgt_embed):
            nn.init.normal_(emb.weight, std=d_model**-0.5)  # ×√d_model brings it to unit scale
        if tie_weights:  # Press & Wolf (2017): share E and W_out
            self.generator.weight = self.tgt_embed.weight

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src ``(B, T_s)`` -> (memory ``(B, T_s, C)``, source padding mask ``(B, 1, 1, T_s)``)."""
        check_rank(src, "src", (2,), "(B, T_s) token ids")
        src_mask = padding_mask(src, self.pad_id)
        return self.encoder(self.src_pos(self.src_embed(src)), src_mask), src_mask

    def decode(
        self,
        tgt_in: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """tgt_in ``(B, T_t)`` -> logits ``(B, T_t, V)``. With a cache, pass only the new tokens."""
        check_rank(tgt_in, "tgt_in", (2,), "(B, T_t) token ids")
        offset = cache.offset if cache is not None else 0
        y = self.tgt_pos(self.tgt_embed(tgt_in), offset=offset)
        # Padding in the target only ever sits *after* the real tokens, and the causal mask already stops real
        # queries from seeing later positions, so no target padding mask is needed (those positions' losses are
        # ignored instead).
        y = self.decoder(y, memory, None, src_mask, is_causal=True, cache=cache)
        if cache is not None:
            cache.advance(tgt_in.size(1))
        return self.generator(y)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask)


class EncoderClassifier(nn.Module):
    """Encoder + pooling + linear head: ids ``(B, T)`` -> class logits ``(B, n_classes)`` (lesson 09)."""

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int | None = None,
        dropout: float = 0.1,
        max_len: int = 512,
        pad_id: int = 0,
        pool: str = "mean",
        positional: str = "sinusoidal",
        norm_first: bool = False,
    ):
        super().__init__()
        if pool not in ("mean", "cls"):
            raise ValueError(f"pool must be 'mean' or 'cls' (first token), got {pool!r}")
        self.pad_id, self.pool = pad_id, pool
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.pos = _positions(positional, d_model, max_len, dropout)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff or 4 * d_model, dropout, norm_first=norm_first)
        self.head = nn.Linear(d_model, n_classes)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)  # ×√d_model brings it to unit scale

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_rank(ids, "ids", (2,), "(B, T) token ids")
        mask = padding_mask(ids, self.pad_id)  # (B, 1, 1, T)
        h = self.encoder(self.pos(self.embed(ids)), mask)  # (B, T, C)
        if self.pool == "cls":
            return self.head(h[:, 0])
        keep = mask[:, 0, 0, :, None].to(h.dtype)  # (B, T, 1): padding must not vote
        pooled = (h * keep).sum(1) / keep.sum(1).clamp(min=1.0)  # (B, C)
        return self.head(pooled)


class GPT(nn.Module):
    """Decoder-only language model: ids ``(B, T)`` -> next-token logits ``(B, T, V)`` (lesson 11).

    Pre-norm blocks with GELU and learned positions, as in GPT-2; the output layer shares the embedding matrix.
    Pass a ``KVCache`` to feed only the new tokens after the first call.
    """

    def __init__(
        self,
        vocab_size: int,
        block_size: int = 256,
        n_layers: int = 6,
        n_heads: int = 6,
        d_model: int = 384,
        d_ff: int | None = None,
        dropout: float = 0.1,
        tie_weights: bool = True,
        norm_first: bool = True,
        activation: str = "gelu",
    ):
        super().__init__()
        self.block_size = block_size
        self.embed = TokenEmbedding(vocab_size, d_model, scale=False)  # GPT-2 does not scale by √d
        self.pos = LearnedPositionalEmbedding(block_size, d_model, dropout)
        self.blocks = Encoder(n_layers, d_model, n_heads, d_ff or 4 * d_model, dropout, activation, norm_first)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        for w in (self.embed.weight, self.pos.embedding.weight):
            nn.init.normal_(w, std=0.02)
        if tie_weights:
            self.lm_head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        check_rank(ids, "ids", (2,), "(B, T) token ids")
        offset = cache.offset if cache is not None else 0
        if offset + ids.size(1) > self.block_size:
            raise ValueError(
                f"GPT context is {self.block_size} tokens but got {offset + ids.size(1)}: crop the input "
                f"to its last {self.block_size} tokens (generate() does this) or build a longer model"
            )
        x = self.pos(self.embed(ids), offset=offset)  # (B, T, C)
        x = self.blocks(x, is_causal=True, cache=cache)
        if cache is not None:
            cache.advance(ids.size(1))
        return self.lm_head(x)  # (B, T, V)


class MaskedLM(nn.Module):
    """BERT-style encoder + prediction head over the vocabulary for masked positions (lesson 12)."""

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 128,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int | None = None,
        dropout: float = 0.1,
        max_len: int = 512,
        pad_id: int = 0,
        activation: str = "gelu",
        eps: float = 1e-12,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.embed = TokenEmbedding(vocab_size, d_model, scale=False)
        self.pos = LearnedPositionalEmbedding(max_len, d_model, dropout)
        self.embed_norm = make_norm("layer", d_model, eps)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff or 4 * d_model, dropout, activation, eps=eps)
        self.transform = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), make_norm("layer", d_model, eps))
        self.decoder = nn.Linear(d_model, vocab_size)
        # BERT initialises *both* tables with std 0.02: with nn.Embedding's default N(0, 1) positions, the token
        # signal would be 50× weaker than the position signal after embed_norm, and the model could not learn.
        for w in (self.embed.weight, self.pos.embedding.weight):
            nn.init.normal_(w, std=0.02)
        self.decoder.weight = self.embed.weight  # tied, as in BERT

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_rank(ids, "ids", (2,), "(B, T) token ids")
        x = self.embed_norm(self.pos(self.embed(ids)))
        h = self.encoder(x, padding_mask(ids, self.pad_id))
        return self.decoder(self.transform(h))  # (B, T, V)
