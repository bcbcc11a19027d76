"""Lesson 10 · the full Transformer on a real seq2seq task: English number words → Chinese numerals.

``45678`` → source ``"forty-five thousand, six hundred and seventy-eight"`` (``num2words``) → target
``"四万五千六百七十八"`` (``cn2an``). The two languages group digits differently (thousands against 万 = 10⁴) and
Chinese writes 零 for inner zeros, so the model must reorder and insert, not copy word by word.

The notebook writes the sampling plan, teacher forcing, the loss, the schedule and a greedy decoder itself; this
module holds what would distract from that:

* the data: :func:`source_text`, :func:`target_text`, :func:`split_numbers`, :func:`make_tokenizers`;
* :func:`translate` (greedy or beam search, ids → strings) and :func:`cross_attention` (the decoder's
  cross-attention weights for one translation, via ``record_attention``);
* figures: :func:`plot_lr_schedule` and :func:`plot_cross_attention`;
* :func:`build_translation_widget`: a number (slider or text box) → source words, greedy and beam outputs and
  the cross-attention heatmap;
* the ``check_*`` functions of the exercises (they print a verdict and never raise).
"""

from __future__ import annotations

import random

import numpy as np
import torch
import torch.nn.functional as F

from .. import i18n, viz
from ..attention import record_attention
from ..decoding import beam_search, greedy_decode
from ..exercises import attempt, fail, is_tensor, never_raises, passed
from ..tokenizers import CharTokenizer, WordTokenizer

try:
    import cn2an
    from num2words import num2words
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "Lesson 10 needs the packages num2words and cn2an (number words and Chinese numerals): "
        "pip install num2words cn2an   (or, from the repository root: pip install -e \".[lessons]\")"
    ) from err

MAX_NUMBER = 99_999          # the lesson's range: 0 .. 99,999 (English "… thousand" meets Chinese 万)
LARGEST_TEXT = 999_999_999   # source_text / target_text accept more, to probe numbers outside the range

# Every word num2words uses below a million, plus the two punctuation tokens: the whole source vocabulary.
SOURCE_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand and"
).split() + [",", "-"]
TARGET_CHARS = "零一二三四五六七八九十百千万"


def _digit_words() -> dict[str, set[str]]:
    """The English words each Chinese digit character can come from: 四 ← four, forty, fourteen (一 ← ten too:
    10010 is 一万零一十)."""
    units = "one two three four five six seven eight nine".split()
    tens = "ten twenty thirty forty fifty sixty seventy eighty ninety".split()
    teens = "eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
    words = {c: {units[i], tens[i], teens[i]} for i, c in enumerate("一二三四五六七八九")}
    return words


DIGIT_WORDS = _digit_words()


# ------------------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------------------

def _check_number(n, largest: int = LARGEST_TEXT) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"expected a whole number (int), got {n!r} ({type(n).__name__})")
    n = int(n)
    if not 0 <= n <= largest:
        raise ValueError(f"the number must be between 0 and {largest:,}, got {n:,}")
    return n


def source_text(n: int) -> str:
    """English words for ``n``: ``312`` → ``"three hundred and twelve"`` (British style, with "and")."""
    return num2words(_check_number(n))


def target_text(n: int) -> str:
    """Chinese numerals for ``n``: ``312`` → ``"三百一十二"``, ``20305`` → ``"二万零三百零五"``."""
    return cn2an.an2cn(_check_number(n))


def number_length(n: int) -> int:
    """Number of decimal digits: 0..9 → 1, 10..99 → 2, ..., 10000..99999 → 5."""
    return len(str(_check_number(n)))


def split_numbers(n_test_per_length: int = 100, n_train_per_length: int = 8000, test_lengths=(3, 4, 5),
                  max_digits: int = 5, seed: int = 0) -> tuple[list[int], list[int]]:
    """Split ``0 .. 10**max_digits - 1`` *by number*: (training numbers, held-out test numbers), disjoint.

    The test set has ``n_test_per_length`` random numbers of each length in ``test_lengths``. Training gets, for
    every length, the numbers not held out, at most ``n_train_per_length`` of them (a random sample). Numbers
    of one and two digits are never held out: they are the words everything else is built from.
    """
    if n_test_per_length < 1 or n_train_per_length < 1:
        raise ValueError("n_test_per_length and n_train_per_length must be >= 1")
    if not set(test_lengths) <= set(range(1, max_digits + 1)):
        raise ValueError(f"test_lengths={tuple(test_lengths)} must be digit counts between 1 and {max_digits}")
    rng = random.Random(seed)
    train, test = [], []
    for length in range(1, max_digits + 1):
        numbers = range(0 if length == 1 else 10 ** (length - 1), 10 ** length)
        held = rng.sample(numbers, n_test_per_length) if length in test_lengths else []
        if len(held) >= len(numbers):
            raise ValueError(f"holding out {n_test_per_length} of the {len(numbers)} numbers with {length} "
                             "digits leaves none to train on: lower n_test_per_length")
        held_set = set(held)
        rest = [n for n in numbers if n not in held_set]
        train += sorted(rng.sample(rest, min(n_train_per_length, len(rest))))
        test += held
    return train, test


