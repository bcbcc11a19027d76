"""Lesson 00 (welcome): the course map, the setup check and the lesson-picker demo.

* :data:`LESSONS` — one line per lesson (title, summary, key formula) in both languages; the course map
  table of the notebook shows the same texts (``tests/test_lesson_00.py`` keeps them in sync).
* :func:`environment_report` / :func:`cjk_font_report` — what the student's machine has (versions, device,
  a font that can draw Chinese), as plain dicts that the notebook asserts on.
* :func:`build_course_map_widget` — pick a lesson, see its one-line summary and key formula.
* :func:`check_device_choice`, :func:`check_mha_parameter_count`, :func:`check_attention_memory` — the
  exercise checks, built on the shared
  :mod:`course_lab.exercises` (they never raise, so the notebook runs in CI whether or not the student has
  done the exercise).
"""

from __future__ import annotations

import os
import platform
import textwrap
from dataclasses import dataclass

import torch

from ... import fonts, i18n, viz
from .checks import check_attention_memory as check_attention_memory
from .checks import check_device_choice as check_device_choice
from .checks import check_mha_parameter_count as check_mha_parameter_count

# --- the course map -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lesson:
    number: int
    title: dict[str, str]
    summary: dict[str, str]
    formula: str  # matplotlib mathtext (a subset of LaTeX), drawn by the widget


LESSONS: tuple[Lesson, ...] = (
    Lesson(0, {"en": "Welcome", "zh": "欢迎"},
           {"en": "What a Transformer is, the course map, and a check that your setup works.",
            "zh": "Transformer 是什么、课程地图，以及环境检查。"},
           r"$p(y \mid x) = \prod_t \, p(y_t \mid y_{<t}, x)$"),
    Lesson(1, {"en": "Tokens to vectors", "zh": "从词元到向量"},
           {"en": "Tokenization, the vocabulary, the embedding matrix and the √d_model scale.",
            "zh": "分词、词表、嵌入矩阵，以及为什么要乘以 √d_model。"},
           r"$x_i = E_{t_i}\,\sqrt{d_{\mathrm{model}}} + PE(pos_i)$"),
    Lesson(2, {"en": "Positional encoding", "zh": "位置编码"},
           {"en": "Sinusoidal positions, relative shifts as rotations, learned alternatives.",
            "zh": "正弦位置编码、相对位移即旋转、可学习的位置嵌入。"},
           r"$PE_{(pos,2i)} = \sin(pos / 10000^{2i/d_{\mathrm{model}}})$"),
    Lesson(3, {"en": "Scaled dot-product attention", "zh": "缩放点积注意力"},
           {"en": "Queries, keys and values; why the scores are divided by √d_k.",
            "zh": "查询、键和值；为什么分数要除以 √d_k。"},
           r"$\mathrm{Attention}(Q,K,V) = \mathrm{softmax}(QK^{T} / \sqrt{d_k})\,V$"),
    Lesson(4, {"en": "Multi-head attention", "zh": "多头注意力"},
           {"en": "h heads on d_model/h-wide projections, concatenated and projected by W^O.",
            "zh": "h 个注意力头各自在 d_model/h 维的投影上计算，拼接后经 W^O 投影。"},
           r"$\mathrm{MultiHead} = \mathrm{Concat}(\mathrm{head}_1, \ldots, \mathrm{head}_h)\,W^O$"),
    Lesson(5, {"en": "Masking", "zh": "掩码"},
           {"en": "Padding and causal masks: which keys each query may see.",
            "zh": "填充掩码和因果掩码：每个查询能看到哪些键。"},
           r"$\mathrm{softmax}(QK^{T} / \sqrt{d_k} + M)\,V,\quad M_{ij} \in \{0, -\infty\}$"),
    Lesson(6, {"en": "Feed-forward network, residual connections, LayerNorm",
               "zh": "前馈网络、残差连接与层归一化"},
           {"en": "The position-wise FFN, residuals, LayerNorm and RMSNorm.",
            "zh": "逐位置前馈网络、残差连接、层归一化与 RMSNorm。"},
           r"$\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$"),
    Lesson(7, {"en": "Encoder and decoder", "zh": "编码器与解码器"},
           {"en": "Stacking layers into the paper's encoder-decoder; cross-attention.",
            "zh": "把层堆叠成论文中的编码器-解码器；交叉注意力。"},
           r"$z = \mathrm{Encoder}(x),\quad y_t \sim \mathrm{Decoder}(y_{<t}, z)$"),
    Lesson(8, {"en": "Output layer and cross-entropy", "zh": "输出层与交叉熵"},
           {"en": "Logits over the vocabulary, a stable log-softmax, cross-entropy, label smoothing, perplexity.",
            "zh": "词表上的 logits、数值稳定的 log-softmax、交叉熵、标签平滑与困惑度。"},
           r"$\mathcal{L} = -\frac{1}{T}\sum_t \log p(y_t \mid y_{<t}, x),"
           r"\quad \mathrm{PPL} = e^{\mathcal{L}}$"),
    Lesson(9, {"en": "Encoder-only classifier", "zh": "仅编码器分类器"},
           {"en": "Sentiment classification with a Transformer encoder, and the training loop around it.",
            "zh": "用 Transformer 编码器做情感分类，以及围绕它的训练循环。"},
           r"$p(c \mid x) = \mathrm{softmax}(W \bar{h} + b)_c,\quad \bar{h} = \frac{1}{T}\sum_i h_i$"),
    Lesson(10, {"en": "Seq2seq translator", "zh": "序列到序列翻译"},
           {"en": "Training an encoder-decoder; greedy decoding and beam search.",
            "zh": "训练一个编码器-解码器模型；贪心解码与束搜索。"},
           r"$\hat{y} = \arg\max_y \sum_t \log p(y_t \mid y_{<t}, x)$"),
    Lesson(11, {"en": "GPT", "zh": "GPT"},
           {"en": "A decoder-only language model: next-token prediction, sampling, the KV cache.",
            "zh": "仅解码器语言模型：下一个词元预测、采样生成、KV 缓存。"},
           r"$p(x) = \prod_t \, p(x_t \mid x_{<t})$"),
    Lesson(12, {"en": "Masked LM", "zh": "掩码语言模型"},
           {"en": "BERT-style masked language modelling: predict hidden tokens from both sides.",
            "zh": "BERT 式的掩码语言模型：根据左右两侧的上下文预测被遮住的词元。"},
           r"$\mathcal{L} = -\sum_{i \in M} \log p(x_i \mid x_{\setminus M})$"),
    Lesson(13, {"en": "Pretrained weights (MiniLM)", "zh": "预训练权重（MiniLM）"},
           {"en": "Loading all-MiniLM-L6-v2 into the course's own encoder.",
            "zh": "把 all-MiniLM-L6-v2 的权重装进课程自己写的编码器。"},
           r"$\theta_{\mathrm{ours}} \leftarrow \theta_{\mathrm{MiniLM}},"
           r"\quad h_{\mathrm{ours}}(x) = h_{\mathrm{MiniLM}}(x)$"),
    Lesson(14, {"en": "Going fast", "zh": "让模型跑得更快"},
           {"en": "Fused attention, torch.compile, mixed precision, and how to measure speed.",
            "zh": "融合注意力、torch.compile、混合精度，以及如何测速。"},
           r"$\mathrm{cost} \propto T^2 d_{\mathrm{model}} + T\, d_{\mathrm{model}}^2$"),
)


