"""Lesson 13 · real pretrained weights: WordPiece traces, the reference numbers, SST-2 probes, the similarity
widget and the exercise checks.

The notebook loads all-MiniLM-L6-v2 into the course's own encoder and checks it; this module holds what would
distract from that: the reference embeddings computed by sentence-transformers (``course_lab/assets/minilm``), the
SST-2 subsets and the bag-of-words baseline, the plots, the widget and the checks of the students' exercises
(they never raise, so the notebook always runs to the end).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from course_utils.interop import copy_to_torch
from course_utils.modes import evaluating
from course_utils.pooling import masked_mean
from course_utils.wordpiece import UNK

from ... import i18n, viz
from ...assets import asset
from .checks import check_cls_pool as check_cls_pool
from .checks import check_padded_mean as check_padded_mean
from .checks import check_symmetric_loss as check_symmetric_loss
from .checks import check_wordpiece as check_wordpiece

REFERENCE_DIR = asset("minilm")      # sentence-transformers' numbers (tools/make_minilm_fixtures.py)
RESULTS_DIR = asset("results/cpu")   # measured on a 2-core CPU (benchmarks/finetune_minilm_sst2.py --json)

# Pairs that mean the same in other words, one that only shares words, and a Chinese sentence that means the
# same as the fourth: the model is English-only, which the heatmap shows.
DEMO_SENTENCES = (
    "A man is playing a guitar.",
    "Someone is strumming a guitar on stage.",
    "The movie was wonderful.",
    "I really enjoyed this film.",
    "The film about the stock market was boring.",
    "Share prices fell sharply today.",
    "这部电影很精彩。",
)

def _short(text: str, n: int = 34) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# ------------------------------------------------------------------------------------------------------------
# WordPiece, step by step
# ------------------------------------------------------------------------------------------------------------

def print_wordpiece_steps(word: str, tokenizer, lang=None) -> list[dict]:
    """Print, as a small table, how the greedy longest-match-first search reached ``tokenizer.wordpiece(word)``.

    The pieces come from the course's tokenizer (the search itself is lesson 13's exercise 4, so it is not written
    here a second time); each row adds what the search did to find the piece: its ``start`` (character offset) and
    how many candidates it ``tried``, longest first: the rest ``word[start:]`` has ``len(word) - start`` of them
    before it reaches the piece. Returns one dict per piece; a word with no split is one ``[UNK]`` row.
    """
    code = viz.use_language(lang)
    steps, start = [], 0
    for piece in tokenizer.wordpiece(word):
        if piece == UNK:
            steps = [{"start": None, "piece": UNK, "tried": None}]
            break
        length = len(piece.removeprefix("##")) if start else len(piece)
        steps.append({"start": start, "piece": piece, "tried": len(word) - start - length + 1})
        start += length
    head = i18n.pick({"en": ("start", "candidates tried", "piece"),
                      "zh": ("起点", "尝试的候选数", "匹配到的片段")}, code)
    print(f"{i18n.rjust(head[0], 5)}  {i18n.rjust(head[1], 16)}  {head[2]}")   # padded by display width
    for s in steps:
        if s["piece"] != UNK:
            print(f"{s['start']:>5}  {s['tried']:>16}  {s['piece']}")
    if steps and steps[-1]["piece"] == UNK:
        print(i18n.pick({"en": "→ some rest matched nothing: the whole word becomes [UNK]",
                         "zh": "→ 剩下的部分什么都匹配不上：整个词变成 [UNK]"}, code))
    return steps


def print_tokens(tokenizer, texts, lang=None) -> None:
    """Each text, its WordPiece tokens and their ids."""
    code = viz.use_language(lang)
    for text in texts:
        ids = tokenizer.encode(text)
        print(f"{text!r}")
        print("   ", " ".join(tokenizer.ids_to_tokens(ids)))
        print("   ", ids, i18n.pick({"en": f"({len(ids)} tokens)", "zh": f"（{len(ids)} 个词元）"}, code))


# ------------------------------------------------------------------------------------------------------------
# The reference: sentence-transformers' own numbers
# ------------------------------------------------------------------------------------------------------------

def load_reference(folder: str | Path | None = None) -> dict:
    """Sentences, token ids and embeddings that sentence-transformers computed (``tools/make_minilm_fixtures.py``).

    Returns ``{"sentences": [...], "input_ids": [[...]], "embeddings": (N, 384) tensor, "versions": {...}}``.
    """
    folder = Path(folder) if folder is not None else REFERENCE_DIR
    meta_path, emb_path = folder / "sentences.json", folder / "embeddings.npy"
    if not (meta_path.is_file() and emb_path.is_file()):
        raise FileNotFoundError(f"the reference files are missing in {folder}: they ship with the course package "
                                "(course_lab/assets/minilm); rebuild them with python tools/make_minilm_fixtures.py")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["embeddings"] = torch.from_numpy(np.load(emb_path))
    return meta


def mapping_table(report: list[dict], layer: int = 0, lang=None) -> str:
    """A few rows of :func:`course_utils.pretrained.load_bert_weights`' report as text: the embeddings and one
    layer (checkpoint name(s) → our parameter, shape, copy/stack)."""
    code = viz.use_language(lang)
    rows = [r for r in report if r["ours"].split(".")[1] == "embeddings"
            or f".layers.{layer}." in r["ours"]]
    heads = i18n.pick({"en": ("checkpoint (BERT names)", "course_utils parameter", "shape", "how"),
                       "zh": ("检查点中的名字（BERT）", "course_utils 中的参数", "形状", "方式")}, code)
    how = {"copy": i18n.pick({"en": "copy", "zh": "直接复制"}, code),
           "stack": i18n.pick({"en": "stack [Q; K; V]", "zh": "按 [Q; K; V] 堆叠"}, code)}
    lines = []
    for r in rows:
        names = r["checkpoint"]
        src = names[0] if len(names) == 1 else names[0].replace(".query.", ".{query,key,value}.")
        lines.append((src, r["ours"], str(tuple(r["shape"])), how[r["how"]]))
    # display widths (i18n.width): a Chinese character takes two columns, so len() would misalign the headers
    widths = [max(i18n.width(x[i]) for x in [heads, *lines]) for i in range(3)]
    return "\n".join("  ".join([*(i18n.ljust(x[i], widths[i]) for i in range(3)), x[3]]) for x in [heads, *lines])


def copy_layer_to_torch(layer) -> torch.nn.TransformerEncoderLayer:
    """PyTorch's own ``nn.TransformerEncoderLayer`` (post-norm, GELU) with the weights of one of our layers
    (copied by ``course_utils.interop.copy_to_torch``)."""
    d = layer.self_attn.d_model
    theirs = torch.nn.TransformerEncoderLayer(d, layer.self_attn.n_heads, layer.ffn.linear1.out_features,
                                              dropout=0.0, activation="gelu", batch_first=True, norm_first=False,
                                              layer_norm_eps=layer.self_attn_residual.norm.eps)
    return copy_to_torch(layer, theirs).eval()


# ------------------------------------------------------------------------------------------------------------
# Similarity matrix
# ------------------------------------------------------------------------------------------------------------

def plot_similarity(sim, labels, lang=None, title=None):
    """Heatmap of a cosine-similarity matrix ``(N, N)`` with the value in every cell."""
    sim = viz.to_numpy(sim, "sim")
    labels = [_short(str(s)) for s in labels]
    if sim.shape != (len(labels), len(labels)):
        raise ValueError(f"sim has shape {sim.shape} but there are {len(labels)} labels: one per row and column")
    code = viz.use_language(lang, labels)
    fig = viz.new_figure((8.5, 6.5))
    ax = fig.add_subplot()
    im = ax.imshow(sim, cmap="viridis", vmin=min(0.0, float(sim.min())), vmax=1.0)
    for i in range(sim.shape[0]):
        for j in range(sim.shape[1]):
            ax.text(j, i, f"{sim[i, j]:.2f}", ha="center", va="center", fontsize=9,
                    color="black" if sim[i, j] > 0.6 else "white")
    ax.set_xticks(range(len(labels)), labels=labels, rotation=35, ha="right")
    ax.set_yticks(range(len(labels)), labels=labels)
    ax.set_title(title or i18n.pick({"en": "Cosine similarity of MiniLM sentence embeddings",
                                     "zh": "MiniLM 句向量的余弦相似度"}, code))
    fig.colorbar(im, ax=ax, shrink=0.8, label=i18n.pick({"en": "cosine similarity", "zh": "余弦相似度"}, code))
    return fig


# ------------------------------------------------------------------------------------------------------------
# SST-2: data, bag-of-words baseline, probes, plot
# ------------------------------------------------------------------------------------------------------------

def load_sst2_subsets(n_train: int, seed: int = 0, download: bool = True):
    """``(train_rows, dev_rows, descriptions)``: ``n_train`` random SST-2 training phrases and the whole dev set
    (872) as ``(sentence, label)`` pairs, via ``course_utils.data.load_sst2`` (which falls back to a tiny bundled
    sample, with a warning, when the data is missing), and the loaders' one-line descriptions in the notebook's
    language (:func:`course_lab.data_text.describe`)."""
    from course_utils.data import load_sst2

    from ...data_text import describe

    train, dev = load_sst2("train", download=download), load_sst2("dev", download=download)
    rows = list(train)
    sub = random.Random(seed).sample(rows, min(n_train, len(rows)))
    return sub, list(dev), (describe(train), describe(dev))


def bag_of_words(tokenizer, train_texts, other_texts):
    """Count vectors over the WordPiece tokens seen in the training texts (a baseline with no pretraining).

    Returns ``(X_train (N, V'), X_other (M, V'))`` float tensors, V' = number of distinct training tokens.
    """
    train_ids = [tokenizer.encode(t, add_special_tokens=False) for t in train_texts]
    columns = {i: c for c, i in enumerate(sorted({i for ids in train_ids for i in ids}))}

    def counts(ids_list):
        x = torch.zeros(len(ids_list), max(1, len(columns)))
        for r, ids in enumerate(ids_list):
            for i in ids:
                if i in columns:
                    x[r, columns[i]] += 1.0
        return x

    return counts(train_ids), counts([tokenizer.encode(t, add_special_tokens=False) for t in other_texts])


def probe_curve(x_train, y_train, x_dev, y_dev, sizes, fit) -> list[float]:
    """Dev accuracy of ``fit(x, y) -> predict`` (the notebook's logistic regression) trained on the first ``n``
    training rows, for each ``n`` in ``sizes``."""
    out = []
    for n in sizes:
        predict = fit(x_train[:n], y_train[:n])
        out.append(float((predict(x_dev) == y_dev).float().mean()))
    return out


def plot_probe_curves(sizes, curves: dict, majority: float, lang=None):
    """Dev accuracy against the number of labelled training sentences, one line per feature kind."""
    code = viz.use_language(lang, list(curves))
    fig = viz.new_figure((6.5, 4.2))
    ax = fig.add_subplot()
    for (name, accs), marker in zip(curves.items(), "os^v"):
        ax.plot(sizes, accs, marker=marker, label=name)
    ax.axhline(majority, ls=":", color="tab:gray",
               label=i18n.pick({"en": "always the majority class", "zh": "总是猜多数类"}, code))
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(sizes), labels=[str(n) for n in sizes])
    ax.minorticks_off()
    ax.set_xlabel(i18n.pick({"en": "labelled training phrases", "zh": "带标签的训练短语数"}, code))
    ax.set_ylabel(i18n.pick({"en": "accuracy on SST-2 dev (872)", "zh": "SST-2 开发集准确率（872 句）"}, code))
    ax.set_title(i18n.pick({"en": "Linear probe: pretrained features need few labels",
                            "zh": "线性探测：预训练特征只需要少量标签"}, code))
    ax.set_ylim(0.4, 1.0)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right")
    return fig


# ------------------------------------------------------------------------------------------------------------
# Widget: two sentences → similarity and token view
# ------------------------------------------------------------------------------------------------------------

MAX_WIDGET_TOKENS = 40


def compare_sentences(model, tokenizer, a: str, b: str) -> dict:
    """Sentence cosine similarity of ``a`` and ``b`` and the token-by-token similarity of their contextual
    vectors. ``model`` is a :class:`~course_utils.pretrained.SentenceEncoder`."""
    texts = [a.strip(), b.strip()]
    if not all(texts):
        raise ValueError(i18n.pick({"en": "type a sentence in both boxes", "zh": "请在两个输入框里都写一句话"}))
    ids, keep = tokenizer.encode_batch_with_mask(texts)                     # (2, T), (2, T) True = real token
    n = keep.sum(1).tolist()
    if max(n) > MAX_WIDGET_TOKENS:
        raise ValueError(i18n.pick({"en": f"at most {MAX_WIDGET_TOKENS} tokens per sentence here (got {max(n)}): "
                                          "shorten it",
                                    "zh": f"这里每句最多 {MAX_WIDGET_TOKENS} 个词元（现在是 {max(n)} 个），请缩短"}))
    with evaluating(model):
        hidden = model.bert(ids.to(model.device), keep.to(model.device))    # (2, T, C)
        emb = F.normalize(masked_mean(hidden, keep.to(model.device)), dim=-1)  # (2, C)
    ha = F.normalize(hidden[0, : n[0]], dim=-1)
    hb = F.normalize(hidden[1, : n[1]], dim=-1)
    return {"similarity": float(emb[0] @ emb[1]),
            "tokens_a": tokenizer.ids_to_tokens(ids[0, : n[0]]),
            "tokens_b": tokenizer.ids_to_tokens(ids[1, : n[1]]),
            "token_similarity": (ha @ hb.T).float().cpu().numpy()}  # numpy has no bfloat16 (autocast)


def _render_compare(model, tokenizer, a: str, b: str, lang=None):
    res = compare_sentences(model, tokenizer, a, b)
    code = viz.use_language(lang, res["tokens_a"], res["tokens_b"])
    ta, tb = res["tokens_a"], res["tokens_b"]
    fig = viz.new_figure((min(13.0, 4.5 + 0.33 * len(tb)), min(9.0, 2.4 + 0.3 * len(ta))))
    grid = fig.add_gridspec(1, 2, width_ratios=[max(len(tb), 4), 1.2])
    ax = fig.add_subplot(grid[0])
    ax_bar = fig.add_subplot(grid[1])
    im = ax.imshow(res["token_similarity"], cmap="viridis", vmin=-0.2, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(tb)), labels=tb, rotation=90)
    ax.set_yticks(range(len(ta)), labels=ta)
    ax.set_xlabel(i18n.pick({"en": "tokens of sentence B", "zh": "句子 B 的词元"}, code))
    ax.set_ylabel(i18n.pick({"en": "tokens of sentence A", "zh": "句子 A 的词元"}, code))
    ax.set_title(i18n.pick({"en": "cosine of contextual token vectors", "zh": "上下文词元向量之间的余弦"}, code))
    fig.colorbar(im, ax=ax, shrink=0.8)
    s = res["similarity"]
    ax_bar.bar([0], [s], color="tab:green" if s >= 0.5 else "tab:orange", width=0.6)
    ax_bar.set_ylim(-0.2, 1.0)
    ax_bar.axhline(0, color="black", lw=0.8)
    ax_bar.set_xticks([0], labels=[i18n.pick({"en": "sentences", "zh": "整句"}, code)])
    ax_bar.set_title(i18n.pick({"en": "similarity\n{s:.3f}", "zh": "相似度\n{s:.3f}"}, code).format(s=s))
    return fig, res


def build_similarity_widget(model, tokenizer, a: str = DEMO_SENTENCES[2], b: str = DEMO_SENTENCES[3]):
    """Two boxes (type a sentence or pick one of :data:`DEMO_SENTENCES`) → their cosine similarity and the
    token-by-token similarity heatmap. ``w.state["similarity"]``, ``w.state["tokens_a"]`` … after each change."""
    import ipywidgets as widgets

    from ...widgets import LessonWidget

    def box(name, value, label):
        return widgets.Combobox(value=value, options=list(DEMO_SENTENCES), ensure_option=False,
                                continuous_update=False, description=i18n.pick(label),
                                layout=widgets.Layout(width="95%"), style={"description_width": "initial"})

    controls = {"a": box("a", a, {"en": "Sentence A", "zh": "句子 A"}),
                "b": box("b", b, {"en": "Sentence B", "zh": "句子 B"})}
    return LessonWidget(controls, lambda a, b: _render_compare(model, tokenizer, a, b),
                        title={"en": "Type or pick two sentences: how similar are they for MiniLM?",
                               "zh": "输入或选择两句话：在 MiniLM 看来它们有多相似？"})

