"""The hyperparameters every layer of a model shares, in one checked object (lessons 06, 07, 09–12).

Every model takes them as keywords and hands one ``LayerConfig`` to each of its layers and to its final norm::

    GPT(65, max_len=128, n_layers=4, d_model=128, n_heads=4, dropout=0.1, attn_dropout=0.0, bias=False)
"""

from __future__ import annotations

import dataclasses

from .validation import check_bool, check_int, check_number, check_probability


def check_size(value, name: str) -> int:
    """A positive int: a layer count, a width, a vocabulary size."""
    return check_int(value, name, 1)


def d_ff_or_default(d_ff, d_model: int) -> int:
    """The FFN width: ``None`` means 4·d_model (the paper's ratio); 0 or less is refused, not silently replaced."""
    return 4 * d_model if d_ff is None else check_size(d_ff, "d_ff")


def check_pad_id(pad_id, vocab_size: int) -> int:
    pad_id = check_int(pad_id, "pad_id", 0)
    if pad_id >= vocab_size:
        raise ValueError(f"pad_id={pad_id} is outside the vocabulary [0, {vocab_size})")
    return pad_id


@dataclasses.dataclass(frozen=True)
class LayerConfig:
    """Shared layer hyperparameters.

    * ``dropout``: residual dropout (and the embedding dropout of models); ``attn_dropout`` on the attention
      weights and ``ffn_dropout`` between the FFN's two linear maps default to it.
    * ``activation``: ``"relu"`` (the paper) or ``"gelu"`` (GPT, BERT).
    * ``norm_first``: pre-norm x + F(LN(x)) (GPT-2) instead of the paper's post-norm LN(x + F(x)).
    * ``eps``: ε of every norm; ``norm``: ``"layer"`` or ``"rms"``; ``bias``: biases of every linear map and β.
    """

    dropout: float = 0.1
    attn_dropout: float | None = None
    ffn_dropout: float | None = None
    activation: str = "relu"
    norm_first: bool = False
    eps: float = 1e-5
    norm: str = "layer"
    bias: bool = True

    def __post_init__(self):
        check_probability(self.dropout, "dropout")
        for name in ("attn_dropout", "ffn_dropout"):
            if getattr(self, name) is not None:
                check_probability(getattr(self, name), name)
        if self.activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be one of ['gelu', 'relu'], got {self.activation!r}")
        if self.norm not in ("layer", "rms"):
            raise ValueError(f"norm must be 'layer' or 'rms', got {self.norm!r}")
        check_bool(self.norm_first, "norm_first")
        check_bool(self.bias, "bias")
        if check_number(self.eps, "eps") <= 0:
            raise ValueError(f"eps must be > 0, got {self.eps}")

    @classmethod
    def merge(cls, given: dict, **defaults) -> LayerConfig:
        """The model's ``defaults`` overridden by the keywords the caller ``given``; unknown keywords refused."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(given) - names)
        if unknown:
            raise TypeError(f"unknown keyword(s) {unknown}; layer hyperparameters are {sorted(names)}")
        return cls(**{**defaults, **given})

    def as_kwargs(self) -> dict:
        return dataclasses.asdict(self)