def lesson_info(number: int, lang: str | None = None) -> dict:
    """``{"number", "title", "summary", "formula"}`` of one lesson in the current (or given) language."""
    if isinstance(number, bool) or not isinstance(number, int):
        raise TypeError(f"number must be an int between 0 and {len(LESSONS) - 1}, got {number!r}")
    if not 0 <= number < len(LESSONS):
        raise ValueError(f"there is no lesson {number}: the course has lessons 0 to {len(LESSONS) - 1}")
    lesson = LESSONS[number]
    return {"number": number, "title": i18n.pick(lesson.title, lang),
            "summary": i18n.pick(lesson.summary, lang), "formula": lesson.formula}


def course_map(lang: str | None = None) -> list[dict]:
    """Every lesson as :func:`lesson_info` dicts, in order."""
    return [lesson_info(lesson.number, lang) for lesson in LESSONS]


# --- the setup check ----------------------------------------------------------------------------------------


def cjk_font_report() -> dict:
    """Which installed font draws the Chinese labels: ``{"font", "file", "draws_chinese", "hint"}``.

    ``font`` is None when no installed font covers Chinese; ``hint`` then says how to install one. The check
    opens the font file and looks up every Chinese character of the shared plot labels, so a font that only
    *claims* to be CJK does not pass.
    """
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    name = viz.find_cjk_font()
    if name is None:
        return {"font": None, "file": None, "draws_chinese": False, "hint": fonts.missing_font_message()}
    path = font_manager.findfont(font_manager.FontProperties(family=name), fallback_to_default=False)
    labels = "".join(label["zh"] for label in i18n.LABELS.values())
    chars = sorted({c for c in labels if "\u4e00" <= c <= "\u9fff"})
    font = FT2Font(path)
    missing = [c for c in chars if not font.get_char_index(ord(c))]
    hint = "" if not missing else f"{name} lacks {''.join(missing)}: install fonts-noto-cjk for full coverage"
    return {"font": name, "file": str(path), "draws_chinese": not missing, "hint": hint}


