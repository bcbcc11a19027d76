"""Whole models built from the layers (lessons 07, 09–13, 16): vocabulary sizes positional, the rest keyword-only, named
alike in every model. Shared layer hyperparameters: one ``config.LayerConfig`` (``config=``, or its fields as keywords
over the model's recipe); ``positions=`` picks the position scheme, which refuses an input longer than ``max_len``.
Output layers: ``lm_head`` (logits over a vocabulary), ``classifier`` (over classes)."""

from __future__ import annotations

import torch
from torch import nn

from .config import LayerConfig, check_pad_id
from .kv_cache import KVCache
from .layers import DecoderLayer, EncoderLayer
from .masks import padding_mask
from .norm import make_norm
from .pooling import check_keep_mask, masked_mean
from .positional import TokenEmbedding, make_positions
from .validation import check_bool, check_int, check_rank

_DROPOUT = 0.1  # every model's recipe (the paper's P_drop); a lone part's default is LayerConfig's 0.0


class _LayerStack(nn.Module):
    """N identical layers (``layer_class``) plus the final norm that pre-norm needs; ``d_ff=None``: 4·d_model."""

    layer_class: type[nn.Module]

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int | None, *, final_norm: bool | None = None,
                 config: LayerConfig | None = None, **layer):
        super().__init__()
        cfg = LayerConfig.merge(layer, config)
        d_ff = 4 * d_model if d_ff is None else check_int(d_ff, "d_ff")  # the paper's ratio; 0 is refused
        self.layers = nn.ModuleList(self.layer_class(d_model, n_heads, d_ff, config=cfg)
                                    for _ in range(check_int(n_layers, "n_layers")))
        # Pre-norm leaves the residual stream un-normalised, so it needs one last norm; post-norm does not.
        final_norm = cfg.norm_first if final_norm is None else check_bool(final_norm, "final_norm")
        self.norm = make_norm(d_model, cfg) if final_norm else nn.Identity()


class SelfAttentionStack(_LayerStack):
    """N self-attention layers, input and output ``(B, T, d_model)`` vectors: bidirectional (an ``Encoder``) or,
    with ``is_causal=True``, the blocks of a decoder-only model (``GPT.blocks``)."""

    layer_class = EncoderLayer

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *, key_keep_mask: torch.Tensor | None = None,
                is_causal: bool = False, cache: KVCache | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask, key_keep_mask=key_keep_mask, is_causal=is_causal, cache=cache)
        return self.norm(x)


class Encoder(SelfAttentionStack):
    """N encoder layers; input and output ``(B, T, d_model)`` vectors (embeddings are the model's job)."""


class Decoder(_LayerStack):
    """N decoder layers attending to the encoder's output ``memory``."""

    layer_class = DecoderLayer

    def forward(self, y: torch.Tensor, memory: torch.Tensor, self_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None, *, is_causal: bool = True,
                cache: KVCache | None = None) -> torch.Tensor:
        for layer in self.layers:  # each layer refuses a missing memory
            y = layer(y, memory, self_mask, memory_mask, is_causal=is_causal, cache=cache)
        return self.norm(y)


def _begin(model: nn.Module, ids: torch.Tensor, name: str, cache: KVCache | None, extend: bool) -> int:
    """Check the ids, bind the cache; the position of the first id (``cache.offset``, or 0)."""
    check_rank(ids, name, (2,), "(B, T) token ids")
    if cache is None:
        return 0
    cache.bind(model, ids.size(1), extend)
    return cache.offset