def make_tokenizers() -> tuple[WordTokenizer, CharTokenizer]:
    """(source tokenizer over English words, target tokenizer over Chinese characters), fixed vocabularies."""
    return WordTokenizer(SOURCE_WORDS), CharTokenizer(list(TARGET_CHARS))


# ------------------------------------------------------------------------------------------------------------
# Translating and looking inside
# ------------------------------------------------------------------------------------------------------------

def _model_device(model) -> torch.device:
    return next(model.parameters()).device


def translate(model, numbers, src_tok, tgt_tok, method: str = "greedy", beam_size: int = 4,
              max_len: int = 16, batch_size: int = 512) -> list[str]:
    """Translate ``numbers`` (ints) with ``greedy_decode`` or ``beam_search`` (KV cache on); returns strings."""
    if method not in ("greedy", "beam"):
        raise ValueError(f"method must be 'greedy' or 'beam', got {method!r}")
    numbers = [_check_number(n) for n in numbers]
    device = _model_device(model)
    was_training = model.training
    model.eval()
    out: list[str] = []
    try:
        for start in range(0, len(numbers), batch_size):
            chunk = numbers[start:start + batch_size]
            src = src_tok.encode_batch([source_text(n) for n in chunk]).to(device)
            if method == "greedy":
                ids = greedy_decode(model, src, max_len, tgt_tok.bos_id, tgt_tok.eos_id, use_cache=True)
            else:
                ids = beam_search(model, src, beam_size=beam_size, max_len=max_len, bos_id=tgt_tok.bos_id,
                                  eos_id=tgt_tok.eos_id, use_cache=True)
            out += [tgt_tok.decode(row.cpu()) for row in ids]
    finally:
        model.train(was_training)
    return out


@torch.no_grad()
def cross_attention(model, number: int, src_tok, tgt_tok, output: str | None = None) -> dict:
    """The decoder's cross-attention weights while it writes ``output`` (default: its greedy translation).

    Returns ``{"weights": (n_layers, h, T_out, T_src) tensor, "source": source tokens, "target": output tokens
    + "<eos>"}``. Row ``i`` is the step that *produces* target token ``i`` (its query reads the tokens before).
    """
    n = _check_number(number)
    if output is None:
        output = translate(model, [n], src_tok, tgt_tok, "greedy")[0]
    device = _model_device(model)
    src = torch.tensor([src_tok.encode(source_text(n))], device=device)
    tgt_in = torch.tensor([tgt_tok.encode(output, add_bos=True)], device=device)   # <bos> y
    was_training = model.training
    model.eval()
    try:
        with record_attention(model):
            model(src, tgt_in)
        weights = torch.stack([layer.cross_attn.last_weights[0] for layer in model.decoder.layers]).cpu()
    finally:
        model.train(was_training)
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
    if not text.isdigit():
        raise ValueError(i18n.pick({"en": f"type a whole number such as 20305, not {text!r}",
                                    "zh": f"请输入一个整数，例如 20305，而不是 {text!r}"}))
    n = int(text)
    if n > LARGEST_TEXT:
        raise ValueError(i18n.pick({"en": f"{n:,} is too large: type at most {LARGEST_TEXT:,}",
                                    "zh": f"{n:,} 太大了：最多输入 {LARGEST_TEXT:,}"}))
    return n


def build_translation_widget(model, src_tok, tgt_tok, number: int = 45_678, beam_size: int = 4,
                             max_len: int = 16):
    """A slider (0..99,999) and a text box (any number; it wins when not empty) → the source words, the greedy
    and beam translations against the reference, and the cross-attention heatmap of the greedy translation."""
    from ipywidgets import Text

    from ..widgets import LessonWidget, dropdown, slider

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
        greedy = translate(model, [n], src_tok, tgt_tok, "greedy", max_len=max_len)[0]
        beam = translate(model, [n], src_tok, tgt_tok, "beam", beam_size=beam_size, max_len=max_len)[0]
        reference = target_text(n)
        attn = cross_attention(model, n, src_tok, tgt_tok, output=greedy)
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


