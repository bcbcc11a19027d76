"""Lesson 17 · fine-tuning, all the weights or a low-rank few (LoRA): SST-2 slices, evaluation, the course models'
figures, the comparison plot, two widgets and the exercise checks.

The notebook types the fine-tuning loop, LoRA, the parameter counts, the merge and the bootstrap; this module holds
what would distract from them: reading the data and the manifests, batching the evaluation, drawing, and the
widgets (trainable parameters against rank and targets; merged against unmerged outputs in each float type).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch

from course_utils.modes import evaluating

from ... import i18n, viz
from ...assets import asset
from .checks import check_lora_count as check_lora_count
from .checks import check_lora_layer as check_lora_layer
from .checks import check_merge as check_merge
from .checks import check_which_change as check_which_change

RESULTS_DIR = asset("results/cpu")   # lesson 09's from-scratch run, measured on a 2-core CPU
COURSE_MODELS = ("minilm_sst2_full", "minilm_sst2_lora")

# Which linear layers of one encoder layer get adapters, by the names of course_utils' modules: q, k, v share
# the fused ``qkv_proj`` (3 blocks of d × d), o is ``out_proj``, the FFN is ``linear1`` (d → 4d) and ``linear2``.
TARGET_CHOICES = {
    "q, v": {"qkv_proj": (1, 0, 1)},
    "q, k, v, o": {"qkv_proj": (1, 1, 1), "out_proj": (1,)},
    "q, k, v, o + FFN": {"qkv_proj": (1, 1, 1), "out_proj": (1,), "linear1": (1,), "linear2": (1,)},
}


# ------------------------------------------------------------------------------------------------------------
# Data and evaluation
# ------------------------------------------------------------------------------------------------------------

def sst2_slices(n_train: int, n_dev: int, max_words: int = 12, seed: int = 0, download: bool = True):
    """``(train_rows, dev_rows, descriptions)``: ``n_train`` random SST-2 training phrases of at most
    ``max_words`` words (short: cheap steps on a CPU) and the first ``n_dev`` dev sentences (every method of the
    notebook is scored on these same ones)."""
    from course_utils.data import load_sst2

    from ...data_text import describe

    train, dev = load_sst2("train", download=download), load_sst2("dev", download=download)
    short = [row for row in train if len(row[0].split()) <= max_words]
    rows = random.Random(seed).sample(short, min(n_train, len(short)))
    return rows, list(dev)[:n_dev], (describe(train), describe(dev))


@torch.no_grad()
def predict(model, tokenizer, texts, batch_size: int = 64) -> torch.Tensor:
    """Labels ``(N,)`` that a sentence classifier (``model(ids, keep) -> (B, 2)``) gives ``texts``, batched by
    length so that little time goes into padding; dropout off."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = torch.empty(len(texts), dtype=torch.long)
    device = next(model.parameters()).device
    with evaluating(model):
        for start in range(0, len(order), batch_size):
            rows = order[start: start + batch_size]
            ids, keep = tokenizer.encode_batch_with_mask([texts[i] for i in rows])     # (b, T), (b, T)
            out[rows] = model(ids.to(device), keep.to(device)).argmax(-1).cpu()
    return out


# ------------------------------------------------------------------------------------------------------------
# The figures the notebook reads, never types
# ------------------------------------------------------------------------------------------------------------

def course_model_figures(folder: str | Path | None = None) -> dict:
    """``{name: manifest}`` of lesson 17's course models (only those present), read from their JSON manifests."""
    from course_utils.pretrained.course_models import course_models_dir

    root = course_models_dir(folder)
    return {name: json.loads((root / f"{name}.json").read_text(encoding="utf-8"))
            for name in COURSE_MODELS if (root / f"{name}.json").is_file()}


def lesson09_figures(folder: str | Path | None = None) -> dict:
    """Lesson 09's Transformer trained from scratch on SST-2: the course model's and the CPU run's dev accuracy,
    and the majority class, from ``course_models/sst2_classifier.json`` and the saved CPU result."""
    from course_utils.pretrained.course_models import course_models_dir

    course = json.loads((course_models_dir(folder) / "sst2_classifier.json").read_text(encoding="utf-8"))
    cpu = json.loads((RESULTS_DIR / "sst2_from_scratch.json").read_text(encoding="utf-8"))
    return {"course_dev": course["metrics"]["dev_accuracy"], "course_steps": course["metrics"]["steps"],
            "cpu_dev": cpu["dev_accuracy"], "majority": cpu["baseline"]}


