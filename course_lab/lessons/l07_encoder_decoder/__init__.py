"""Lesson 07 · encoder and decoder: parameter formulas, shape tables, size widget, exercise checks.

The notebook writes its encoder layer, decoder layer and model itself (and the stale-residual mistake, the
shape walk and the cross-attention plot on them); this module holds what would distract from that:

* :func:`parameter_breakdown` counts the parameters of an encoder–decoder (``course_utils.Transformer``, or the
  lesson's own model, which has the same pieces) per component *by
  formula* (for the widget); :func:`component_of` names the component of a parameter, so that the notebook can
  count a real model itself and compare;
* :func:`shape_table` (by formula) and :func:`shape_markdown` (a table) for the shapes the notebook measures
  during a real forward;
* :func:`demo_position_labels` for the heatmap of an untrained model (positions, not words);
* :func:`build_size_widget` (n_layers / n_heads / d_model → bar chart + shape table) and the ``check_*``
  functions of the exercises (they print a verdict and never raise, so the notebook always runs to the end).
"""

from __future__ import annotations

import torch

from course_utils.validation import check_divisible

from ... import i18n, viz
from .checks import check_decoder_layer as check_decoder_layer
from .checks import check_lean_decoder_layer_params as check_lean_decoder_layer_params
from .checks import check_reverse_tokens as check_reverse_tokens

# ------------------------------------------------------------------------------------------------------------
# Parameter counts: by formula and measured
# ------------------------------------------------------------------------------------------------------------

COMPONENTS = ("embeddings", "enc_self_attn", "enc_ffn", "enc_norm", "dec_self_attn", "dec_cross_attn",
              "dec_ffn", "dec_norm", "output")

COMPONENT_LABELS = {
    "embeddings": {"en": "embeddings", "zh": "嵌入矩阵"},
    "enc_self_attn": {"en": "encoder self-attention", "zh": "编码器自注意力"},
    "enc_ffn": {"en": "encoder FFN", "zh": "编码器前馈网络"},
    "enc_norm": {"en": "encoder LayerNorms", "zh": "编码器层归一化"},
    "dec_self_attn": {"en": "decoder self-attention", "zh": "解码器自注意力"},
    "dec_cross_attn": {"en": "cross-attention", "zh": "交叉注意力"},
    "dec_ffn": {"en": "decoder FFN", "zh": "解码器前馈网络"},
    "dec_norm": {"en": "decoder LayerNorms", "zh": "解码器层归一化"},
    "output": {"en": "output layer", "zh": "输出层"},
}


def _mha_params(d_model: int) -> int:
    """W^Q, W^K, W^V, W^O (d_model × d_model each) and their four biases."""
    return 4 * d_model * d_model + 4 * d_model


def _ffn_params(d_model: int, d_ff: int) -> int:
    """W_1 (d_model × d_ff) + b_1 (d_ff) + W_2 (d_ff × d_model) + b_2 (d_model)."""
    return 2 * d_model * d_ff + d_ff + d_model


def _norm_params(d_model: int) -> int:
    """LayerNorm: a gain γ and a bias β per dimension."""
    return 2 * d_model


def _encoder_layer_params(d_model: int, d_ff: int) -> int:
    return _mha_params(d_model) + _ffn_params(d_model, d_ff) + 2 * _norm_params(d_model)


def _decoder_layer_params(d_model: int, d_ff: int) -> int:
    """Masked self-attention + cross-attention + FFN + three LayerNorms."""
    return 2 * _mha_params(d_model) + _ffn_params(d_model, d_ff) + 3 * _norm_params(d_model)


