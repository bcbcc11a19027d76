"""Lesson 12 · masked language modelling: figures, the fill-in-the-blank widget and the exercise checks.

The masking itself is :func:`course_utils.mlm.mask_tokens`; the notebook trains a :class:`~course_utils.models.
MaskedLM` with it on tiny-shakespeare characters. This module holds what would distract from that:

* :func:`plot_masking`: which tokens of a batch were selected and what became of them (``<mask>`` / random /
  unchanged);
* :func:`fill_mask`: the top-k fill-ins of one hidden token, and :func:`build_fill_mask_widget` around it (type or
  pick a line, choose the character to hide, or hide its whole word → bar chart of the model's guesses);
* :func:`plot_scores`: masked-token accuracy against the unigram baselines;
* the ``check_*`` functions of the exercises (they print a verdict and never raise).

Every function works with any tokenizer of the course (characters or words): tokens are shown with
:func:`show_token`, which makes spaces and newlines visible.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import torch

from course_utils.mlm import IGNORE_INDEX
from course_utils.modes import evaluating, model_device

from ... import i18n, viz
from ...viz import show_token as show_token
from .checks import check_accuracy_at as check_accuracy_at
from .checks import check_corruption_shares as check_corruption_shares
from .checks import check_table_accuracy as check_table_accuracy
from .checks import check_whole_word_masking as check_whole_word_masking

# ------------------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------------------

_KINDS = ("kept", "mask", "random", "unchanged")
_COLORS = {"kept": "#f2f2f2", "mask": "#f4a259", "random": "#e4572e", "unchanged": "#76b041"}
_KIND_LABELS = {
    "kept": {"en": "not selected (label −100)", "zh": "未选中（标签 −100）"},
    "mask": {"en": "selected → <mask>", "zh": "选中 → <mask>"},
    "random": {"en": "selected → random token", "zh": "选中 → 随机词元"},
    "unchanged": {"en": "selected, left unchanged", "zh": "选中，保持不变"},
}


def masking_kinds(ids: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor) -> np.ndarray:
    """Per position: 0 not selected, 1 replaced by ``<mask>``, 2 by a random token, 3 selected but unchanged.

    A random draw that happens to pick the original token counts as unchanged (the model cannot tell).
    """
    selected = labels != IGNORE_INDEX
    same = inputs == ids
    kinds = torch.zeros(ids.shape, dtype=torch.long)
    kinds[selected & same] = 3
    kinds[selected & ~same] = 2
    return kinds.numpy()


def plot_masking(ids, inputs, labels, tok, mask_id: int | None = None, lang=None, max_len: int = 40):
    """One row per sequence, one cell per token (what the model reads), coloured by what masking did to it.

    ``<mask>`` is drawn as ``■``; under a corrupted cell the original token is shown in brackets.
    """
    code = viz.use_language(lang)
    mask_id = tok.mask_id if mask_id is None else mask_id
    kinds = masking_kinds(ids, inputs, labels)
    kinds[(inputs == mask_id).numpy() & (labels != IGNORE_INDEX).numpy()] = 1
    b = ids.shape[0]
    t = min(int((ids != tok.pad_id).sum(1).max()), max_len)  # up to the longest sequence
    longest = max((len(tok.itos[int(i)]) for i in ids[:, :t].flatten() if int(i) != tok.pad_id), default=1)
    cell = 0.38 if longest <= 2 else 0.9  # characters need narrow cells, words wide ones
    fig = viz.new_figure((1.2 + cell * t, 1.4 + 0.55 * b))
    ax = fig.add_subplot()
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    cmap = ListedColormap([_COLORS[k] for k in _KINDS])
    pad = (ids[:, :t] == tok.pad_id).numpy()
    ax.imshow(np.ma.masked_where(pad, kinds[:, :t]), cmap=cmap, vmin=-0.5, vmax=3.5, aspect="auto")
    for i in range(b):
        for j in range(t):
            if pad[i, j]:
                continue
            token = int(inputs[i, j])
            shown = "■" if token == mask_id else show_token(tok.itos[token])
            if kinds[i, j] in (1, 2):  # corrupted: show what it was, too
                shown = f"{shown}\n({show_token(tok.itos[int(ids[i, j])])})"
            ax.text(j, i, shown, ha="center", va="center", fontsize=7 if cell > 0.5 else 8)
    ax.set_xticks(range(0, t, 5 if t > 20 else 1))
    ax.set_yticks(range(b))
    ax.set_xlabel(i18n.tr("position", code))
    ax.set_ylabel(i18n.pick({"en": "sequence", "zh": "序列"}, code))
    fig.legend(handles=[Patch(color=_COLORS[k], label=i18n.pick(_KIND_LABELS[k], code)) for k in _KINDS],
               loc="outside lower center", ncols=4, fontsize=8)
    ax.set_title(i18n.pick({"en": "What the model reads (■ = <mask>; the original token in brackets)",
                            "zh": "模型读到的输入（■ = <mask>；括号里是原来的词元）"}, code))
    return fig


def plot_scores(scores: dict, n_baselines: int = 1, lang=None):
    """Horizontal bars: accuracy (in %) of each named predictor on the same masked positions; the first
    ``n_baselines`` entries are baselines (grey), the others models (blue)."""
    code = viz.use_language(lang)
    names = list(scores)
    values = [100 * float(scores[n]) for n in names]
    fig = viz.new_figure((7, 0.8 + 0.55 * len(names)))
    ax = fig.add_subplot()
    colors = ["tab:gray" if i < n_baselines else "tab:blue" for i in range(len(names))]
    ax.barh(range(len(names)), values, color=colors)
    for i, v in enumerate(values):
        ax.text(v + 0.5, i, f"{v:.1f}%", va="center")
    ax.set_yticks(range(len(names)), labels=names)
    ax.invert_yaxis()
    ax.set_xlim(0, max(values) * 1.2 + 1)
    ax.set_xlabel(i18n.pick({"en": "accuracy on the masked positions (%)", "zh": "被遮住位置上的准确率（%）"}, code))
    ax.grid(axis="x", alpha=0.3)
    return fig


# ------------------------------------------------------------------------------------------------------------
# Fill in the blank
# ------------------------------------------------------------------------------------------------------------


def tokens_of(tok, text: str) -> list[str]:
    """The tokens of ``text``; tokens outside the vocabulary are an error (they would silently become <unk>)."""
    tokens = tok.tokenize(text)
    unknown = sorted({t for t in tokens if t not in tok.stoi})
    if unknown:
        raise ValueError(i18n.pick({"en": "not in the vocabulary: {u}", "zh": "这些词元不在词表里：{u}"})
                         .format(u=" ".join(map(repr, unknown))))
    return tokens


def word_span(tokens: list[str], position: int) -> list[int]:
    """Positions of the word around ``position`` in a character sequence: the run of letters (and ') it is in."""
    def is_letter(t):
        return t.isalpha() or t == "'"

    if not is_letter(tokens[position]):
        return [position]
    lo, hi = position, position
    while lo > 0 and is_letter(tokens[lo - 1]):
        lo -= 1
    while hi + 1 < len(tokens) and is_letter(tokens[hi + 1]):
        hi += 1
    return list(range(lo, hi + 1))


@torch.no_grad()
def fill_mask(model, tok, tokens: list[str], position: int, k: int = 5, hide=None):
    """Hide ``tokens[position]`` (and the positions in ``hide``, default none) behind ``<mask>``; return the model's
    ``k`` best tokens for ``position`` and their probabilities. Special tokens are never proposed."""
    if not 0 <= position < len(tokens):
        raise ValueError(i18n.pick({"en": "position {p} is outside the sequence (0 to {n})",
                                    "zh": "位置 {p} 超出了序列的范围（0 到 {n}）"}).format(p=position,
                                                                                       n=len(tokens) - 1))
    ids = [tok.token_to_id(t) for t in tokens]
    for i in set(hide or []) | {position}:
        ids[i] = tok.mask_id
    with evaluating(model):  # dropout off, the caller's mode kept
        logits = model(torch.tensor([ids], device=model_device(model)))[0, position].float()  # (V,)
    logits[: tok.mask_id + 1] = float("-inf")  # never propose <pad> <unk> <bos> <eos> <mask>
    probs = torch.softmax(logits, dim=-1)
    top = probs.topk(min(k, len(probs) - tok.mask_id - 1))
    return [tok.itos[i] for i in top.indices.tolist()], top.values.tolist()


def _render_fill(model, tok, sentence: str, position: int, whole_word: bool, k: int, lang=None):
    code = viz.use_language(lang)
    tokens = tokens_of(tok, sentence)
    if not tokens:
        raise ValueError(i18n.pick({"en": "type a sentence first", "zh": "请先输入一个句子"}))
    if position >= len(tokens):
        raise ValueError(i18n.pick({"en": "the sentence has only {n} tokens: choose a position from 0 to {m}",
                                    "zh": "这个句子只有 {n} 个词元：请选择 0 到 {m} 之间的位置"})
                         .format(n=len(tokens), m=len(tokens) - 1))
    hidden = word_span(tokens, position) if whole_word else [position]
    guesses, probs = fill_mask(model, tok, tokens, position, k, hide=hidden)
    target = tokens[position]
    joiner = "" if all(len(t) == 1 for t in tokens) else " "
    shown = joiner.join(("[?]" if i == position else "■") if i in hidden else t for i, t in enumerate(tokens))
    fig = viz.new_figure((7.5, 1.6 + 0.36 * len(guesses)))
    ax = fig.add_subplot()
    colors = ["tab:green" if g == target else "tab:blue" for g in guesses]
    ax.barh(range(len(guesses)), probs, color=colors)
    ax.set_yticks(range(len(guesses)), labels=[show_token(g) for g in guesses])
    ax.invert_yaxis()
    for i, p in enumerate(probs):
        ax.text(p + 0.01, i, f"{p:.2f}", va="center", fontsize=9)
    ax.set_xlim(0, min(1.0, max(probs) * 1.25 + 0.05))
    ax.set_xlabel(i18n.pick({"en": "P(token at [?] | both sides)", "zh": "P([?] 处的词元 | 左右两侧的上下文)"}, code))
    title = i18n.pick({"en": "hidden: “{w}” ({n} masked)", "zh": "被遮住的是：“{w}”（共遮住 {n} 个）"}, code)
    ax.set_title(shown.replace("\n", "↵") + "\n" + title.format(w=show_token(target), n=len(hidden)), fontsize=10)
    rank = guesses.index(target) + 1 if target in guesses else None
    state = {"tokens": tokens, "position": position, "hidden": hidden, "target": target, "guesses": guesses,
             "probs": probs, "rank": rank, "masked_text": shown}
    return fig, state


def build_fill_mask_widget(model, tok, sentences, position: int = 1, k: int = 8):
    """Type or pick a sentence, choose the token to hide (optionally its whole word) → the top-k fill-ins."""
    from ...widgets import LessonWidget, slider, toggle

    sentences = list(sentences)
    if not sentences:
        raise ValueError("give at least one example sentence")
    sentence_box = widgets.Combobox(value=sentences[0], options=sentences, ensure_option=False,
                                    continuous_update=False, layout=widgets.Layout(width="95%"),
                                    description=i18n.pick({"en": "sentence", "zh": "句子"}),
                                    style={"description_width": "initial"})
    last = max(len(tok.tokenize(sentences[0])) - 1, 1)
    position_slider = slider("position", 0, last, 1, min(position, last),
                             label={"en": "token to hide (position)", "zh": "要遮住的词元（位置）"})

    def fit_slider(change):  # the slider's range follows the sentence (before the widget re-renders)
        n = len(tok.tokenize(change["new"]))
        if n >= 2:
            position_slider.max = n - 1

    sentence_box.observe(fit_slider, names="value")
    controls = {"sentence": sentence_box, "position": position_slider,
                "whole_word": toggle("whole_word", False, label={"en": "hide the whole word",
                                                                 "zh": "把整个单词都遮住"}),
                "k": slider("k", 3, 15, 1, int(k), label={"en": "top-k shown", "zh": "显示前 k 个"})}

    def render(sentence, position, whole_word, k):
        return _render_fill(model, tok, sentence, position, whole_word, k)

    return LessonWidget(controls, render, title={"en": "Fill in the blank", "zh": "完形填空"})
