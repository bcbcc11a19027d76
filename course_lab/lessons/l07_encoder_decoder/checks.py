"""Lesson 07 · encoder and decoder: the exercise checks.

Each check prints a verdict in the notebook's language and returns True / False; none raises, so the notebook
always runs to the end. The lesson module re-exports them: the notebook calls ``l07.check_decoder_layer(...)``.
"""

from __future__ import annotations

import torch

from course_utils.masks import padding_mask

from ...exercises import attempt, fail, is_mask, is_tensor, never_raises, passed
from . import encoder_layer_params, norm_params


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


def pre_norm_decoder_layer(layer, y: torch.Tensor, memory: torch.Tensor,
                           memory_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Reference of exercise 1: the pre-norm decoder layer, ``x + Sublayer(LayerNorm(x))`` three times."""
    y = y + layer.self_attn(layer.res1.norm(y), is_causal=True)
    y = y + layer.cross_attn(layer.res2.norm(y), memory, mask=memory_mask)
    return y + layer.ffn(layer.res3.norm(y))


def _pre_norm_variants(layer, y, memory, mask) -> dict[str, torch.Tensor]:
    """Typical wrong answers to exercise 1, to give a precise hint."""
    a = y + layer.self_attn(layer.res1.norm(y), is_causal=True)
    b_stale = y + layer.cross_attn(layer.res2.norm(a), memory, mask=mask)
    post = layer.res1.norm(y + layer.self_attn(y, is_causal=True))
    post = layer.res2.norm(post + layer.cross_attn(post, memory, mask=mask))
    return {"stale": b_stale + layer.ffn(layer.res3.norm(b_stale)),
            "unmasked": pre_norm_decoder_layer(layer, y, memory, None),
            "post_norm": layer.res3.norm(post + layer.ffn(post))}


@never_raises
def check_decoder_layer(fn) -> bool:
    """Exercise 1: ``fn(layer, y, memory, memory_mask)`` must compute the *pre-norm* decoder layer."""
    layer, y, memory, mask = _decoder_case()
    with torch.no_grad():
        ok, got = attempt(fn, layer, y, memory, mask)
        if not ok:
            return False
        want = layer(y, memory, None, mask)
        wrong = _pre_norm_variants(layer, y, memory, mask)
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


@never_raises
def check_decoder_layer_params(fn) -> bool:
    """Exercise 2: ``fn(d_model, d_ff)`` must return the number of parameters of one ``DecoderLayer``."""
    from course_utils.layers import DecoderLayer

    for d_model, d_ff in ((8, 16), (64, 256), (512, 2048)):
        ok, got = attempt(fn, d_model, d_ff)
        if not ok:
            return False
        with torch.device("meta"):
            want = sum(p.numel() for p in DecoderLayer(d_model, 4, d_ff).parameters())
        if got != want:
            hint_en, hint_zh = "", ""
            if got == encoder_layer_params(d_model, d_ff):
                hint_en = " That is an encoder layer: the decoder has a second attention (cross-attention) " \
                          "and a third LayerNorm."
                hint_zh = "这是编码器层的参数量：解码器还多一个注意力（交叉注意力）和第三个层归一化。"
            elif got == want - 3 * norm_params(d_model):
                hint_en = " Don't forget the three LayerNorms (γ and β each)."
                hint_zh = "别忘了三个层归一化（各有 γ 和 β）。"
            return fail(f"For d_model={d_model}, d_ff={d_ff}: expected {want}, got {got}.{hint_en}",
                        f"d_model={d_model}、d_ff={d_ff} 时应为 {want}，实际得到 {got}。{hint_zh}")
    return passed("Correct: 8·d² + 2·d·d_ff + d_ff + 15·d. With d_ff = 4·d, attention and FFN hold about half each.",
                  "正确：8·d² + 2·d·d_ff + d_ff + 15·d。当 d_ff = 4·d 时，注意力和前馈网络大约各占一半。")


@never_raises
def check_cross_attention_mask(fn) -> bool:
    """Exercise 3: ``fn(src, pad_id)`` must return the (B, 1, 1, S) keep-mask of the source padding."""
    src = torch.tensor([[5, 6, 7, 1, 1], [8, 9, 1, 1, 1], [2, 3, 4, 5, 6]])
    ok, got = attempt(fn, src, 1)
    if not ok or not is_mask(got):
        return False
    want = padding_mask(src, 1)
    if got.shape != want.shape:
        return fail(f"Expected shape (B, 1, 1, S) = {tuple(want.shape)}, got {tuple(got.shape)}: the two size-1 "
                    "dimensions broadcast over the heads and over the decoder's queries.",
                    f"形状应为 (B, 1, 1, S) = {tuple(want.shape)}，实际是 {tuple(got.shape)}："
                    "两个大小为 1 的维度分别对注意力头和解码器的查询广播。")
    if torch.equal(got, ~want):
        return fail("Inverted: in this course True means 'may attend' (nn.MultiheadAttention's key_padding_mask "
                    "is the opposite).",
                    "正好反了：本课程中 True 表示“可以关注”"
                    "（nn.MultiheadAttention 的 key_padding_mask 约定相反）。")
    if not torch.equal(got, want):
        return fail("Some positions are wrong: a key is hidden exactly when its source token is pad_id.",
                    "有些位置不对：当且仅当源序列词元是 pad_id 时，这个键才被遮住。")
    return passed("Correct: every decoder query ignores the source padding.",
                  "正确：解码器的每个查询都看不到源序列的填充。")