def plot_comparison(rows: list[tuple[str, float, float, float]], lang=None):
    """Horizontal bars: ``(name, accuracy, low, high)`` per method, the interval as an error bar."""
    code = viz.use_language(lang, [name for name, *_ in rows])
    fig = viz.new_figure((7.5, 0.55 * len(rows) + 1.6))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    acc = [a for _, a, _, _ in rows]
    err = [[a - lo for _, a, lo, _ in rows], [hi - a for _, a, _, hi in rows]]
    ax.barh(ys, acc, xerr=err, color="tab:blue", alpha=0.75, capsize=4)
    ax.set_yticks(ys, labels=[name for name, *_ in rows])
    ax.set_xlim(0.45, 1.0)
    ax.axvline(0.5, color="tab:gray", ls=":")
    ax.set_xlabel(i18n.pick({"en": "accuracy on the same dev sentences (95 % bootstrap interval)",
                             "zh": "同一批开发集句子上的准确率（95% 自助法区间）"}, code))
    ax.grid(alpha=0.3, axis="x")
    return fig


# ------------------------------------------------------------------------------------------------------------
# Widget 1: trainable parameters against rank and targets
# ------------------------------------------------------------------------------------------------------------

def lora_counts(r: int, targets: str, d_model: int = 384, d_ff: int = 1536, n_layers: int = 6,
                n_classes: int = 2, total: int = 22_713_216) -> dict:
    """Trainable numbers of LoRA of rank ``r`` on ``TARGET_CHOICES[targets]`` (each adapted d_in → d_out block
    adds r · (d_in + d_out)) plus the head, against every weight of MiniLM (``total``) plus the head."""
    if targets not in TARGET_CHOICES:
        raise ValueError(f"targets must be one of {list(TARGET_CHOICES)}, got {targets!r}")
    shapes = {"qkv_proj": (d_model, d_model), "out_proj": (d_model, d_model), "linear1": (d_model, d_ff),
              "linear2": (d_ff, d_model)}
    limit = min(min(shapes[name]) for name in TARGET_CHOICES[targets])
    if not 1 <= r <= limit:
        raise ValueError(i18n.pick({"en": f"r must be between 1 and {limit} = min(d_in, d_out)",
                                    "zh": f"r 必须在 1 到 {limit} = min(d_in, d_out) 之间"}))
    per_layer = sum(r * sum(shapes[name]) * sum(blocks) for name, blocks in TARGET_CHOICES[targets].items())
    head = d_model * n_classes + n_classes
    lora = n_layers * per_layer + head
    return {"lora": lora, "full": total + head, "fraction": lora / (total + head), "adapter_bytes_fp16": 2 * lora}


def _render_counts(r: int, targets: str, lang=None):
    c = lora_counts(r, targets)
    code = viz.use_language(lang)
    fig = viz.new_figure((7.0, 3.0))
    ax = fig.add_subplot()
    names = [i18n.pick({"en": "full fine-tuning", "zh": "全参数微调"}, code), f"LoRA r = {r}"]
    ax.barh([1, 0], [c["full"], c["lora"]], color=["tab:orange", "tab:blue"])
    ax.set_xscale("log")
    ax.set_xlim(1e3, 1e8)
    ax.set_yticks([1, 0], labels=names)
    for y, v in ((1, c["full"]), (0, c["lora"])):
        ax.text(v * 1.1, y, f"{v:,}", va="center")
    ax.set_xlabel(i18n.pick({"en": "trainable parameters (log scale)", "zh": "可训练参数（对数坐标）"}, code))
    ax.set_title(i18n.pick({"en": f"{targets}: {c['fraction']:.2%} of the weights, {c['adapter_bytes_fp16'] / 1e6:.2f}"
                                  " MB in float16",
                            "zh": f"{targets}：占全部权重的 {c['fraction']:.2%}，float16 下 "
                                  f"{c['adapter_bytes_fp16'] / 1e6:.2f} MB"}, code))
    return fig, c


def build_rank_widget(r: int = 8, targets: str = "q, k, v, o"):
    """Rank slider and target dropdown → trainable parameters of LoRA against full fine-tuning (``w.state``:
    ``lora``, ``full``, ``fraction``, ``adapter_bytes_fp16``)."""
    from ...widgets import LessonWidget, dropdown, slider

    controls = {"r": slider("r", 1, 384, 1, r, {"en": "rank r", "zh": "秩 r"}),
                "targets": dropdown("targets", list(TARGET_CHOICES), targets,
                                    {"en": "adapted layers", "zh": "加适配器的层"})}
    return LessonWidget(controls, _render_counts, title={"en": "How many numbers does LoRA train?",
                                                         "zh": "LoRA 要训练多少个数？"})


