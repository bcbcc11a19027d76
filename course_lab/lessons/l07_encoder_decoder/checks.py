"""Lesson 07 · encoder and decoder: the exercise checks.

Each check prints a verdict in the notebook's language and returns True / False; none raises, so the notebook
always runs to the end. The lesson module re-exports them: the notebook calls ``l07.check_decoder_layer(...)``.
"""

from __future__ import annotations

import torch

from course_utils.masks import padding_mask

from ...exercises import (
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    has_python_loop,
    is_tensor,
    never_raises,
    passed,
    right_after_renumbering,
    watching,
)


def _decoder_case(seed: int = 7, norm_first: bool = True):
    """A dropout-free DecoderLayer, target states, memory and a source padding mask with padding."""
    from course_utils.layers import DecoderLayer

    g = torch.Generator().manual_seed(seed)
    torch_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    layer = DecoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first).eval()
    torch.random.set_rng_state(torch_state)  # leave the student's global random stream as it was
    with torch.no_grad():
        for p in layer.parameters():      # non-trivial LayerNorm gains and biases
            if p.dim() == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=g))
    y = torch.randn(2, 5, 16, generator=g)
    memory = torch.randn(2, 6, 16, generator=g)
    src = torch.tensor([[4, 5, 6, 7, 0, 0], [3, 3, 8, 9, 2, 5]])
    return layer, y, memory, padding_mask(src, 0)


