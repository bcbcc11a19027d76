"""Lesson 10 · seq2seq translation: the exercise checks.

Each check prints a verdict in the notebook's language and returns True / False; none raises, so the notebook
always runs to the end. The lesson module re-exports them: the notebook calls ``l10.check_...(...)``.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from course_utils.masks import padding_mask
from course_utils.modes import model_device

from ...exercises import as_number, attempt, fail, has_python_loop, is_tensor, never_raises, passed, report
from .numbers import TARGET_CHARS, make_tokenizers, source_text

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
    if has_python_loop(fn):
        return fail("Your function loops in Python: the exercise asks for tensor operations (a shift and a mask), "
                    "which run on the whole batch at once, on any device.",
                    "你的函数用了 Python 循环：这道练习要求用张量运算（一次平移加一个掩码），"
                    "一次处理整个批次，在任何设备上都能跑。")
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
        value, problem = as_number(got)
        if problem:
            return report(problem, "Return one number (a float in [0, 1])", "应返回一个数（0 到 1 之间的浮点数）")
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
                "数值不对：目标 ID 上应为 1 − ε + ε/V，其余每个 ID 上为 ε/V。")


# --- exercise 4: the encoder without positions (an experiment)

ANAGRAMS = (1_200, 2_100)        # "one thousand, two hundred" and "two thousand, one hundred": the same five words


def encode_without_positions(model, src: torch.Tensor) -> torch.Tensor:
    """Reference: the encoder output ``(B, S, C)`` of ``model.encode`` with the source positional encoding left out."""
    return model.encoder(model.src_embed(src), padding_mask(src, model.pad_id))


def _tiny_model():
    from course_utils.models import Transformer

    src_tok, tgt_tok = make_tokenizers()
    torch.manual_seed(10)
    model = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, d_model=16, n_heads=2, n_encoder_layers=1,
                        n_decoder_layers=1, d_ff=32, dropout=0.0, max_len=32, pad_id=src_tok.pad_id).eval()
    return model, src_tok, tgt_tok


@torch.no_grad()
def _greedy_from_memory(model, memory, src_mask, bos_id, eos_id, max_len=16) -> list[int]:
    ys = torch.full((1, 1), bos_id, device=memory.device)
    for _ in range(max_len):
        token = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1, keepdim=True)     # (1, 1)
        if token.item() == eos_id:
            break
        ys = torch.cat([ys, token], dim=1)
    return ys[0, 1:].tolist()


@never_raises
def check_encode_without_positions(fn, model=None, src_tok=None, tgt_tok=None) -> bool:
    """Exercise 4: ``fn(model, src (B, S)) -> memory (B, S, C)``, the encoder without the positional encoding.

    Judged on a small fresh model; once right, the experiment runs on ``model`` (the notebook's trained one, on a
    copy): 1,200 and 2,100 have the same words in another order, and without positions they get one translation.
    """
    tiny, tiny_src_tok, _ = _tiny_model()
    src = tiny_src_tok.encode_batch([source_text(n) for n in (*ANAGRAMS, 45_678)])          # (3, S)
    with torch.no_grad():
        with_positions = tiny.encode(src)[0]
        want = encode_without_positions(tiny, src)
        no_mask = tiny.encoder(tiny.src_embed(src), None)
    pos_module = tiny.src_pos
    with torch.no_grad():
        ok, got = attempt(fn, tiny, src.clone())
    if not ok:
        return False
    with torch.no_grad():
        changed = tiny.src_pos is not pos_module or not torch.allclose(tiny.encode(src)[0], with_positions)
    if changed:
        return fail("Your function changed the model itself (its src_pos). Every later cell, and the widget, use "
                    "the trained model: leave it as it is and build the encoder input yourself, from "
                    "model.src_embed and model.encoder.",
                    "你的函数改动了模型本身（它的 src_pos）。后面的每个单元格和交互控件都要用这个训练好的模型："
                    "不要改动它，自己用 model.src_embed 和 model.encoder 搭出编码器的输入。")
    if not is_tensor(got, tuple(want.shape), "memory (B, S, C)", "编码器输出 (B, S, C)"):
        return False
    got = got.detach().float()
    if torch.allclose(got, with_positions, atol=1e-5):
        return fail("That is model.encode: it adds the positional encoding, which is exactly what this experiment "
                    "leaves out. Embed, then run model.encoder.",
                    "这就是 model.encode：它加上了位置编码，而这个实验恰恰要把位置编码去掉。"
                    "先做嵌入，再运行 model.encoder。")
    real = (src != tiny.pad_id)[..., None]
    if torch.allclose(got * real, no_mask * real, atol=1e-5) and not torch.allclose(got, want, atol=1e-5):
        return fail("The encoder needs the source padding mask (padding_mask(src, model.pad_id)): without it the "
                    "shorter sentences attend to their <pad> tokens.",
                    "编码器需要源语言的填充掩码（padding_mask(src, model.pad_id)）："
                    "没有它，较短的句子会关注自己的 <pad>。")
    if not torch.allclose(got, want, atol=1e-5):
        return fail("Not the encoder output without positions: model.encoder(model.src_embed(src), mask).",
                    "结果不是去掉位置编码后的编码器输出：应为 model.encoder(model.src_embed(src), mask)。")
    passed("Correct: the encoder without positions.", "正确：这就是没有位置编码的编码器。")
    _anagram_experiment(fn, *(copy.deepcopy(model), src_tok, tgt_tok) if model is not None else _tiny_model())
    return True


@torch.no_grad()
def _anagram_experiment(fn, model, src_tok, tgt_tok) -> None:
    """1,200 and 2,100 through ``fn``: the memory rows are the same set, so the greedy translations are equal."""
    model.eval()
    device = model_device(model)
    outputs = {}
    for n in ANAGRAMS:
        ids = src_tok.encode(source_text(n))
        src = torch.tensor([ids], device=device)                                            # (1, S)
        memory = fn(model, src)                                                             # (1, S, C)
        order = torch.tensor(sorted(range(len(ids)), key=ids.__getitem__), device=device)   # rows by token id
        outputs[n] = (memory[0, order], tgt_tok.decode(
            _greedy_from_memory(model, memory, padding_mask(src, model.pad_id), tgt_tok.bos_id, tgt_tok.eos_id)))
    (m1, t1), (m2, t2) = outputs[ANAGRAMS[0]], outputs[ANAGRAMS[1]]
    same = torch.allclose(m1, m2, atol=1e-5)
    for n in ANAGRAMS:
        print(f"   {n:>6,}  {source_text(n):<28} → {outputs[n][1]}")
    if same and t1 == t2:
        passed("Without positions the encoder gives 1,200 and 2,100 the same vectors, only in another order, and "
               "cross-attention cannot see order: one translation for both, whatever the training.",
               "没有位置编码时，编码器给 1,200 和 2,100 的向量完全相同，只是顺序不同；而交叉注意力看不到顺序："
               "两个数只能得到同一个译文，无论怎样训练。")
