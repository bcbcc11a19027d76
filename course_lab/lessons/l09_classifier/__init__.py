"""Lesson 09 · encoder-only classifier: the two synthetic tasks, SST-2 helpers, the sentiment widget, the checks.

The notebook writes the pooling, the training recipe (``get_batch`` / ``loss_fn`` for ``course_utils.train.fit``)
and the baselines itself; this module holds what would distract from that:

* :func:`longest_run` and :func:`plot_rule_scores`: the "common mistake" synthetic task, whose labels are all 1;
* :func:`make_order_task`: "does A come before B?", balanced, and invisible to any position-free model;
* :func:`accuracy`, :func:`evaluate`, :func:`predict`, :func:`sentence_attention` and the figures
  :func:`plot_accuracies`, :func:`plot_predictions`;
* :func:`build_sentiment_widget`: a sentence → probability bars and the first layer's attention heatmap (with no
  model given it builds a tiny *untrained* one, which is what the tests and the widget-extremes test use);
* the ``check_*`` functions of the exercises (they print a verdict and never raise).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.modes import evaluating, model_device
from course_utils.multihead import record_attention

from ... import i18n, viz
from .checks import accuracy
from .checks import check_constant_loss as check_constant_loss
from .checks import check_early_stop as check_early_stop
from .checks import check_max_pool as check_max_pool
from .checks import check_prepend_cls as check_prepend_cls

LABEL_NAMES = {"en": ("negative", "positive"), "zh": ("负面", "正面")}

# Sentences written for this lesson (not from SST-2): plain praise and criticism, a negation, a contrast, and
# words that are rare in movie reviews. The model reads English; the Chinese notebook shows them as they are.
EXAMPLE_SENTENCES = (
    "a warm , funny and beautifully acted film .",
    "the plot is thin and the jokes fall flat .",
    "i expected to be bored , but it was wonderful .",
    "i expected it to be wonderful , but it was boring .",
    "the film is not good .",
    "the film is not bad at all .",
    "a dull , lifeless movie that never ends .",
    "the best thing i have seen this year .",
)


def label_names(lang: str | None = None) -> tuple[str, str]:
    """("negative", "positive") in the notebook's language."""
    return i18n.pick(LABEL_NAMES, lang)


# ------------------------------------------------------------------------------------------------------------
# Task 1: the synthetic data set of the "common mistake" slide
# ------------------------------------------------------------------------------------------------------------


def longest_run(seqs: torch.Tensor) -> torch.Tensor:
    """Length of the longest run of equal neighbours in each row: ``(N, T) -> (N,)`` (1 when no two agree)."""
    if seqs.dim() != 2 or seqs.size(1) == 0:
        raise ValueError(f"seqs must have shape (N, T) with T >= 1, got {tuple(seqs.shape)}")
    run = torch.ones(seqs.size(0), dtype=torch.long)
    best = run.clone()
    for t in range(1, seqs.size(1)):
        run = torch.where(seqs[:, t] == seqs[:, t - 1], run + 1, torch.ones_like(run))
        best = torch.maximum(best, run)
    return best


def plot_rule_scores(scores, threshold: float = 0.5, lang=None):
    """Histogram of the synthetic task's scores with its decision threshold: every score lies far to its right."""
    code = viz.use_language(lang)
    values = viz.to_numpy(scores, "scores").ravel()
    fig = viz.new_figure((7, 3.6))
    ax = fig.add_subplot()
    ax.hist(values, bins=40, color="tab:blue", alpha=0.85)
    ax.axvline(threshold, color="tab:red", linestyle="--")
    above = int((values > threshold).sum())
    note = i18n.pick({"en": f"threshold {threshold:g}\nlabel 1 to its right",
                      "zh": f"阈值 {threshold:g}\n右边标签为 1"}, code)
    ax.annotate(note, (threshold, 0.95), xycoords=("data", "axes fraction"), xytext=(6, 0),
                textcoords="offset points", va="top", color="tab:red", fontsize=9)
    ax.set_xlim(left=min(0.0, threshold - 0.5))
    ax.set_xlabel(i18n.pick({"en": "score of an example", "zh": "样本的得分"}, code))
    ax.set_ylabel(i18n.tr("count", code))
    ax.set_title(i18n.pick({"en": f"{above} of {values.size} scores are above the threshold: every label is 1",
                            "zh": f"{values.size} 个得分中有 {above} 个高于阈值：所有标签都是 1"}, code))
    return fig