# ------------------------------------------------------------------------------------------------------------
# Widget 2: merged against unmerged outputs, in each float type
# ------------------------------------------------------------------------------------------------------------

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def merge_gap(update_size: float, dtype: str, d: int = 384, r: int = 8, seed: int = 0) -> dict:
    """A d × d layer with a LoRA update of relative size ``update_size`` (‖ΔW‖ / ‖W‖), merged in ``dtype``:
    the largest gap between merged and unmerged outputs, relative to the update's own effect, and the share of
    the update's entries that rounding erased (W + ΔW == W in that dtype)."""
    if not 1e-6 <= update_size <= 1:
        raise ValueError(i18n.pick({"en": "the update size must be between 1e-6 and 1",
                                    "zh": "更新的相对大小必须在 1e-6 到 1 之间"}))
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(d, d, generator=g) / d ** 0.5                                 # (d, d)
    a, b = torch.randn(r, d, generator=g), torch.randn(d, r, generator=g)
    delta = b @ a
    delta *= update_size * w.norm() / delta.norm()                               # ‖ΔW‖ = update_size · ‖W‖
    x = torch.randn(64, d, generator=g)
    unmerged = x @ w.T + x @ delta.T                                             # float32, the adapter apart
    merged_w = (w.to(DTYPES[dtype]) + delta.to(DTYPES[dtype])).float()
    merged = x @ merged_w.T
    effect = (x @ delta.T).abs().max().item()
    erased = ((w.to(DTYPES[dtype]) + delta.to(DTYPES[dtype])) == w.to(DTYPES[dtype])).float().mean().item()
    gap = (merged - unmerged).abs().max().item()
    return {"gap": gap, "effect": effect, "relative_gap": gap / effect, "erased": erased,
            "merged": merged[0, :24].numpy(), "unmerged": unmerged[0, :24].numpy()}


def _render_merge(log_size: float, dtype: str, lang=None):
    s = merge_gap(10 ** log_size, dtype)
    code = viz.use_language(lang)
    fig = viz.new_figure((7.5, 3.2))
    ax = fig.add_subplot()
    ax.plot(s["unmerged"], "o", label=i18n.pick({"en": "W x + (α/r) B A x (float32)", "zh": "W x + (α/r) B A x"
                                                                                            "（float32）"}, code))
    ax.plot(s["merged"], "x", label=i18n.pick({"en": f"merged weight in {dtype}", "zh": f"合并后的权重（{dtype}）"},
                                              code))
    ax.set_xlabel(i18n.pick({"en": "output feature", "zh": "输出特征"}, code))
    ax.set_title(i18n.pick({"en": f"gap {s['gap']:.1e} = {s['relative_gap']:.0%} of the update's effect; "
                                  f"{s['erased']:.0%} of ΔW rounded away",
                            "zh": f"差距 {s['gap']:.1e}，是更新本身作用的 {s['relative_gap']:.0%}；"
                                  f"ΔW 中有 {s['erased']:.0%} 被舍入掉"}, code))
    ax.legend(loc="lower right", fontsize=9)
    ax.grid(alpha=0.3)
    return fig, {k: v for k, v in s.items() if k not in ("merged", "unmerged")}


def build_merge_widget(log_size: float = -2.0, dtype: str = "float32"):
    """Update size (log10 ‖ΔW‖ / ‖W‖) and float type of the merged weight → merged and unmerged outputs
    (``w.state``: ``gap``, ``relative_gap``, ``erased``)."""
    from ...widgets import LessonWidget, dropdown, slider

    controls = {"log_size": slider("log_size", -5.0, 0.0, 0.5, log_size,
                                   {"en": "log10 ‖ΔW‖/‖W‖", "zh": "log10 ‖ΔW‖/‖W‖"}),
                "dtype": dropdown("dtype", list(DTYPES), dtype, {"en": "merged in", "zh": "合并时的类型"})}
    return LessonWidget(controls, _render_merge, title={"en": "Merging B A into W: exact up to rounding?",
                                                        "zh": "把 B A 合并进 W：只差舍入误差吗？"})
