"""The hyperparameters every layer shares (lessons 06-12, 16): models take them as keywords (``GPT(65, dropout=0.1)``)
and hand one ``LayerConfig`` to every part; each field has one default, here, and a model states only its recipe."""

from __future__ import annotations

import dataclasses

from .validation import check_bool, check_int, check_positive, check_probability

CHOICES = {"activation": ("relu", "gelu", "gelu_tanh"), "norm": ("layer", "rms"),
           "positions": ("sinusoidal", "learned", "rope"), "ffn": ("mlp", "swiglu")}


def check_pad_id(pad_id, vocab_size: int) -> int:
    pad_id = check_int(pad_id, "pad_id", 0)
    if pad_id >= vocab_size:
        raise ValueError(f"pad_id={pad_id} is outside the vocabulary [0, {vocab_size})")
    return pad_id


@dataclasses.dataclass(frozen=True)
class LayerConfig:
    """``dropout``: residual and embedding dropout; ``attn_dropout``/``ffn_dropout`` default to it. ``activation``:
    ``"relu"``, ``"gelu"`` or ``"gelu_tanh"``; ``norm_first``: pre-norm x + F(LN(x)), else post-norm LN(x + F(x));
    ``eps``, ``norm`` (``"layer"``/``"rms"``): every norm's; ``bias``: of every linear map and β; ``positions``:
    ``"sinusoidal"``/``"learned"`` tables or ``"rope"`` (rotates q, k; base ``rope_base``); ``ffn``: ``"mlp"`` or
    ``"swiglu"`` (W2(silu(W1 x) ⊙ W3 x)); ``n_kv_heads``: K/V heads (fewer: grouped-query)."""

    dropout: float = 0.0
    attn_dropout: float | None = None
    ffn_dropout: float | None = None
    activation: str = "relu"
    norm_first: bool = False
    eps: float = 1e-5
    norm: str = "layer"
    bias: bool = True
    positions: str = "sinusoidal"
    rope_base: float = 10000.0
    ffn: str = "mlp"
    n_kv_heads: int | None = None

    def __post_init__(self):
        for name in ("dropout", "attn_dropout", "ffn_dropout"):
            if getattr(self, name) is not None:
                check_probability(getattr(self, name), name)
        for name, choices in CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {sorted(choices)}, got {getattr(self, name)!r}")
        check_bool(self.norm_first, "norm_first")
        check_bool(self.bias, "bias")
        check_positive(self.eps, "eps")
        check_positive(self.rope_base, "rope_base")
        if self.n_kv_heads is not None:
            check_int(self.n_kv_heads, "n_kv_heads")

    @property
    def p_attn(self) -> float:  # the dropout on the attention weights
        return self.dropout if self.attn_dropout is None else self.attn_dropout

    @classmethod
    def merge(cls, given: dict, config: LayerConfig | None = None, **recipe) -> LayerConfig:
        """``config``, or ``recipe`` overridden by ``given``; unknown keywords, or keywords beside config: refused."""
        if config is not None and given:
            raise TypeError(f"pass either config= or layer keywords {sorted(given)}, not both")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(given) - names)
        if unknown:
            raise TypeError(f"unknown keyword(s) {unknown}; layer hyperparameters are {sorted(names)}")
        return config or cls(**{**recipe, **given})