# ------------------------------------------------------------------------------------------------------------
# Task 2: does A come before B?
# ------------------------------------------------------------------------------------------------------------

PAD_ID, A_ID, B_ID = 0, 1, 2
ORDER_VOCAB = ("<pad>", "A", "B", "c", "d", "e", "f", "g", "h", "i", "j", "k")


def make_order_task(n: int, min_len: int = 6, max_len: int = 12, vocab_size: int = len(ORDER_VOCAB),
                    seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` sequences with one ``A`` and one ``B`` among filler tokens; label 1 when A comes before B.

    Returns ``ids (n, max_len)`` right-padded with ``<pad>`` = 0 (lengths uniform in ``[min_len, max_len]``) and
    ``labels (n,)``, exactly half of them 1. Both classes contain the same tokens with the same distribution;
    only the *order* of A and B differs, so any model that ignores positions is at chance.
    """
    if not 2 <= min_len <= max_len:
        raise ValueError(f"need 2 <= min_len <= max_len (room for A and B), got min_len={min_len}, max_len={max_len}")
    if vocab_size < 4:
        raise ValueError(f"vocab_size={vocab_size} leaves no filler token: use at least 4 (<pad>, A, B, filler)")
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=g)
    ids = torch.randint(B_ID + 1, vocab_size, (n, max_len), generator=g)
    inside = torch.arange(max_len) < lengths[:, None]                       # (n, max_len) real positions
    keys = torch.rand(n, max_len, generator=g).masked_fill(~inside, 2.0)    # padding sorts last
    first, second = keys.argsort(dim=1)[:, :2].sort(dim=1).values.unbind(1)  # two distinct real positions
    labels = torch.randperm(n, generator=g) % 2                              # balanced, in random order
    rows = torch.arange(n)
    ids[rows, torch.where(labels == 1, first, second)] = A_ID
    ids[rows, torch.where(labels == 1, second, first)] = B_ID
    return ids.masked_fill(~inside, PAD_ID), labels


def order_tokens(ids: torch.Tensor) -> list[str]:
    """The token names of one sequence of the order task, padding dropped."""
    return [ORDER_VOCAB[i] for i in ids.tolist() if i != PAD_ID]


def plot_accuracies(results: dict, chance: float = 0.5, lang=None):
    """Horizontal bars of accuracies ``{name: accuracy}`` with the chance level marked."""
    code = viz.use_language(lang, list(results))
    names = list(results)
    values = [float(results[n]) for n in names]
    fig = viz.new_figure((7, 0.9 + 0.55 * len(names)))
    ax = fig.add_subplot()
    colors = ["tab:green" if v >= chance + 0.2 else "tab:gray" for v in values]
    ax.barh(range(len(names)), values, color=colors)
    for i, v in enumerate(values):
        inside = v > 0.85                                     # long bars: the number inside, else past the line
        ax.text(v - 0.01 if inside else max(v, chance) + 0.01, i, f"{v:.1%}", va="center",
                ha="right" if inside else "left", fontsize=9, color="white" if inside else "black")
    ax.set_yticks(range(len(names)), labels=names)
    ax.invert_yaxis()
    ax.axvline(chance, color="tab:red", linestyle="--")
    ax.set_xlim(0, 1)
    ax.set_xlabel(i18n.pick({"en": f"accuracy (dashed: chance = {chance:.0%})",
                             "zh": f"准确率（虚线：随机猜测 = {chance:.0%}）"}, code))
    return fig


# ------------------------------------------------------------------------------------------------------------
# Training and evaluation helpers
# ------------------------------------------------------------------------------------------------------------


def evaluate(model: nn.Module, ids: torch.Tensor, labels: torch.Tensor, batch_size: int = 512) -> dict:
    """``{"val_loss", "val_acc"}`` of ``model`` on padded ``ids (N, T)`` in eval mode, in chunks of ``batch_size``."""
    with evaluating(model):
        logits = torch.cat([model(ids[i:i + batch_size].to(model_device(model))).float().cpu()
                            for i in range(0, len(ids), batch_size)])
    return {"val_loss": F.cross_entropy(logits, labels).item(), "val_acc": accuracy(logits, labels)}


def _encode(tokenizer, sentence: str, max_len: int) -> list[int]:
    if not isinstance(sentence, str):
        raise TypeError(f"a sentence must be a str, got {type(sentence).__name__}")
    return tokenizer.encode(sentence)[:max_len]


def predict(model: nn.Module, tokenizer, sentences: Sequence[str], max_len: int = 64) -> torch.Tensor:
    """Class probabilities ``(N, n_classes)``: softmax of the logits, in eval mode (dropout off)."""
    if isinstance(sentences, str):
        raise TypeError("predict expects a list of sentences; wrap one sentence as [sentence]")
    rows = [_encode(tokenizer, s, max_len) for s in sentences]
    if any(len(r) == 0 for r in rows):
        raise ValueError("a sentence has no tokens: give every sentence at least one word")
    with evaluating(model):
        return torch.softmax(model(tokenizer.pad_batch(rows).to(model_device(model))).float(), dim=-1).cpu()


def sentence_attention(model: nn.Module, tokenizer, sentence: str, max_len: int = 64):
    """``(tokens, weights, probs)`` for one sentence: the tokens the model sees (unknown words are ``<unk>``),
    one ``(1, h, T, T)`` attention tensor per layer (recorded with ``record_attention``) and ``(n_classes,)``."""
    ids = _encode(tokenizer, sentence, max_len)
    if not ids:
        raise ValueError(i18n.pick({"en": "type a sentence with at least one word",
                                    "zh": "请输入至少包含一个词的句子"}))
    with evaluating(model), record_attention(model) as modules:
        logits = model(torch.tensor([ids], device=model_device(model)))
    weights = [m.last_weights.detach().float().cpu().clone() for m in modules]
    tokens = [tokenizer.itos[i] for i in ids]
    return tokens, weights, torch.softmax(logits[0].float(), -1).cpu()


def plot_predictions(sentences: Sequence[str], probs: torch.Tensor, lang=None):
    """One bar per sentence: P(positive), coloured by the predicted class, 0.5 marked."""
    code = viz.use_language(lang)
    p = viz.to_numpy(probs, "probs")
    if p.ndim != 2 or p.shape[0] != len(sentences):
        raise ValueError(f"probs must be (N, 2) for {len(sentences)} sentences, got {p.shape}")
    pos = p[:, 1]
    fig = viz.new_figure((9, 0.8 + 0.45 * len(sentences)))
    ax = fig.add_subplot()
    ax.barh(range(len(sentences)), pos, color=["tab:green" if v >= 0.5 else "tab:red" for v in pos])
    ax.set_yticks(range(len(sentences)), labels=[s if len(s) <= 60 else s[:57] + "..." for s in sentences])
    ax.invert_yaxis()
    ax.axvline(0.5, color="black", linewidth=0.8)
    ax.set_xlim(0, 1)
    neg, posname = label_names(code)
    ax.set_xlabel(i18n.pick({"en": f"P({posname}): left = {neg}, right = {posname}",
                             "zh": f"P({posname})：左边 = {neg}，右边 = {posname}"}, code))
    return fig


# ------------------------------------------------------------------------------------------------------------
# Widget: a sentence -> probabilities and attention
# ------------------------------------------------------------------------------------------------------------


def demo_model(seed: int = 0):
    """A tiny *untrained* classifier and a tokenizer built from the bundled sample sentences (for tests)."""
    from course_utils.data.samples import sample_sentiment
    from course_utils.models import EncoderClassifier
    from course_utils.tokenizers import WordTokenizer

    tokenizer = WordTokenizer.from_texts([text for text, _ in sample_sentiment()]
                                         + list(EXAMPLE_SENTENCES))
    with torch.random.fork_rng(devices=[]):  # leave the student's random stream untouched
        torch.manual_seed(seed)
        model = EncoderClassifier(tokenizer.vocab_size, 2, d_model=16, n_heads=2, n_layers=1, dropout=0.0)
    return model.eval(), tokenizer


def render_sentence(model, tokenizer, sentence: str, head: int = -1, lang=None):
    """The widget's figure: probability bars (left) and the first layer's attention (right).

    ``head = -1`` shows the mean over the heads, ``head = k`` head ``k`` (0-based).
    """
    code = viz.use_language(lang)
    sentence = sentence.strip()
    tokens, weights, probs = sentence_attention(model, tokenizer, sentence)
    first = weights[0][0]                                                   # (h, T, T)
    if not -1 <= head < first.size(0):
        raise ValueError(i18n.pick({"en": f"head must be -1 (mean) or 0..{first.size(0) - 1}",
                                    "zh": f"head 应为 -1（平均）或 0..{first.size(0) - 1}"}, code))
    shown = first.mean(0) if head == -1 else first[head]                    # (T, T)
    names = label_names(code)
    fig = viz.new_figure((min(13.0, 5.5 + 0.4 * len(tokens)), min(9.0, 2.8 + 0.33 * len(tokens))))
    ax_p, ax_a = fig.subplots(1, 2, width_ratios=[1, 3])
    p = probs.numpy()
    ax_p.bar([0, 1], p, color=["tab:red", "tab:green"])
    for i, v in enumerate(p):
        ax_p.text(i, v, f"{v:.1%}", ha="center", va="bottom", fontsize=9)
    ax_p.set_xticks([0, 1], labels=list(names))
    ax_p.set_ylim(0, 1.1)
    ax_p.set_ylabel(i18n.tr("probability", code))
    pred = int(p.argmax())
    ax_p.set_title(i18n.pick({"en": f"prediction: {names[pred]}", "zh": f"预测：{names[pred]}"}, code))
    which = (i18n.pick({"en": "mean of the heads", "zh": "各注意力头的平均"}, code) if head == -1
             else i18n.tr("head_n", code, n=head + 1))
    viz.plot_attention(shown, tokens, tokens, ax=ax_a, lang=code,
                       title=f"{i18n.tr('layer_n', code, n=1)} · {which}")
    state = {"sentence": sentence, "tokens": tokens, "probs": p.copy(), "prediction": pred,
             "label": names[pred], "head": head, "weights": shown.numpy().copy(),
             "unknown": sum(t == tokenizer.itos[tokenizer.unk_id] for t in tokens)}
    return fig, state


def build_sentiment_widget(model: nn.Module | None = None, tokenizer=None,
                           sentences: Sequence[str] = EXAMPLE_SENTENCES, lang: str | None = None):
    """Pick an example (or type a sentence: a non-empty text box wins) and a head → prediction + attention.

    Without a model, a tiny untrained one from :func:`demo_model` is used (the tests and CI do this).
    """
    import ipywidgets as widgets

    from ...widgets import _STYLE, LessonWidget, dropdown

    if (model is None) != (tokenizer is None):
        raise ValueError("pass both model and tokenizer (the vocabulary the model was trained with), or neither")
    if model is None:
        model, tokenizer = demo_model()
    if not sentences:
        raise ValueError("sentences must contain at least one example sentence")
    n_heads = model.encoder.layers[0].self_attn.n_heads
    controls = {
        "example": dropdown("example", list(sentences), label={"en": "Example", "zh": "例句"}, lang=lang),
        "text": widgets.Text(value="", continuous_update=False, style=_STYLE,
                             layout=widgets.Layout(width="90%"),
                             placeholder=i18n.pick({"en": "or type your own sentence and press Enter",
                                                    "zh": "或者输入你自己的（英文）句子，按回车"}, lang),
                             description=i18n.pick({"en": "Your sentence", "zh": "你的句子"}, lang)),
        "head": dropdown("head", [({"en": "mean of the heads", "zh": "各注意力头的平均"}, -1)]
                         + [(i18n.tr("head_n", lang, n=i + 1), i) for i in range(n_heads)], -1,
                         label={"en": "Layer 1", "zh": "第 1 层"}, lang=lang),
    }

    def render(example, text, head):
        return render_sentence(model, tokenizer, text.strip() or example, head, lang)

    return LessonWidget(controls, render, title={"en": "What does the classifier think?",
                                                 "zh": "分类器怎么看这句话？"})