# ------------------------------------------------------------------------------------------------------------
# Exercise checks: print a verdict, return True / False, never raise
# ------------------------------------------------------------------------------------------------------------

# --- exercise 1: the decoder input from the labels

def shift_right(tgt_out: torch.Tensor, bos_id: int, eos_id: int, pad_id: int) -> torch.Tensor:
    """Reference: labels ``y <eos> <pad>…`` ``(B, T)`` → decoder input ``<bos> y <pad>…`` ``(B, T)``."""
    shifted = torch.cat([torch.full_like(tgt_out[:, :1], bos_id), tgt_out[:, :-1]], dim=1)
    return shifted.masked_fill(shifted == eos_id, pad_id)


def _label_batch(seed: int = 10) -> torch.Tensor:
    """Labels ``y <eos>`` padded, with the vocabulary of make_tokenizers: ids 5.. are characters."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for length in (5, 1, 3, 5, 0):                 # one row fills the width, one is only <eos>
        y = torch.randint(5, 5 + len(TARGET_CHARS), (length,), generator=g).tolist()
        rows.append(y + [3])
    width = max(len(r) for r in rows)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows])


@never_raises
def check_shift_right(fn) -> bool:
    """Exercise 1: ``fn(tgt_out, bos_id, eos_id, pad_id)`` = the teacher-forcing decoder input."""
    tgt_out = _label_batch()
    ok, got = attempt(fn, tgt_out.clone(), 2, 3, 0)
    if not ok or not is_tensor(got, tgt_out.shape, "tgt_in (the shape of tgt_out)", "tgt_in（与 tgt_out 形状相同）"):
        return False
    want = shift_right(tgt_out, 2, 3, 0)
    if torch.equal(got, want):
        return passed("Correct: every row starts with <bos>, and position i reads y_<i to predict y_i.",
                      "正确：每一行都以 <bos> 开头，位置 i 读入 y_<i，去预测 y_i。")
    plain = torch.cat([torch.full_like(tgt_out[:, :1], 2), tgt_out[:, :-1]], dim=1)
    if torch.equal(got, plain):
        return fail("Almost: shorter rows still contain <eos> in the input. The decoder never reads <eos> "
                    "(nothing comes after it): turn it into <pad>.",
                    "差一点：较短的行在输入里还留着 <eos>。解码器永远不会读入 <eos>（它后面没有要预测的内容了），"
                    "要把它换成 <pad>。")
    if got[:, 0].eq(2).all():
        return fail("The first column is right but the rest is not: it must be tgt_out shifted right by one.",
                    "第一列对了，后面不对：其余部分应该是 tgt_out 整体右移一位。")
    return fail(f"Not the expected input. For tgt_out\n{tgt_out}\nit should be\n{want}\nbut is\n{got}",
                f"结果不对。对于 tgt_out\n{tgt_out}\n应该得到\n{want}\n实际是\n{got}")


# --- exercise 2: exact match

def _strip(row: list[int], eos_id: int, pad_id: int) -> list[int]:
    if eos_id in row:
        row = row[: row.index(eos_id)]
    return [t for t in row if t != pad_id]


def exact_match(pred: torch.Tensor, ref: torch.Tensor, eos_id: int, pad_id: int) -> float:
    """Reference: fraction of rows whose tokens before the first ``<eos>`` (padding dropped) are identical."""
    rows = [_strip(p, eos_id, pad_id) == _strip(r, eos_id, pad_id) for p, r in zip(pred.tolist(), ref.tolist())]
    return sum(rows) / len(rows)


@never_raises
def check_exact_match(fn) -> bool:
    """Exercise 2: ``fn(pred (B, L), ref (B, L'), eos_id, pad_id) -> float`` in [0, 1]."""
    E, P = 3, 0
    cases = [
        # (pred, ref, expected, hint_en, hint_zh)
        ([[5, 6, 7, E, P], [5, 6, E, P, P]], [[5, 6, 7, E], [5, 6, 8, E]], 0.5, None, None),
        ([[5, 6, E, 9, 9]], [[5, 6, E, P]], 1.0,
         "tokens after <eos> do not count: cut each row at its first <eos>",
         "<eos> 之后的词元不算：每一行在第一个 <eos> 处截断"),
        ([[5, 6, 7, 8, 9]], [[5, 6, 7, E, P]], 0.0,
         "a prediction that never ends is wrong, even if it starts like the reference",
         "从不结束的预测是错的，即使它的开头与参考答案相同"),
        ([[5, 6, E], [5, E, P], [E, P, P], [7, 7, E]], [[5, 6, E, P, P], [5, 6, E, P, P], [E, P, P, P, P],
                                                          [7, 7, E, P, P]], 0.75,
         "the two tensors may have different widths: compare the sequences, not the padded rows",
         "两个张量的宽度可以不同：比较的是序列本身，而不是补齐后的整行"),
    ]
    for pred, ref, expected, hint_en, hint_zh in cases:
        ok, got = attempt(fn, torch.tensor(pred), torch.tensor(ref), E, P)
        if not ok:
            return False
        try:
            value = float(got)
        except (TypeError, ValueError, RuntimeError):
            return fail(f"Return one number (a float in [0, 1]), got {type(got).__name__}.",
                        f"应返回一个数（0 到 1 之间的浮点数），实际得到 {type(got).__name__}。")
        if abs(value - expected) > 1e-9:
            return fail(f"For pred={pred} and ref={ref} the exact match is {expected}, you returned {value}."
                        + (f" Hint: {hint_en}." if hint_en else ""),
                        f"对于 pred={pred}、ref={ref}，完全匹配率应为 {expected}，你返回了 {value}。"
                        + (f"提示：{hint_zh}。" if hint_zh else ""))
    return passed("Correct: a translation counts only if every character and the end are right.",
                  "正确：只有每个字都对、并且在正确的位置结束，才算翻译正确。")


# --- exercise 3: the label-smoothed target distribution

def smoothed_targets(targets: torch.Tensor, vocab_size: int, eps: float, pad_id: int) -> torch.Tensor:
    """Reference: ``(N,)`` ids → ``(N, V)``: ``1 − ε + ε/V`` on the target, ``ε/V`` elsewhere; padding rows 0."""
    q = torch.full((targets.numel(), vocab_size), eps / vocab_size)
    q.scatter_(1, targets.reshape(-1, 1), 1.0 - eps + eps / vocab_size)
    q[targets.reshape(-1) == pad_id] = 0.0
    return q


@never_raises
def check_smoothed_targets(fn) -> bool:
    """Exercise 3: ``fn(targets (N,), vocab_size, eps, pad_id) -> q (N, V)``, PyTorch's label smoothing."""
    V, eps, pad = 19, 0.1, 0
    targets = torch.tensor([5, 9, 3, 0, 17, 0])
    ok, got = attempt(fn, targets.clone(), V, eps, pad)
    if not ok or not is_tensor(got, (len(targets), V), "q", "q"):
        return False
    want = smoothed_targets(targets, V, eps, pad)
    got = got.detach().float()
    keep = targets != pad
    kept = int(keep.sum())
    if torch.allclose(got, want, atol=1e-6):
        # the definition is the one of F.cross_entropy(label_smoothing=eps): show it through the loss
        logits = torch.randn(len(targets), V, generator=torch.Generator().manual_seed(3))
        soft = -(got * F.log_softmax(logits, -1)).sum(-1)[keep].mean()
        hard = F.cross_entropy(logits, targets, ignore_index=pad, label_smoothing=eps)
        if torch.allclose(soft, hard, atol=1e-5):
            return passed("Correct: −Σ q log p over the kept rows equals F.cross_entropy(..., label_smoothing=0.1).",
                          "正确：在保留的行上计算 −Σ q log p，正好等于 F.cross_entropy(..., label_smoothing=0.1)。")
    if torch.allclose(got[keep], want[keep], atol=1e-6):
        return fail("The real rows are right, but padding rows must be all zeros: padding is ignored by the loss.",
                    "真实的行都对了，但填充行必须全为 0：损失会忽略填充位置。")
    sums_to_one = torch.allclose(got[keep].sum(-1), torch.ones(kept), atol=1e-5)
    on_target = got[keep].gather(1, targets[keep, None]).squeeze(1)
    if sums_to_one and torch.allclose(on_target, torch.full((kept,), 1 - eps), atol=1e-6):
        return fail("That is the other convention (ε spread over the V−1 wrong classes). PyTorch, and the loss we "
                    "train with, put ε/V on *every* class, the target included: 1 − ε + ε/V on the target.",
                    "这是另一种约定（把 ε 分给 V−1 个错误类别）。PyTorch 以及我们训练用的损失，是把 ε/V 分给**所有**"
                    "类别，目标类别也包括在内：目标上是 1 − ε + ε/V。")
    if not sums_to_one:
        return fail("Each kept row must be a probability distribution (sum to 1).",
                    "每个保留下来的行都必须是一个概率分布（总和为 1）。")
    return fail("Wrong values: put 1 − ε + ε/V on the target id and ε/V on every other id.",
                "数值不对：目标 id 上应为 1 − ε + ε/V，其余每个 id 上为 ε/V。")