def environment_report() -> dict:
    """Versions of the course's dependencies, the device lessons use, the language and the Chinese font."""
    import ipywidgets
    import matplotlib
    import numpy

    from course_utils.train import pick_device

    device = pick_device()
    font = cjk_font_report()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "matplotlib": matplotlib.__version__,
        "ipywidgets": ipywidgets.__version__,
        "device": device.type,
        "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                        else i18n.pick({"en": f"{platform.machine()}, {os.cpu_count()} CPU cores",
                                        "zh": f"{platform.machine()}，{os.cpu_count()} 个 CPU 核心"})),
        "language": i18n.current_language(),
        "cjk_font": font["font"],
        "cjk_font_ok": font["draws_chinese"],
    }


_REPORT_LABELS = {"device": {"en": "device", "zh": "计算设备"}, "device_name": {"en": "device name", "zh": "设备名称"},
                  "language": {"en": "language", "zh": "语言"}, "cjk_font": {"en": "CJK font", "zh": "中文字体"},
                  "cjk_font_ok": {"en": "draws Chinese", "zh": "能显示中文"}}


def print_environment_report(report: dict, lang: str | None = None) -> None:
    """One line per entry of :func:`environment_report`, its label in the notebook's language (package names
    stay as they are), aligned by display width (a Chinese character takes two columns)."""
    rows = []
    for key, value in report.items():
        label = i18n.pick(_REPORT_LABELS[key], lang) if key in _REPORT_LABELS else key
        if isinstance(value, bool):
            value = i18n.pick({"en": "yes" if value else "no", "zh": "是" if value else "否"}, lang)
        rows.append((label, value))
    width = max(i18n.width(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"{i18n.ljust(label, width)}{value}")


# --- the widget: pick a lesson, read its summary and formula ------------------------------------------------

_PARTS = ((0, 2, {"en": "Inputs", "zh": "输入"}), (3, 5, {"en": "Attention", "zh": "注意力"}),
          (6, 8, {"en": "Building the model", "zh": "搭建模型"}), (9, 14, {"en": "Training and using it",
                                                                           "zh": "训练与应用"}))


def part_of(number: int, lang: str | None = None) -> str:
    """Name of the part of the course that lesson ``number`` belongs to."""
    for first, last, name in _PARTS:
        if first <= number <= last:
            return i18n.pick(name, lang)
    raise ValueError(f"there is no lesson {number}: the course has lessons 0 to {len(LESSONS) - 1}")


def render_lesson_card(lesson: int, lang: str | None = None):
    """A figure: the lessons as a strip (the chosen one highlighted) above its title, summary and formula."""
    code = viz.use_language(lang)
    info = lesson_info(lesson, code)
    fig = viz.new_figure((8, 3.2))
    fig.set_layout_engine("none")  # the two panels are placed by hand below
    strip = fig.add_axes((0.03, 0.72, 0.94, 0.2))
    colors = ["#d62728" if n == lesson else "#c7d7ea" for n in range(len(LESSONS))]
    strip.bar(range(len(LESSONS)), [1] * len(LESSONS), color=colors, width=0.9)
    for n in range(len(LESSONS)):
        strip.text(n, 0.5, f"{n:02d}", ha="center", va="center", fontsize=9,
                   color="white" if n == lesson else "black")
    strip.set_axis_off()
    strip.set_xlim(-0.5, len(LESSONS) - 0.5)
    card = fig.add_axes((0.03, 0.02, 0.94, 0.66))
    card.set_axis_off()
    width = 36 if code == "zh" else 70  # a Chinese character is about twice as wide as a Latin letter
    card.text(0.0, 0.92, f"{lesson:02d} · {info['title']}   ({part_of(lesson, code)})", fontsize=14, va="top")
    card.text(0.0, 0.68, textwrap.fill(info["summary"], width), fontsize=11, va="top")
    card.text(0.5, 0.12, info["formula"], fontsize=15, ha="center", va="center")
    return fig, {**info, "part": part_of(lesson, code), "highlighted": colors.index("#d62728")}


def build_course_map_widget(lang: str | None = None):
    """A dropdown of the lessons; each choice redraws the card (state: number, title, summary, formula...)."""
    from ...widgets import LessonWidget, dropdown

    options = [(f"{lesson.number:02d} · {i18n.pick(lesson.title, lang)}", lesson.number)
               for lesson in LESSONS]
    control = dropdown("lesson", options, value=0, label={"en": "Lesson", "zh": "课程"}, lang=lang)
    return LessonWidget({"lesson": control}, lambda lesson: render_lesson_card(lesson, lang),
                        title={"en": "Course map", "zh": "课程地图"})


# --- exercises ----------------------------------------------------------------------------------------------
