"""The lesson registry: the one place that says which lessons the course has.

Every list of lessons is made from :data:`LESSONS` or checked against it: lesson 00's course-map tables, its
lesson-count wording and part ranges (placeholders that ``tools/build_notebooks.py`` expands), its course-map
widget, both READMEs' lesson tables (written by the same builder), the website's course map, and every test that
needs the number of lessons. A row here exists exactly when ``notebooks/source/<slug>.md`` exists (the builder and
``tests/test_registry.py`` refuse anything else).

Adding a lesson is one row in :data:`LESSONS`; a new part of the course is one row in :data:`PARTS` first. This
module is plain data with the standard library only: the builder loads it by file path before anything is
installed, and the notebooks import it as ``course_lab.registry``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LANGUAGES = ("en", "zh")
SLUG = re.compile(r"^\d{2}_[a-z0-9]+(_[a-z0-9]+)*$")  # the source's file stem, as tools/build_notebooks.py names it


@dataclass(frozen=True)
class Part:
    key: str  # what a lesson's ``part`` names
    name: dict[str, str]  # {"en": ..., "zh": ...}, shown by the course-map widget


@dataclass(frozen=True)
class Lesson:
    slug: str  # "03_scaled_dot_product_attention": the stem of notebooks/source/<slug>.md and of its notebooks
    title: dict[str, str]  # {"en": ..., "zh": ...}: the course-map tables, the READMEs, the widget
    summary: dict[str, str]  # the one-liner, {"en": ..., "zh": ...}
    part: str  # a key of PARTS
    formula: str = ""  # matplotlib mathtext (a subset of LaTeX) that lesson 00's widget draws; "" draws none
    builds_on: tuple[int, ...] = ()  # the earlier lessons whose work it uses (lesson 00's card), in order
    leaves_with: dict[str, str] = field(default_factory=dict)  # what the student has built or trained at the end

    @property
    def number(self) -> int:
        return int(self.slug[:2])


PARTS: tuple[Part, ...] = (
    Part("inputs", {"en": "Inputs", "zh": "输入"}),
    Part("attention", {"en": "Attention", "zh": "注意力"}),
    Part("model", {"en": "Building the model", "zh": "搭建模型"}),
    Part("training", {"en": "Training and using it", "zh": "训练与应用"}),
    Part("modern", {"en": "The modern Transformer", "zh": "现代 Transformer"}),
)

LESSONS: tuple[Lesson, ...] = (
    Lesson("00_welcome", {"en": "Welcome", "zh": "欢迎"},
           {"en": "What a Transformer is, the course map, and a check that your setup works.",
            "zh": "Transformer 是什么、课程地图，以及环境检查。"},
           "inputs", r"$p(y \mid x) = \prod_t \, p(y_t \mid y_{<t}, x)$",
           leaves_with={"en": "A working setup (device, Chinese font) and the course map.",
                        "zh": "一套能用的环境（计算设备、中文字体）和课程地图。"}),
    Lesson("01_tokens_to_vectors", {"en": "Tokens to vectors", "zh": "从词元到向量"},
           {"en": "Tokenization, the vocabulary, the embedding matrix and the √d_model scale.",
            "zh": "分词、词表、嵌入矩阵，以及为什么要乘以 √d_model。"},
           "inputs", r"$x_i = E_{t_i}\,\sqrt{d_{\mathrm{model}}} + PE(pos_i)$",
           builds_on=(0,),
           leaves_with={"en": "Your token embedding: a vocabulary and the lookup E[t]·√d_model.",
                        "zh": "你自己的词元嵌入：一张词表，以及查表 E[t]·√d_model。"}),
    Lesson("02_positional_encoding", {"en": "Positional encoding", "zh": "位置编码"},
           {"en": "Sinusoidal positions, relative shifts as rotations, learned alternatives.",
            "zh": "正弦位置编码、相对位移即旋转、可学习的位置嵌入。"},
           "inputs", r"$PE_{(pos,2i)} = \sin(pos / 10000^{2i/d_{\mathrm{model}}})$",
           builds_on=(1,),
           leaves_with={"en": "The sinusoidal table PE and a learned position table, added to the embeddings.",
                        "zh": "正弦位置编码表 PE 和可学习的位置表，加到嵌入上。"}),
    Lesson("03_scaled_dot_product_attention", {"en": "Scaled dot-product attention", "zh": "缩放点积注意力"},
           {"en": "Queries, keys and values; why the scores are divided by √d_k.",
            "zh": "查询、键和值；为什么分数要除以 √d_k。"},
           "attention", r"$\mathrm{Attention}(Q,K,V) = \mathrm{softmax}(QK^{T} / \sqrt{d_k})\,V$",
           builds_on=(1, 2),
           leaves_with={"en": "Your attention function softmax(QKᵀ/√d_k)V, equal to PyTorch's.",
                        "zh": "你自己写的注意力函数 softmax(QKᵀ/√d_k)V，与 PyTorch 的结果一致。"}),
    Lesson("04_multi_head_attention", {"en": "Multi-head attention", "zh": "多头注意力"},
           {"en": "h heads on d_model/h-wide projections, concatenated and projected by W^O.",
            "zh": "h 个注意力头各自在 d_model/h 维的投影上计算，拼接后经 W^O 投影。"},
           "attention", r"$\mathrm{MultiHead} = \mathrm{Concat}(\mathrm{head}_1, \ldots, \mathrm{head}_h)\,W^O$",
           builds_on=(3,),
           leaves_with={"en": "Your multi-head attention module, equal to nn.MultiheadAttention with copied weights.",
                        "zh": "你自己写的多头注意力模块，复制权重后与 nn.MultiheadAttention 一致。"}),
    Lesson("05_masking", {"en": "Masking", "zh": "掩码"},
           {"en": "Padding and causal masks: which keys each query may see.",
            "zh": "填充掩码和因果掩码：每个查询能看到哪些键。"},
           "attention", r"$\mathrm{softmax}(QK^{T} / \sqrt{d_k} + M)\,V,\quad M_{ij} \in \{0, -\infty\}$",
           builds_on=(3, 4),
           leaves_with={"en": "Padding and causal masks, and attention that respects them.",
                        "zh": "填充掩码、因果掩码，以及遵守掩码的注意力。"}),
    Lesson("06_ffn_residual_layernorm",
           {"en": "Feed-forward network, residual connections, LayerNorm", "zh": "前馈网络、残差连接与层归一化"},
           {"en": "The position-wise FFN, residuals, LayerNorm and RMSNorm.",
            "zh": "逐位置前馈网络、残差连接、层归一化与 RMSNorm。"},
           "model", r"$\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$",
           builds_on=(4, 5),
           leaves_with={"en": "The FFN, LayerNorm, RMSNorm and the residual sublayer (post-norm and pre-norm).",
                        "zh": "前馈网络、层归一化、RMSNorm，以及残差子层（后置归一化与前置归一化）。"}),
    Lesson("07_encoder_decoder", {"en": "Encoder and decoder", "zh": "编码器与解码器"},
           {"en": "Stacking layers into the paper's encoder-decoder; cross-attention.",
            "zh": "把层堆叠成论文中的编码器-解码器；交叉注意力。"},
           "model", r"$z = \mathrm{Encoder}(x),\quad y_t \sim \mathrm{Decoder}(y_{<t}, z)$",
           builds_on=(1, 2, 4, 5, 6),
           leaves_with={"en": "Your encoder-decoder Transformer, equal to nn.Transformer, trained on a copy task.",
                        "zh": "你自己的编码器-解码器 Transformer，与 nn.Transformer 一致，并在复制任务上训练过。"}),
    Lesson("08_output_cross_entropy", {"en": "Output layer and cross-entropy", "zh": "输出层与交叉熵"},
           {"en": "Logits over the vocabulary, a stable log-softmax, cross-entropy, label smoothing, perplexity.",
            "zh": "词表上的 logits、数值稳定的 log-softmax、交叉熵、标签平滑与困惑度。"},
           "model", r"$\mathcal{L} = -\frac{1}{T}\sum_t \log p(y_t \mid y_{<t}, x),"
                    r"\quad \mathrm{PPL} = e^{\mathcal{L}}$",
           builds_on=(7,),
           leaves_with={"en": "The output layer, a stable log-softmax, your label-smoothed cross-entropy, perplexity.",
                        "zh": "输出层、数值稳定的 log-softmax、你自己写的带标签平滑的交叉熵，以及困惑度。"}),
    Lesson("09_encoder_classifier", {"en": "Encoder-only classifier", "zh": "仅编码器分类器"},
           {"en": "Sentiment classification with a Transformer encoder, and the training loop around it.",
            "zh": "用 Transformer 编码器做情感分类，以及围绕它的训练循环。"},
           "training", r"$p(c \mid x) = \mathrm{softmax}(W \bar{h} + b)_c,\quad \bar{h} = \frac{1}{T}\sum_i h_i$",
           builds_on=(2, 5, 7, 8),
           leaves_with={"en": "An SST-2 sentiment classifier and your training loop (AdamW, warm-up, clipping).",
                        "zh": "一个在 SST-2 上训练好的情感分类器，以及你自己的训练循环（AdamW、预热、梯度裁剪）。"}),
    Lesson("10_seq2seq_translation", {"en": "Seq2seq translator", "zh": "序列到序列翻译"},
           {"en": "Training an encoder-decoder; greedy decoding and beam search.",
            "zh": "训练一个编码器-解码器模型；贪心解码与束搜索。"},
           "training", r"$\hat{y} = \arg\max_y \sum_t \log p(y_t \mid y_{<t}, x)$",
           builds_on=(5, 7, 8, 9),
           leaves_with={"en": "Two trained translators (numbers to words, EN→ZH), greedy and beam decoding, BLEU.",
                        "zh": "两个训练好的翻译模型（数字转英文、英译中），贪心解码与束搜索，以及 BLEU 评估。"}),
    Lesson("11_gpt", {"en": "GPT", "zh": "GPT"},
           {"en": "A decoder-only language model: next-token prediction, sampling, the KV cache.",
            "zh": "仅解码器语言模型：下一个词元预测、采样生成、KV 缓存。"},
           "training", r"$p(x) = \prod_t \, p(x_t \mid x_{<t})$",
           builds_on=(2, 5, 6, 8, 9),
           leaves_with={"en": "A trained character GPT, your sampler (temperature, top-k, top-p) and the KV cache.",
                        "zh": "一个训练好的字符级 GPT、你自己的采样器（温度、top-k、top-p）和 KV 缓存。"}),
    Lesson("12_masked_lm", {"en": "Masked LM", "zh": "掩码语言模型"},
           {"en": "BERT-style masked language modelling: predict hidden tokens from both sides.",
            "zh": "BERT 式的掩码语言模型：根据左右两侧的上下文预测被遮住的词元。"},
           "training", r"$\mathcal{L} = -\sum_{i \in M} \log p(x_i \mid x_{\setminus M})$",
           builds_on=(5, 7, 8, 9, 11),
           leaves_with={"en": "A trained character masked LM and BERT's 80/10/10 masking.",
                        "zh": "一个训练好的字符级掩码语言模型，以及 BERT 的 80/10/10 掩码规则。"}),
    Lesson("13_pretrained_minilm", {"en": "Pretrained weights (MiniLM)", "zh": "预训练权重（MiniLM）"},
           {"en": "Loading all-MiniLM-L6-v2 into the course's own encoder.",
            "zh": "把 all-MiniLM-L6-v2 的权重装进课程自己写的编码器。"},
           "training", r"$\theta_{\mathrm{ours}} \leftarrow \theta_{\mathrm{MiniLM}},"
                       r"\quad h_{\mathrm{ours}}(x) = h_{\mathrm{MiniLM}}(x)$",
           builds_on=(7, 9, 11),
           leaves_with={"en": "all-MiniLM-L6-v2 in your own encoder: WordPiece, sentence vectors, a linear probe.",
                        "zh": "在你自己的编码器里运行的 all-MiniLM-L6-v2：WordPiece 分词、句向量、线性探测。"}),
    Lesson("14_going_fast", {"en": "Going fast", "zh": "让模型跑得更快"},
           {"en": "Fused attention, torch.compile, mixed precision, and how to measure speed.",
            "zh": "融合注意力、torch.compile、混合精度，以及如何测速。"},
           "training", r"$\mathrm{cost} \propto T^2 d_{\mathrm{model}} + T\, d_{\mathrm{model}}^2$",
           builds_on=(3, 7, 11),
           leaves_with={"en": "Measured speed-ups (fused attention, torch.compile, bf16, KV cache), when each helps.",
                        "zh": "实测的速度：融合注意力、torch.compile、bf16 和 KV 缓存，以及各自在什么时候有用。"}),
    Lesson("15_byte_pair_encoding", {"en": "Tokens by hand: byte-pair encoding", "zh": "亲手分词：字节对编码"},
           {"en": "A byte-level BPE trained by hand in English and Chinese, checked against tokenizers; what it "
                  "costs each language.",
            "zh": "亲手在英文和中文上训练字节级 BPE，与 tokenizers 库对照；分词给每种语言带来的代价。"},
           "modern", r"$(a, b)^{*} = \arg\max_{(a, b)} \mathrm{count}(a\,b)$",
           builds_on=(1, 11),
           leaves_with={"en": "Your byte-level BPE tokenizer, whose merges equal Hugging Face tokenizers'.",
                        "zh": "你自己的字节级 BPE 分词器，其合并规则与 Hugging Face tokenizers 的完全一致。"}),
    Lesson("16_modern_decoder", {"en": "The modern decoder block", "zh": "现代解码器块"},
           {"en": "RoPE, RMSNorm, SwiGLU and grouped-query attention: the Llama block, checked against "
                  "LlamaForCausalLM.",
            "zh": "旋转位置编码、RMSNorm、SwiGLU 与分组查询注意力：Llama 块，与 LlamaForCausalLM 对照。"},
           "modern", r"$q_m^{T} k_n = (R_{\Theta, m} W_q x_m)^{T} (R_{\Theta, n} W_k x_n)$",
           builds_on=(2, 6, 11, 14),
           leaves_with={"en": "A tiny Llama (RoPE, RMSNorm, SwiGLU, GQA) whose logits equal LlamaForCausalLM's.",
                        "zh": "一个小型 Llama（RoPE、RMSNorm、SwiGLU、GQA），其 logits 与 LlamaForCausalLM 一致。"}),
    Lesson("17_fine_tuning_lora", {"en": "Fine-tuning and LoRA", "zh": "微调与低秩适配（LoRA）"},
           {"en": "Fine-tuning MiniLM on SST-2: every weight, or a low-rank few (LoRA), against a frozen probe.",
            "zh": "在 SST-2 上微调 MiniLM：训练全部权重，还是只训练低秩的一小部分（LoRA），并与冻结探针比较。"},
           "modern", r"$W' = W + \frac{\alpha}{r} B A$",
           builds_on=(9, 13),
           leaves_with={"en": "MiniLM fine-tuned on SST-2, fully and with LoRA, against a frozen linear probe.",
                        "zh": "在 SST-2 上微调的 MiniLM：全参数微调和 LoRA，并与冻结的线性探测比较。"}),
)


def problems(lessons: tuple[Lesson, ...] = LESSONS, parts: tuple[Part, ...] = PARTS) -> list[str]:
    """What is wrong with the registry: numbering, slugs, languages, parts (empty when it is sound)."""
    found = []
    keys = [part.key for part in parts]
    for part in parts:
        if set(part.name) != set(LANGUAGES) or not all(part.name.values()):
            found.append(f"part {part.key!r}: give its name in both languages, {{'en': ..., 'zh': ...}}")
    for index, lesson in enumerate(lessons):
        where = f"LESSONS[{index}] ({lesson.slug!r})"
        if not SLUG.match(lesson.slug):
            found.append(f"{where}: the slug is the source's file stem, NN_name (e.g. '15_modern_decoder')")
            continue
        if lesson.number != index:
            found.append(f"{where}: lessons are numbered 0, 1, 2, ... in order; this row should be lesson {index:02d}")
        for name in ("title", "summary"):
            text = getattr(lesson, name)
            if set(text) != set(LANGUAGES) or not all(text.values()):
                found.append(f"{where}: give its {name} in both languages, {{'en': ..., 'zh': ...}}")
        if lesson.leaves_with and (set(lesson.leaves_with) != set(LANGUAGES) or not all(lesson.leaves_with.values())):
            found.append(f"{where}: give what it leaves with in both languages, {{'en': ..., 'zh': ...}}")
        if not all(isinstance(n, int) and 0 <= n < index for n in lesson.builds_on):
            found.append(f"{where}: builds_on names earlier lessons by number (0 to {index - 1}), "
                         f"got {lesson.builds_on!r}")
        if lesson.part not in keys:
            found.append(f"{where}: part {lesson.part!r} is not one of PARTS ({', '.join(keys)}); add the part first")
    order = [keys.index(lesson.part) for lesson in lessons if lesson.part in keys]
    if order != sorted(order):
        found.append("the lessons of a part must follow each other, parts in the order of PARTS")
    unused = [key for key in keys if key not in {lesson.part for lesson in lessons}]
    if unused:
        found.append(f"parts without lessons: {', '.join(unused)}")
    return found


def by_number(number: int) -> Lesson:
    """The registered lesson ``number`` (ValueError naming the range when there is none)."""
    if isinstance(number, bool) or not isinstance(number, int):
        raise TypeError(f"number must be an int between 0 and {len(LESSONS) - 1}, got {number!r}")
    if not 0 <= number < len(LESSONS):
        raise ValueError(f"there is no lesson {number}: the course has lessons 0 to {len(LESSONS) - 1}")
    return LESSONS[number]


def part(key: str) -> Part:
    """The part called ``key``."""
    for candidate in PARTS:
        if candidate.key == key:
            return candidate
    raise ValueError(f"there is no part {key!r}: the parts are {', '.join(p.key for p in PARTS)}")


def part_lessons(key: str) -> list[Lesson]:
    """The lessons of one part, in order."""
    part(key)
    return [lesson for lesson in LESSONS if lesson.part == key]


# --- words and tables made from the registry ----------------------------------------------------------------

_EN_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
            "sixteen seventeen eighteen nineteen").split()
_EN_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_ZH_DIGITS = "零一二三四五六七八九"


def number_word(n: int, lang: str) -> str:
    """0 <= n < 100 in words: ``number_word(15, "en") == "fifteen"``, ``number_word(15, "zh") == "十五"``."""
    if not 0 <= n < 100:
        raise ValueError(f"number_word covers 0 to 99, got {n}")
    tens, ones = divmod(n, 10)
    if lang == "en":
        if n < 20:
            return _EN_ONES[n]
        return _EN_TENS[tens] + (f"-{_EN_ONES[ones]}" if ones else "")
    if lang == "zh":
        if n < 10:
            return _ZH_DIGITS[n]
        return (_ZH_DIGITS[tens] if tens > 1 else "") + "十" + (_ZH_DIGITS[ones] if ones else "")
    raise ValueError(f"lang must be 'en' or 'zh', got {lang!r}")


_MAP_HEADER = {"en": "| # | lesson | in one line |", "zh": "| 课 | 标题 | 一句话概要 |"}
_README_HEADER = {"en": "| #  | Lesson | What it covers |", "zh": "| 编号 | 课程 | 主要内容 |"}


def course_map_table(lang: str) -> str:
    """Lesson 00's course-map table (Markdown) in one language."""
    rows = [_MAP_HEADER[lang], "|---|---|---|"]
    rows += [f"| {lesson.number:02d} | {lesson.title[lang]} | {lesson.summary[lang]} |" for lesson in LESSONS]
    return "\n".join(rows)


def readme_table(lang: str) -> str:
    """The README's lesson table (Markdown) in one language; each title links to its notebook."""
    rows = [_README_HEADER[lang], "|----|--------|----------------|"]
    rows += [f"| {lesson.number:02d} | [{lesson.title[lang]}](notebooks/{lang}/{lesson.slug}.ipynb) | "
             f"{lesson.summary[lang]} |" for lesson in LESSONS]
    return "\n".join(rows)


_PROBLEMS = problems()
if _PROBLEMS:  # a broken registry breaks every list of lessons: say so at import, with the fix
    raise ValueError("course_lab/registry.py: " + "; ".join(_PROBLEMS))