class Transformer(nn.Module):
    """Encoder–decoder Transformer (lessons 07, 10): ``forward(src (B, T_s), tgt_in (B, T_t))`` -> logits
    ``(B, T_t, tgt_vocab)``; ``tgt_in`` is the target shifted right (teacher forcing)."""

    def __init__(self, src_vocab: int, tgt_vocab: int, *, d_model: int = 512, n_heads: int = 8,
                 n_encoder_layers: int = 6, n_decoder_layers: int = 6, d_ff: int | None = 2048, max_len: int = 512,
                 pad_id: int = 0, tie_weights: bool = False, final_norm: bool | None = None,
                 config: LayerConfig | None = None, **layer):
        super().__init__()
        cfg = LayerConfig.merge(layer, config, dropout=_DROPOUT)
        src_vocab, tgt_vocab = check_int(src_vocab, "src_vocab"), check_int(tgt_vocab, "tgt_vocab")
        self.pad_id, self.d_model, self.max_len = check_pad_id(pad_id, min(src_vocab, tgt_vocab)), d_model, max_len
        self.src_embed, self.tgt_embed = TokenEmbedding(src_vocab, d_model), TokenEmbedding(tgt_vocab, d_model)
        self.src_pos, self.tgt_pos = make_positions(d_model, max_len, cfg), make_positions(d_model, max_len, cfg)
        shape = dict(d_model=d_model, n_heads=n_heads, d_ff=d_ff, final_norm=final_norm, config=cfg)
        self.encoder, self.decoder = Encoder(n_encoder_layers, **shape), Decoder(n_decoder_layers, **shape)
        self.lm_head = nn.Linear(d_model, tgt_vocab, bias=cfg.bias)  # the output layer: logits
        for emb in (self.src_embed, self.tgt_embed):
            nn.init.normal_(emb.weight, std=d_model**-0.5)  # ×√d_model brings it to unit scale
        if check_bool(tie_weights, "tie_weights"):  # Press & Wolf (2017): share E and W_out
            self.lm_head.weight = self.tgt_embed.weight

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src ``(B, T_s)`` -> (memory ``(B, T_s, C)``, source padding mask ``(B, 1, 1, T_s)``)."""
        _begin(self, src, "src", None, False)
        src_mask = padding_mask(src, self.pad_id)
        return self.encoder(self.src_pos(self.src_embed(src)), src_mask), src_mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None,
               cache: KVCache | None = None, *, extend: bool = False) -> torch.Tensor:
        """tgt_in ``(B, T_t)`` -> logits ``(B, T_t, V)``; with a cache only the new ones (several: ``extend=True``)."""
        offset = _begin(self, tgt_in, "tgt_in", cache, extend)
        y = self.tgt_pos(self.tgt_embed(tgt_in), offset=offset)
        # No target padding mask: padding only sits *after* the real tokens, which the causal mask already hides
        # from them (the padded positions' losses are ignored instead).
        y = self.decoder(y, memory, None, src_mask, is_causal=True, cache=cache)
        if cache is not None:
            cache.advance(tgt_in.size(1))
        return self.lm_head(y)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask)


class EncoderClassifier(nn.Module):
    """Encoder + pooling + linear classifier: ids ``(B, T)`` -> class logits ``(B, n_classes)`` (lesson 09)."""

    def __init__(self, vocab_size: int, n_classes: int, *, d_model: int = 128, n_heads: int = 4, n_layers: int = 2,
                 d_ff: int | None = None, max_len: int = 512, pad_id: int = 0, pool: str = "mean",
                 config: LayerConfig | None = None, **layer):
        super().__init__()
        cfg = LayerConfig.merge(layer, config, dropout=_DROPOUT)
        if pool not in ("mean", "cls"):
            raise ValueError(f"pool must be 'mean' or 'cls' (first token), got {pool!r}")
        if check_int(n_classes, "n_classes") < 2:
            raise ValueError(f"n_classes must be >= 2 (a softmax over one class is always 1), got {n_classes}")
        self.pad_id, self.pool, self.max_len = check_pad_id(pad_id, check_int(vocab_size, "vocab_size")), pool, max_len
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.pos = make_positions(d_model, max_len, cfg)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, config=cfg)
        self.classifier = nn.Linear(d_model, n_classes, bias=cfg.bias)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)  # ×√d_model brings it to unit scale

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _begin(self, ids, "ids", None, False)
        mask = padding_mask(ids, self.pad_id)  # (B, 1, 1, T)
        h = self.encoder(self.pos(self.embed(ids)), mask)  # (B, T, C)
        pooled = h[:, 0] if self.pool == "cls" else masked_mean(h, mask[:, 0, 0, :])  # (B, C)
        return self.classifier(pooled)  # (B, n_classes)


class GPT(nn.Module):
    """Decoder-only LM (lessons 11, 16): ids ``(B, T)`` -> next-token logits ``(B, T, V)``; pre-norm, GELU, learned
    positions, tied output (GPT-2); ``max_len``: context window. Llama: ``positions="rope", norm="rms", ffn="swiglu",
    n_kv_heads=…, bias=False, tie_weights=False``."""

    def __init__(self, vocab_size: int, *, max_len: int = 256, n_layers: int = 6, n_heads: int = 6, d_model: int = 384,
                 d_ff: int | None = None, tie_weights: bool = True, config: LayerConfig | None = None, **layer):
        super().__init__()
        cfg = LayerConfig.merge(layer, config, dropout=_DROPOUT, norm_first=True, activation="gelu",
                                positions="learned")
        self.max_len = check_int(max_len, "max_len")
        self.embed = TokenEmbedding(check_int(vocab_size, "vocab_size"), d_model, scale=False)  # no ×√d (GPT-2)
        self.pos = make_positions(d_model, max_len, cfg)
        self.blocks = SelfAttentionStack(n_layers, d_model, n_heads, d_ff, config=cfg)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        for w in (self.embed.weight, *self.pos.parameters()):
            nn.init.normal_(w, std=0.02)
        if check_bool(tie_weights, "tie_weights"):
            self.lm_head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor, cache: KVCache | None = None, *, extend: bool = False) -> torch.Tensor:
        """``extend=True`` appends several tokens to a non-empty ``cache`` (else that is refused as a new prompt)."""
        offset = _begin(self, ids, "ids", cache, extend)
        x = self.pos(self.embed(ids), offset=offset)  # (B, T, C); refuses offset + T > max_len
        x = self.blocks(x, is_causal=True, cache=cache)
        if cache is not None:
            cache.advance(ids.size(1))
        return self.lm_head(x)  # (B, T, V)


class MaskedLM(nn.Module):
    """BERT-style encoder + prediction head over the vocabulary for masked positions (lesson 12)."""

    def __init__(self, vocab_size: int, *, d_model: int = 128, n_heads: int = 4, n_layers: int = 2,
                 d_ff: int | None = None, max_len: int = 512, pad_id: int = 0, config: LayerConfig | None = None,
                 **layer):
        super().__init__()
        cfg = LayerConfig.merge(layer, config, dropout=_DROPOUT, activation="gelu", eps=1e-12, positions="learned")
        self.pad_id, self.max_len = check_pad_id(pad_id, check_int(vocab_size, "vocab_size")), max_len
        self.embed = TokenEmbedding(vocab_size, d_model, scale=False)
        self.pos = make_positions(d_model, max_len, cfg)
        self.embed_norm = make_norm(d_model, cfg)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, config=cfg)
        self.transform = nn.Sequential(nn.Linear(d_model, d_model, bias=cfg.bias), nn.GELU(), make_norm(d_model, cfg))
        self.lm_head = nn.Linear(d_model, vocab_size, bias=cfg.bias)
        # BERT initialises *both* tables with std 0.02: with nn.Embedding's default N(0, 1) positions, the token
        # signal would be 50× weaker than the position signal after embed_norm, and the model could not learn.
        for w in (self.embed.weight, *self.pos.parameters()):
            nn.init.normal_(w, std=0.02)
        self.lm_head.weight = self.embed.weight  # tied, as in BERT

    def forward(self, ids: torch.Tensor, select: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``(B, T, V)``, or ``(N, V)`` at the N positions where ``select`` (B, T) is True: the output layer
        (d_model × V per position) then runs only where there is something to predict, as in BERT."""
        _begin(self, ids, "ids", None, False)
        x = self.embed_norm(self.pos(self.embed(ids)))
        h = self.encoder(x, padding_mask(ids, self.pad_id))  # (B, T, C)
        if select is not None:
            h = h[check_keep_mask(select, ids.shape, "select")]  # (N, C)
        return self.lm_head(self.transform(h))  # (B, T, V) or (N, V)