def parameter_breakdown(d_model: int = 512, n_heads: int = 8, n_layers: int = 6, d_ff: int = 2048,
                        src_vocab: int = 37000, tgt_vocab: int = 37000, *, share_embeddings: bool = False,
                        tie_output: bool = False, final_norm: bool = False) -> dict[str, int]:
    """Parameters of ``course_utils.Transformer`` per component, by formula.

    ``n_layers`` encoder layers and ``n_layers`` decoder layers.

    ``share_embeddings``: one matrix for the source and target embeddings (needs one shared vocabulary, as the
    paper's English–German BPE); ``tie_output``: the output layer reuses the target embedding matrix
    (``tie_weights=True``; its bias of size ``tgt_vocab`` stays). ``n_heads`` only has to divide ``d_model``:
    the heads split the same matrices, so the count does not depend on it. Sinusoidal positions have no
    parameters.
    """
    check_divisible(d_model, n_heads)
    if share_embeddings and src_vocab != tgt_vocab:
        raise ValueError(f"share_embeddings needs one vocabulary for both languages, got "
                         f"src_vocab={src_vocab} and tgt_vocab={tgt_vocab}: use the same size or "
                         "share_embeddings=False")
    extra_norm = _norm_params(d_model) if final_norm else 0
    return {
        "embeddings": tgt_vocab * d_model + (0 if share_embeddings else src_vocab * d_model),
        "enc_self_attn": n_layers * _mha_params(d_model),
        "enc_ffn": n_layers * _ffn_params(d_model, d_ff),
        "enc_norm": n_layers * 2 * _norm_params(d_model) + extra_norm,
        "dec_self_attn": n_layers * _mha_params(d_model),
        "dec_cross_attn": n_layers * _mha_params(d_model),
        "dec_ffn": n_layers * _ffn_params(d_model, d_ff),
        "dec_norm": n_layers * 3 * _norm_params(d_model) + extra_norm,
        "output": (0 if tie_output else d_model * tgt_vocab) + tgt_vocab,
    }


def component_of(name: str) -> str:
    """The COMPONENTS entry a parameter name of ``course_utils.Transformer`` belongs to."""
    if name.startswith(("src_embed.", "tgt_embed.")):
        return "embeddings"
    if name.startswith("lm_head."):
        return "output"
    side = "enc" if name.startswith("encoder.") else "dec" if name.startswith("decoder.") else None
    if side is None:
        raise ValueError(f"parameter {name!r} belongs to no known component of course_utils.Transformer")
    for part, comp in ((".self_attn.", "self_attn"), (".cross_attn.", "cross_attn"), (".ffn.", "ffn")):
        if part in name:
            return f"{side}_{comp}"
    return f"{side}_norm"  # the residual sublayers' norms and the final norm


def build_base_model(share_embeddings: bool = True, tie_output: bool = True, device: str = "meta",
                     vocab: int = 37000):
    """The paper's base model (d_model 512, 8 heads, 6 + 6 layers, d_ff 2048) on the ``meta`` device.

    A meta tensor has a shape and a dtype but no storage, so 63M parameters cost no memory and no time: enough
    to count them and to check shapes, not to compute.
    """
    from course_utils.models import Transformer

    with torch.device(device):
        model = Transformer(vocab, vocab, d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6,
                            d_ff=2048, tie_weights=tie_output)
        if share_embeddings:  # the paper: one matrix for both embeddings and the pre-softmax linear layer
            model.src_embed.embedding.weight = model.tgt_embed.embedding.weight
    return model


def format_count(n: int) -> str:
    """63119496 -> '63.12M', 12345 -> '12.3k', 640 -> '640'."""
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if n >= 1_000:
        return f"{n / 1e3:.1f}k"
    return str(n)


# ------------------------------------------------------------------------------------------------------------
# Shapes: by formula and measured
# ------------------------------------------------------------------------------------------------------------

STAGES = ("src_ids", "src_vectors", "src_mask", "memory", "tgt_ids", "tgt_vectors", "self_weights",
          "cross_weights", "dec_out", "logits")

STAGE_LABELS = {
    "src_ids": {"en": "source token ids", "zh": "源序列词元 ID"},
    "src_vectors": {"en": "embeddings ×√d_model + PE", "zh": "嵌入 ×√d_model + 位置编码"},
    "src_mask": {"en": "source padding mask", "zh": "源序列填充掩码"},
    "memory": {"en": "encoder output (memory)", "zh": "编码器输出 memory"},
    "tgt_ids": {"en": "target ids (shifted right)", "zh": "目标词元 ID（右移一位）"},
    "tgt_vectors": {"en": "target embeddings ×√d_model + PE", "zh": "目标嵌入 ×√d_model + 位置编码"},
    "self_weights": {"en": "masked self-attention weights", "zh": "掩码自注意力权重"},
    "cross_weights": {"en": "cross-attention weights", "zh": "交叉注意力权重"},
    "dec_out": {"en": "decoder output", "zh": "解码器输出"},
    "logits": {"en": "logits", "zh": "logits"},
}

