"""Lesson 10 · the full Transformer on a real seq2seq task: English number words → Chinese numerals.

``45678`` → source ``"forty-five thousand, six hundred and seventy-eight"`` (``num2words``) → target
``"四万五千六百七十八"`` (``cn2an``). The two languages group digits differently (thousands against 万 = 10⁴) and
Chinese writes 零 for inner zeros, so the model must reorder and insert, not copy word by word.

The notebook writes the sampling plan, teacher forcing, the loss, the schedule and a greedy decoder itself; this
module holds what would distract from that:

* the data: :func:`source_text`, :func:`target_text`, :func:`split_numbers`, :func:`make_tokenizers`;
* :func:`translate` (greedy or beam search, ids → strings) and :func:`cross_attention_maps` (the decoder's
  cross-attention weights for one translation, via ``record_attention``);
* figures: :func:`plot_lr_schedule` and :func:`plot_cross_attention`;
* :func:`build_translation_widget`: a number (slider or text box) → source words, greedy and beam outputs and
  the cross-attention heatmap;
* the ``check_*`` functions of the exercises (they print a verdict and never raise).
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils import decoding
from course_utils.modes import evaluating, model_device
from course_utils.multihead import record_attention

from ... import i18n, viz
from .checks import check_encode_without_positions as check_encode_without_positions
from .checks import check_exact_match as check_exact_match
from .checks import check_smoothed_targets as check_smoothed_targets
from .checks import check_visible_labels as check_visible_labels
from .numbers import DIGIT_WORDS as DIGIT_WORDS
from .numbers import LARGEST_TEXT, MAX_NUMBER, _check_number
from .numbers import SOURCE_WORDS as SOURCE_WORDS
from .numbers import TARGET_CHARS as TARGET_CHARS
from .numbers import make_tokenizers as make_tokenizers
from .numbers import number_length as number_length
from .numbers import source_text as source_text
from .numbers import split_numbers as split_numbers
from .numbers import target_text as target_text

# ------------------------------------------------------------------------------------------------------------
# Translating and looking inside
# ------------------------------------------------------------------------------------------------------------

def translate(model, numbers, src_tok, tgt_tok, method: str = "greedy", beam_size: int = 4,
              max_new_tokens: int = 16, batch_size: int = 512) -> list[str]:
    """Translate ``numbers`` (ints) with ``course_utils.decoding.translate`` (greedy or beam); returns strings."""
    texts = [source_text(_check_number(n)) for n in numbers]
    return decoding.translate(model, texts, src_tok, tgt_tok, method=method, beam_size=beam_size,
                              max_new_tokens=max_new_tokens, batch_size=batch_size)


def cross_attention_maps(model, number: int, src_tok, tgt_tok, output: str | None = None) -> dict:
    """The decoder's cross-attention weights while it writes ``output`` (default: its greedy translation).

    Returns ``{"weights": (n_layers, h, T_out, T_src) tensor, "source": source tokens, "target": output tokens
    + "<eos>"}``. Row ``i`` is the step that *produces* target token ``i`` (its query reads the tokens before).
    """
    n = _check_number(number)
    if output is None:
        output = translate(model, [n], src_tok, tgt_tok, "greedy")[0]
    device = model_device(model)
    src = torch.tensor([src_tok.encode(source_text(n))], device=device)
    tgt_in = torch.tensor([tgt_tok.encode(output, add_bos=True)], device=device)   # <bos> y
    with evaluating(model), record_attention(model):
        model(src, tgt_in)
    weights = torch.stack([layer.cross_attn.last_weights[0] for layer in model.decoder.layers]).float().cpu()
    return {"weights": weights, "source": src_tok.tokenize(source_text(n)),
            "target": list(output) + ["<eos>"]}


def alignment(attn: dict, layer: int | None = None, head: int | None = None) -> list[tuple[str, str, float]]:
    """For each generated token, the source word it attends to most: ``[(token, word, weight), ...]``.

    ``layer`` / ``head`` pick one map; ``None`` averages over the layers / heads (as in :func:`plot_cross_attention`).
    """
    w = attn["weights"]
    w = w.mean(0) if layer is None else w[layer]
    w = w.mean(0) if head is None else w[head]                        # (T_out, T_src)
    best = w.max(dim=-1)
    return [(t, attn["source"][j], float(v)) for t, j, v in zip(attn["target"], best.indices.tolist(),
                                                                 best.values.tolist())]


# ------------------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------------------

def plot_lr_schedule(lrs, warmup: int, lang=None):
    """The learning rate of every update (``lrs``), with the end of warm-up marked."""
    code = viz.use_language(lang)
    lrs = np.asarray(lrs, dtype=float)
    steps = np.arange(1, len(lrs) + 1)
    fig = viz.new_figure((6.5, 3.5))
    ax = fig.add_subplot()
    ax.plot(steps, lrs, color="tab:blue")
    ax.axvline(warmup, color="tab:red", ls="--", lw=1)
    ax.annotate(i18n.pick({"en": f"warm-up ends (step {warmup})", "zh": f"预热结束（第 {warmup} 步）"}, code),
                (warmup, float(lrs.max())), textcoords="offset points", xytext=(6, -12), fontsize=9,
                color="tab:red")
    ax.set_xlabel(i18n.tr("step", code))
    ax.set_ylabel(i18n.tr("learning_rate", code))
    ax.set_title(i18n.pick({"en": "lrate ∝ min(step^-0.5, step · warmup^-1.5)",
                            "zh": "学习率 ∝ min(step^-0.5, step · warmup^-1.5)"}, code))
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    ax.grid(alpha=0.3)
    return fig


def plot_cross_attention(attn: dict, layer: int | None = None, head: int | None = None, title=None,
                         lang=None, figsize=None):
    """Heatmap of one translation's cross-attention: generated characters (rows) against source words.

    ``layer`` / ``head`` pick one map; ``None`` averages over the layers / heads. ``figsize`` fixes the size (the
    widget needs room for a long title); by default it follows the number of tokens.
    """
    code = viz.use_language(lang)
    w = attn["weights"]                                               # (L, h, T_out, T_src)
    w = w.mean(0) if layer is None else w[layer]
    w = w.mean(0) if head is None else w[head]
    ax = None
    if figsize is not None:
        ax = viz.new_figure(figsize).add_subplot()
    fig = viz.plot_attention(w, attn["target"], attn["source"], ax=ax, title=title, lang=code)
    ax = fig.axes[0]
    if figsize is not None:          # the widget: a long title across the whole figure, cells fill the width
        fig.colorbar(ax.images[0], ax=ax)                             # plot_attention leaves a given ax bare
        if title is not None:
            fig.suptitle(title, fontsize=10)
            ax.set_title("")
        ax.set_aspect("auto")
    ax.set_xlabel(i18n.pick({"en": "source words (keys)", "zh": "源语言单词（键）"}, code))
    ax.set_ylabel(i18n.pick({"en": "generated characters (queries)", "zh": "生成的汉字（查询）"}, code))
    return fig


# ------------------------------------------------------------------------------------------------------------
# Widget: a number -> words, greedy and beam outputs, cross-attention
# ------------------------------------------------------------------------------------------------------------

def _parse_number(text: str, fallback: int) -> int:
    text = (text or "").strip().replace(",", "").replace("_", "").replace(" ", "")
    if not text:
        return fallback
    # ASCII digits only: str.isdigit() also accepts "²" and "١٢٣", which int() then refuses or reads otherwise
    if not (text.isascii() and text.isdecimal()):
        shown = text if len(text) <= 20 else text[:17] + "..."
        raise ValueError(i18n.pick({"en": f"type a whole number such as 20305, not {shown!r}",
                                    "zh": f"请输入一个整数，例如 20305，而不是 {shown!r}"}))
    # the length first: int() of more than 4,300 digits raises Python's own "Exceeds the limit" error
    if len(text.lstrip("0")) > len(str(LARGEST_TEXT)) or int(text) > LARGEST_TEXT:
        digits = len(text.lstrip("0"))
        en, zh = (f"{int(text):,}",) * 2 if digits <= 20 else (f"a {digits:,}-digit number", f"{digits:,} 位的数")
        raise ValueError(i18n.pick({"en": f"{en} is too large: type at most {LARGEST_TEXT:,}",
                                    "zh": f"{zh} 太大了：最多输入 {LARGEST_TEXT:,}"}))
    return int(text)


def build_translation_widget(model, src_tok, tgt_tok, number: int = 45_678, beam_size: int = 4,
                             max_len: int = 16):
    """A slider (0..99,999) and a text box (any number; it wins when not empty) → the source words, the greedy
    and beam translations against the reference, and the cross-attention heatmap of the greedy translation."""
    from ipywidgets import Text

    from ...widgets import LessonWidget, dropdown, slider

    # max_len is this widget's name for decoding's max_new_tokens: say it in the widget's own words
    table = getattr(model, "max_len", None)
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1 or (table and max_len > table):
        most = f" and at most the model's max_len={table} (e.g. max_len={min(16, table)})" if table else ""
        raise ValueError(f"max_len={max_len!r}: the most characters to generate must be a whole number, at least 1"
                         f"{most}")
    n_layers = len(model.decoder.layers)
    n_heads = model.decoder.layers[0].cross_attn.n_heads
    layers = [(i18n.pick({"en": "mean of layers", "zh": "各层平均"}), -1)]
    layers += [(i18n.tr("layer_n", n=i + 1), i) for i in range(n_layers)]
    heads = [(i18n.pick({"en": "mean of heads", "zh": "各头平均"}), -1)]
    heads += [(i18n.tr("head_n", n=i + 1), i) for i in range(n_heads)]
    controls = {
        "number": slider("number", 0, MAX_NUMBER, 1, int(number), label={"en": "number", "zh": "数字"}),
        "text": Text(value="", placeholder=i18n.pick({"en": "or type one, e.g. 20305",
                                                      "zh": "或直接输入，例如 20305"}),
                     description=i18n.pick({"en": "typed number", "zh": "输入数字"}),
                     style={"description_width": "initial"}),
        "layer": dropdown("layer", layers, n_layers - 1, label={"en": "decoder layer", "zh": "解码器层"}),
        "head": dropdown("head", heads, -1, label={"en": "head", "zh": "注意力头"}),
    }

    def render(number, text, layer, head):
        n = _parse_number(text, number)
        greedy = translate(model, [n], src_tok, tgt_tok, "greedy", max_new_tokens=max_len)[0]
        beam = translate(model, [n], src_tok, tgt_tok, "beam", beam_size=beam_size, max_new_tokens=max_len)[0]
        reference = target_text(n)
        attn = cross_attention_maps(model, n, src_tok, tgt_tok, output=greedy)
        code = i18n.current_language()

        def shown(out):        # words, not ✓/✗: CJK fonts such as WenQuanYi have no glyphs for those marks
            verdict = i18n.pick({"en": "right", "zh": "对"} if out == reference else {"en": "wrong", "zh": "错"}, code)
            return i18n.pick({"en": f"{out or '(empty)'} ({verdict})", "zh": f"{out or '（空）'}（{verdict}）"}, code)

        outside = "" if n <= MAX_NUMBER else i18n.pick({"en": "  (outside the training range!)",
                                                          "zh": "（超出训练范围！）"}, code)
        title = i18n.pick({"en": "{n:,}: {src}{o}\nreference {ref} · greedy {g} · beam {b}",
                           "zh": "{n:,}：{src}{o}\n参考答案 {ref} · 贪心 {g} · 束搜索 {b}"}, code).format(
            n=n, src=source_text(n), o=outside, ref=reference, g=shown(greedy), b=shown(beam))
        fig = plot_cross_attention(attn, None if layer < 0 else layer, None if head < 0 else head, title=title,
                                   figsize=(8.5, 4.8))
        w = attn["weights"]
        w = w.mean(0) if layer < 0 else w[layer]
        w = w.mean(0) if head < 0 else w[head]
        state = {"number": n, "source": source_text(n), "source_tokens": attn["source"],
                 "target_tokens": attn["target"], "reference": reference, "greedy": greedy, "beam": beam,
                 "greedy_correct": greedy == reference, "beam_correct": beam == reference,
                 "in_range": n <= MAX_NUMBER, "weights": w.numpy()}
        return fig, state

    return LessonWidget(controls, render, title={"en": "English number words → Chinese numerals",
                                                 "zh": "英文数字单词 → 中文数字"})