def _pre_norm_decoder_layer(layer, y: torch.Tensor, memory: torch.Tensor,
                           memory_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Reference of exercise 1: the pre-norm decoder layer, ``x + Sublayer(LayerNorm(x))`` three times."""
    y = y + layer.self_attn(layer.self_attn_residual.norm(y), is_causal=True)
    y = y + layer.cross_attn(layer.cross_attn_residual.norm(y), memory, mask=memory_mask)
    return y + layer.ffn(layer.ffn_residual.norm(y))


def _pre_norm_variants(layer, y, memory, mask) -> dict[str, torch.Tensor]:
    """Typical wrong answers to exercise 1, to give a precise hint."""
    a = y + layer.self_attn(layer.self_attn_residual.norm(y), is_causal=True)
    b_stale = y + layer.cross_attn(layer.cross_attn_residual.norm(a), memory, mask=mask)
    post = layer.self_attn_residual.norm(y + layer.self_attn(y, is_causal=True))
    post = layer.cross_attn_residual.norm(post + layer.cross_attn(post, memory, mask=mask))
    return {"stale": b_stale + layer.ffn(layer.ffn_residual.norm(b_stale)),
            "unmasked": _pre_norm_decoder_layer(layer, y, memory, None),
            "post_norm": layer.ffn_residual.norm(post + layer.ffn(post))}


@never_raises
def check_decoder_layer(fn) -> bool:
    """Exercise 1: ``fn(layer, y, memory, memory_mask)`` must compute the *pre-norm* decoder layer."""
    layer, y, memory, mask = _decoder_case(fresh_int(0, 2**31, fresh_generator()))   # a fresh layer each run
    with torch.no_grad():
        want = layer(y, memory, None, mask)
        wrong = _pre_norm_variants(layer, y, memory, mask)
        whole = [(m, "forward") for m in (layer, layer.self_attn_residual, layer.cross_attn_residual,
                                          layer.ffn_residual)]
        with watching(fn, whole) as calls:
            ok, got = attempt(fn, layer, y, memory, mask)
        if not ok:
            return False
    if calls:
        return fail("You called the library's layer (or its Residual wrappers): the exercise asks you to write "
                    "the three sublayers yourself from self_attn, cross_attn, ffn and the three norms.",
                    "你调用了库里现成的层（或它的 Residual 包装）：本题要求你用 self_attn、cross_attn、ffn 和三个"
                    "归一化自己写出三个子层。")
    if not is_tensor(got, want.shape, "output (B, T, C)", "输出 (B, T, C)"):
        return False
    got = got.detach()
    if torch.allclose(got, want, atol=1e-5):
        return passed("Correct: three sublayers, each one reads the stream the previous one wrote.",
                      "正确：三个子层，每一个都读取上一个子层更新后的残差流。")
    if torch.allclose(got, wrong["stale"], atol=1e-5):
        return fail("That is the stale residual: the cross-attention sublayer must add to the stream written by "
                    "the self-attention sublayer, not to the layer's input y.",
                    "这正是“过期残差”的错误：交叉注意力子层的结果要加到自注意力子层更新后的残差流上，"
                    "而不是整层的输入 y 上。")
    if torch.allclose(got, wrong["unmasked"], atol=1e-5):
        return fail("The source padding is not masked: pass memory_mask to the cross-attention.",
                    "没有遮住源序列的填充：要把 memory_mask 传给交叉注意力。")
    if torch.allclose(got, wrong["post_norm"], atol=1e-5):
        return fail("That is the post-norm layer of the lesson. Pre-norm normalises the sublayer's *input*: "
                    "x + Sublayer(LayerNorm(x)).",
                    "这是正文里的后置归一化版本。前置归一化是对子层的**输入**做归一化："
                    "x + Sublayer(LayerNorm(x))。")
    err = float((got - want).abs().max())
    return fail(f"Wrong values (largest difference {err:.3g}). Check the causal self-attention "
                "(is_causal=True), the order of the sublayers and x + Sublayer(LayerNorm(x)).",
                f"数值不对（最大差值 {err:.3g}）。检查自注意力是否因果（is_causal=True）、子层的顺序，"
                "以及 x + Sublayer(LayerNorm(x)) 的写法。")


def _decoder_layer_size(d_model: int, d_ff: int, lean: bool) -> int:
    """Parameters of a ``DecoderLayer``, counted on the ``meta`` device: the lesson's (biases, LayerNorm) or the
    lean one of exercise 2 (no biases, RMSNorm)."""
    from course_utils.layers import DecoderLayer

    options = {"bias": False, "norm": "rms"} if lean else {}
    with torch.device("meta"):
        return sum(p.numel() for p in DecoderLayer(d_model, 4, d_ff, **options).parameters())


def _decoder_layer_classes() -> list:
    import course_utils
    import course_utils.layers

    # any module built counts: the layer itself, a Decoder around it, type(layer)(...)
    return [(course_utils, "DecoderLayer"), (course_utils.layers, "DecoderLayer"), (torch.nn, "Module")]


@never_raises
def check_lean_decoder_layer_params(fn) -> bool:
    """Exercise 2: ``fn(d_model, d_ff)`` = parameters of ``DecoderLayer(..., bias=False, norm="rms")``, by formula."""
    g = fresh_generator()
    cases = [(8, 16), (64, 256), (512, 2048), (4 * fresh_int(1, 65, g), fresh_int(1, 1025, g))]   # one fresh
    results = []
    with watching(fn, _decoder_layer_classes()) as calls:
        for d_model, d_ff in cases:
            ok, got = attempt(fn, d_model, d_ff)
            if not ok:
                return False
            results.append(got)
    if calls:
        return fail("You built a DecoderLayer and counted: the exercise asks for the formula, from the shapes.",
                    "你构建了一个 DecoderLayer 再去数：本题要求由各个矩阵的形状推出公式。")
    for (d_model, d_ff), got in zip(cases, results):
        want = _decoder_layer_size(d_model, d_ff, lean=True)
        if got != want:
            hint_en, hint_zh = "", ""
            if got == _decoder_layer_size(d_model, d_ff, lean=False):
                hint_en = " That is the lesson's layer, with biases and LayerNorm β: this one has neither."
                hint_zh = "这是正文里那个带偏置和层归一化 β 的层：这里两者都没有。"
            elif got == want + 3 * d_model:
                hint_en = " RMSNorm has a gain γ but no β."
                hint_zh = "RMSNorm 只有增益 γ，没有 β。"
            return fail(f"For d_model={d_model}, d_ff={d_ff}: expected {want}, got {got}.{hint_en}",
                        f"d_model={d_model}、d_ff={d_ff} 时应为 {want}，实际得到 {got}。{hint_zh}")
    share = {d: 1 - _decoder_layer_size(d, f, lean=True) / _decoder_layer_size(d, f, lean=False)
             for d, f in ((32, 64), (512, 2048))}
    return passed(f"Correct: 8·d² + 2·d·d_ff + 3·d. The biases and β (12·d + d_ff) are {share[32]:.1%} of the "
                  f"lesson's layer (d = 32, d_ff = 64) and {share[512]:.2%} at d = 512, d_ff = 2048.",
                  f"正确：8·d² + 2·d·d_ff + 3·d。偏置和 β（12·d + d_ff 个）在正文的层（d = 32、d_ff = 64）里占 "
                  f"{share[32]:.1%}，在 d = 512、d_ff = 2048 时占 {share[512]:.2%}。")


def _reverse_tokens_reference(src: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Every row's real tokens in reverse order, the padding still on the right (the check's truth)."""
    lengths = (src != pad_id).sum(-1, keepdim=True)                        # (B, 1)
    positions = torch.arange(src.shape[1], device=src.device)             # (S,)
    index = (lengths - 1 - positions).clamp(min=0)                         # (B, S)
    return torch.gather(src, 1, index).masked_fill(positions >= lengths, pad_id)


@never_raises
def check_reverse_tokens(fn) -> bool:
    """Exercise 3: ``fn(src, pad_id)`` reverses each row's real tokens and leaves the padding on the right."""
    g = fresh_generator()
    src = torch.randint(3, 12, (5, 7), generator=g)
    for row, length in enumerate((7, 4, 1, 5, 3)):
        src[row, length:] = 0
    ok, got = attempt(fn, src.clone(), 0)
    if not ok or not is_tensor(got, src.shape, "reversed batch (B, S)", "倒序的批次 (B, S)"):
        return False
    if has_python_loop(fn):
        return fail("Your function loops over the batch in Python: build an index tensor instead (lengths − 1 − "
                    "position) and use torch.gather, so that a batch of 10 000 sequences costs one call.",
                    "你的函数用 Python 循环逐个处理：请改为构造一个索引张量（长度 − 1 − 位置）并用 torch.gather，"
                    "这样一万个序列也只需要一次调用。")
    want = _reverse_tokens_reference(src, 0)
    if torch.equal(got, src.flip(1)):
        return fail("flip reverses the padding too: the <pad> tokens end up in front of the real ones.",
                    "flip 把填充也一起倒过来了：<pad> 跑到了真实词元的前面。")
    if not torch.equal(got, want):
        return fail("Some rows are wrong: row i must hold its first length_i tokens in reverse, then the padding.",
                    "有些行不对：第 i 行应先是它的前 length_i 个词元的倒序，然后是填充。")
    if not right_after_renumbering(fn, src, _reverse_tokens_reference, g):
        return False
    return passed("Correct: the real tokens are reversed, the padding stays on the right.",
                  "正确：真实词元倒序排列，填充仍在右边。")