SYMBOLIC = {
    "src_ids": "(B, S)", "src_vectors": "(B, S, C)", "src_mask": "(B, 1, 1, S)", "memory": "(B, S, C)",
    "tgt_ids": "(B, T)", "tgt_vectors": "(B, T, C)", "self_weights": "(B, h, T, T)",
    "cross_weights": "(B, h, T, S)", "dec_out": "(B, T, C)", "logits": "(B, T, V)",
}


def shape_table(batch: int, src_len: int, tgt_len: int, d_model: int, n_heads: int, tgt_vocab: int
                ) -> dict[str, tuple[int, ...]]:
    """The shape of every stage of a forward pass, by formula (see :data:`SYMBOLIC`)."""
    check_divisible(d_model, n_heads)
    b, s, t, c, h, v = batch, src_len, tgt_len, d_model, n_heads, tgt_vocab
    return {"src_ids": (b, s), "src_vectors": (b, s, c), "src_mask": (b, 1, 1, s), "memory": (b, s, c),
            "tgt_ids": (b, t), "tgt_vectors": (b, t, c), "self_weights": (b, h, t, t),
            "cross_weights": (b, h, t, s), "dec_out": (b, t, c), "logits": (b, t, v)}


def shape_rows(shapes: dict[str, tuple[int, ...]], lang: str | None = None) -> list[tuple[str, str, str]]:
    """(stage, symbolic shape, numbers) rows for a table."""
    return [(i18n.pick(STAGE_LABELS[name], lang), SYMBOLIC[name], str(tuple(shapes[name])))
            for name in STAGES]


def shape_markdown(shapes: dict[str, tuple[int, ...]], lang: str | None = None) -> str:
    """A markdown table of :func:`shape_rows` (display it with ``IPython.display.Markdown``)."""
    head = i18n.pick({"en": "| stage | shape | here |", "zh": "| 阶段 | 形状 | 本例 |"}, lang)
    lines = [head, "|---|---|---|"]
    lines += [f"| {stage} | `{sym}` | `{num}` |" for stage, sym, num in shape_rows(shapes, lang)]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------------
# Labels for the cross-attention heatmap
# ------------------------------------------------------------------------------------------------------------

def demo_position_labels() -> tuple[list[str], list[str]]:
    """Neutral labels for the heatmap of an *untrained* model: source positions (two of them <pad>) and target
    positions. No words: an untrained model's weights are noise, and word labels would invite reading
    alignments into it."""
    return [f"x{i}" for i in range(1, 5)] + ["<pad>", "<pad>"], ["<bos>"] + [f"y{i}" for i in range(1, 5)]


# ------------------------------------------------------------------------------------------------------------
# Widget: n_layers / n_heads / d_model -> parameter breakdown and shapes
# ------------------------------------------------------------------------------------------------------------

WIDGET_VOCAB = 37000
WIDGET_SHAPE = {"batch": 2, "src_len": 7, "tgt_len": 5}
HEAD_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16)


