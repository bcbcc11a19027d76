"""BERT as ``course_utils`` parts (lesson 13): ``BertEncoder`` = ``BertEmbeddings`` + ``models.Encoder`` (post-norm,
GELU, eps 1e-12) + [CLS] pooler; ``SentenceEncoder`` adds mean pooling (``pooling.masked_mean``) and L2 norm."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from ..models import Encoder
from ..modes import evaluating
from ..norm import LayerNorm
from ..pooling import check_keep_mask, masked_mean
from ..positional import LearnedPositionalEmbedding, TokenEmbedding
from ..tokenizers import read_json_file
from ..validation import check_rank
from ..wordpiece import WordPieceTokenizer


@dataclass(frozen=True)
class BertConfig:
    """The fields of a BERT ``config.json`` that decide the shapes (names as in the file)."""

    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-12
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    pad_token_id: int = 0
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1

    @classmethod
    def from_dict(cls, d: dict, where: str = "config") -> BertConfig:
        for key, bert in (("model_type", "bert"), ("position_embedding_type", "absolute"), ("hidden_act", "gelu")):
            if d.get(key, bert) != bert:
                raise ValueError(f"{where}: {key}={d[key]!r} is not supported: this BERT encoder needs {bert!r}")
        required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
        missing = [k for k in required if k not in d]
        if missing:
            raise ValueError(f"{where}: missing field(s) {missing}: is this a BERT config.json?")
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> BertConfig:
        return cls.from_dict(read_json_file(path, "model configuration"), str(path))


class BertEmbeddings(nn.Module):
    """h⁰_t = LayerNorm(E[x_t] + P[t] + S[s_t]): word, learned position and segment (token type) embeddings;
    no ×√d_model (BERT lets the LayerNorm fix the scale)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        d = config.hidden_size
        self.word = TokenEmbedding(config.vocab_size, d, scale=False, padding_idx=config.pad_token_id)
        self.position = LearnedPositionalEmbedding(max_len=config.max_position_embeddings, d_model=d)
        self.token_type = nn.Embedding(config.type_vocab_size, d)
        self.norm = LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        x = self.position(self.word(ids))                                    # E[x_t] + P[t], (B, T, C)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        elif token_type_ids.shape != ids.shape:
            raise ValueError(f"token_type_ids has shape {tuple(token_type_ids.shape)} but ids {tuple(ids.shape)}: "
                             "give one segment id (0 or 1) per token, or None for a single sentence")
        return self.dropout(self.norm(x + self.token_type(token_type_ids)))


class BertPooler(nn.Module):
    """tanh(W h_[CLS] + b): BERT's next-sentence-prediction head; in the checkpoint, unused by sentence embeddings."""

    def __init__(self, d_model: int):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))                         # (B, C)


class BertEncoder(nn.Module):
    """``forward(input_ids (B, T), attention_mask (B, T) keep-mask or None, token_type_ids=None) -> (B, T, C)``."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        # BERT's layers: post-norm, GELU, its own dropout rate on the attention weights and none inside the FFN.
        self.encoder = Encoder(config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
                               config.intermediate_size, dropout=config.hidden_dropout_prob,
                               attn_dropout=config.attention_probs_dropout_prob, ffn_dropout=0.0,
                               activation="gelu", norm_first=False, eps=config.layer_norm_eps)
        self.pooler = BertPooler(config.hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        check_rank(input_ids, "input_ids", (2,), "(B, T) token ids")
        if input_ids.size(1) > self.config.max_position_embeddings:
            raise ValueError(f"{input_ids.size(1)} tokens but the model has {self.config.max_position_embeddings} "
                             f"positions: encode with max_len <= {self.config.max_position_embeddings}")
        mask = None
        if attention_mask is not None:
            mask = check_keep_mask(attention_mask, input_ids.shape, "attention_mask")[:, None, None, :]  # (B, 1, 1, T)
        return self.encoder(self.embeddings(input_ids, token_type_ids), mask)  # (B, T, C)


class SentenceEncoder(nn.Module):
    """BERT token vectors → mean (or [CLS]) pooling → optional L2 normalisation. ``forward(input_ids,
    attention_mask=None) -> (B, C)`` (no mask: every non-[PAD] id is a real token); ``encode(texts) -> (N, C)``."""

    def __init__(self, config: BertConfig, tokenizer: WordPieceTokenizer | None = None, pooling: str = "mean",
                 normalize: bool = True, max_len: int | None = None):
        super().__init__()
        if pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
        self.bert = BertEncoder(config)
        self.tokenizer, self.pooling, self.normalize = tokenizer, pooling, normalize
        self.max_len = max_len or config.max_position_embeddings

    @property
    def device(self) -> torch.device:
        return self.bert.embeddings.word.weight.device

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        e = masked_mean(hidden, attention_mask) if self.pooling == "mean" else hidden[:, 0]
        return F.normalize(e, p=2, dim=-1) if self.normalize else e          # (B, C)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        if attention_mask is None:                                           # [PAD] ids are padding
            attention_mask = input_ids != self.bert.config.pad_token_id
        return self.pool(self.bert(input_ids, attention_mask, token_type_ids), attention_mask)

    def tokenize(self, texts: Sequence[str], max_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ids (B, T), keep (B, T) bool)`` on the model's device, cut at ``max_len`` (default: the model's)."""
        if self.tokenizer is None:
            raise ValueError("this SentenceEncoder has no tokenizer: build it with tokenizer=... or call it on ids")
        ids, keep = self.tokenizer.encode_batch_with_mask(list(texts), max_len=max_len or self.max_len)
        return ids.to(self.device), keep.to(self.device)

    def encode(self, texts: Sequence[str] | str, batch_size: int = 64, max_len: int | None = None,
               max_tokens: int = 4096) -> torch.Tensor:
        """``(N, C)`` embeddings of ``texts`` (one str: ``(C,)``), no gradients; batches of similar length, <=
        ``batch_size`` texts and ``max_tokens`` tokens."""
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("encode expects a string or a list of strings")
        ids, keep = self.tokenize(texts, max_len)                          # (N, T) each
        lengths = keep.sum(1).tolist()
        batches: list[list[int]] = []
        for i in sorted(range(len(texts)), key=lambda i: -lengths[i]):      # longest first
            b = batches[-1] if batches else []
            if (not b or len(b) == batch_size or (len(b) + 1) * lengths[b[0]] > max_tokens
                    or 2 * lengths[i] < lengths[b[0]]):  # full, or much shorter than the batch's longest
                batches.append([])
            batches[-1].append(i)
        with evaluating(self):
            out = torch.empty(len(texts), self.bert.config.hidden_size, device=self.device)
            for idx in batches:                                              # cut to the batch's longest text
                out[idx] = self(ids[idx, : lengths[idx[0]]], keep[idx, : lengths[idx[0]]])
        return out[0] if single else out


class SentenceClassifier(nn.Module):
    """Fine-tuning head: mean-pooled (un-normalised) encoder output → dropout → linear; every weight trains.
    ``forward(input_ids (B, T), attention_mask (B, T) or None) -> (B, n_classes)``."""

    def __init__(self, encoder: SentenceEncoder, n_classes: int = 2, dropout: float = 0.1):
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(encoder.bert.config.hidden_size, n_classes)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if attention_mask is None:                                           # [PAD] ids are padding
            attention_mask = input_ids != self.encoder.bert.config.pad_token_id
        hidden = self.encoder.bert(input_ids, attention_mask)                # (B, T, C)
        return self.classifier(self.dropout(masked_mean(hidden, attention_mask)))   # (B, n_classes)