def _render_size(n_layers: int, n_heads: int, d_model: int, share: bool, lang: str | None = None):
    code = viz.use_language(lang)
    if d_model % n_heads:
        raise ValueError(i18n.pick({
            "en": f"d_model={d_model} is not divisible by n_heads={n_heads}: every head gets d_model / h "
                  "dimensions, so choose another number of heads",
            "zh": f"d_model={d_model} 不能被 n_heads={n_heads} 整除：每个注意力头分到 d_model / h 维，"
                  "请换一个注意力头数"}, code))
    d_ff = 4 * d_model
    counts = parameter_breakdown(d_model, n_heads, n_layers, d_ff, WIDGET_VOCAB, WIDGET_VOCAB,
                                 share_embeddings=share, tie_output=share)
    total = sum(counts.values())
    shapes = shape_table(WIDGET_SHAPE["batch"], WIDGET_SHAPE["src_len"], WIDGET_SHAPE["tgt_len"], d_model,
                         n_heads, WIDGET_VOCAB)
    fig = viz.new_figure((12, 4.4))
    ax_bar, ax_tab = fig.subplots(1, 2, width_ratios=[1.15, 1])
    labels = [i18n.pick(COMPONENT_LABELS[c], code) for c in COMPONENTS]
    values = [counts[c] / 1e6 for c in COMPONENTS]
    colors = ["tab:gray"] + ["tab:blue"] * 3 + ["tab:orange"] * 4 + ["tab:green"]
    bars = ax_bar.barh(range(len(COMPONENTS)), values, color=colors)
    ax_bar.set_yticks(range(len(COMPONENTS)), labels=labels)
    ax_bar.invert_yaxis()
    for bar, c in zip(bars, COMPONENTS):
        ax_bar.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, " " + format_count(counts[c]),
                    va="center", fontsize=8)
    ax_bar.set_xlim(0, max(values) * 1.25)
    ax_bar.set_xlabel(i18n.pick({"en": "parameters (millions)", "zh": "参数量（百万）"}, code))
    ax_bar.set_title(i18n.pick({"en": "N={n}, h={h}, d_model={d}, d_ff={f}: {t} parameters",
                                "zh": "N={n}，h={h}，d_model={d}，d_ff={f}：共 {t} 个参数"}, code)
                     .format(n=n_layers, h=n_heads, d=d_model, f=d_ff, t=format_count(total)), fontsize=10)
    ax_tab.axis("off")
    header = [i18n.pick({"en": "stage", "zh": "阶段"}, code), i18n.pick({"en": "shape", "zh": "形状"}, code),
              i18n.pick({"en": "here", "zh": "本例"}, code)]
    rows = shape_rows(shapes, code)
    table = ax_tab.table(cellText=[list(r) for r in rows], colLabels=header, loc="center", cellLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.auto_set_column_width([0, 1, 2])
    table.scale(1, 1.35)
    ax_tab.set_title(i18n.pick({"en": "B={b}, S={s}, T={t}, |V|={v}, d_k={k}",
                                "zh": "B={b}，S={s}，T={t}，|V|={v}，d_k={k}"}, code)
                     .format(b=WIDGET_SHAPE["batch"], s=WIDGET_SHAPE["src_len"], t=WIDGET_SHAPE["tgt_len"],
                             v=WIDGET_VOCAB, k=d_model // n_heads), fontsize=10)
    state = {"n_layers": n_layers, "n_heads": n_heads, "d_model": d_model, "d_ff": d_ff, "share": share,
             "counts": counts, "total": total, "shapes": shapes, "d_k": d_model // n_heads}
    return fig, state


def build_size_widget(n_layers: int = 6, n_heads: int = 8, d_model: int = 512, share: bool = True):
    """Sliders for N, h and d_model (d_ff = 4·d_model, |V| = 37000): parameter breakdown and shape table."""
    import ipywidgets as widgets

    from ...widgets import LessonWidget, slider, toggle

    if n_heads not in HEAD_CHOICES:
        raise ValueError(f"n_heads={n_heads} is not one of the slider's values {HEAD_CHOICES}")
    controls = {
        "n_layers": slider("n_layers", 1, 12, 1, n_layers, label={"en": "layers N", "zh": "层数 N"}),
        "n_heads": widgets.SelectionSlider(options=list(HEAD_CHOICES), value=n_heads,
                                           description=i18n.pick({"en": "heads h", "zh": "注意力头数 h"}),
                                           continuous_update=False, style={"description_width": "initial"}),
        "d_model": slider("d_model", 64, 1024, 32, d_model,
                          label={"en": "d_model", "zh": "模型维度 d_model"}),
        "share": toggle("share", share, label={"en": "share embeddings and output matrix (paper)",
                                               "zh": "嵌入矩阵与输出层共享（论文做法）"}),
    }
    return LessonWidget(controls, _render_size,
                        title={"en": "How big is an encoder–decoder Transformer?",
                               "zh": "编码器-解码器 Transformer 有多大？"})

