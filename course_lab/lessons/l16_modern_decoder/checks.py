"""Lesson 16 · the modern decoder block: the exercise checks (they print a verdict, return True / False and never
raise).

The lesson module re-exports them; this module never imports the lesson's ``__init__``."""

from __future__ import annotations

import math

import torch

from ...exercises import (
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    never_raises,
    passed,
    report,
    tensor_problem,
    watching,
)

# ------------------------------------------------------------------------------------------------------------
# Exercise 1: RoPE at given positions (B, T), in either layout
# ------------------------------------------------------------------------------------------------------------


def _rope_reference(x: torch.Tensor, positions: torch.Tensor, base: float, layout: str) -> torch.Tensor:
    """RoPE of ``x (B, h, T, d_k)`` at ``positions (B, T)``: pair i turned by positions·θ_i, θ_i = base^(−2i/d_k).

    ``layout="half"`` pairs dims (i, i + d_k/2) (Hugging Face's Llama, GPT-NeoX); ``"interleaved"`` pairs (2i, 2i+1)
    (RoFormer, Meta's original Llama code). Computed in float64."""
    d_k = x.shape[-1]
    theta = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)           # (d_k/2,)
    angle = positions.double()[:, None, :, None] * theta                             # (B, 1, T, d_k/2)
    cos, sin = angle.cos(), angle.sin()
    x = x.double()
    if layout == "half":
        a, b = x[..., : d_k // 2], x[..., d_k // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def _rope_targets() -> list:
    """The ready-made rotations a student might call: Hugging Face's and the course library's."""
    import importlib

    targets = []
    for module_name, names in (("transformers.models.llama.modeling_llama",
                                ("apply_rotary_pos_emb", "rotate_half", "LlamaRotaryEmbedding")),
                               ("course_utils.positional", ("rope_rotate", "rotate_half")),
                               ("course_utils.rope", ("rope_rotate", "rotate_half"))):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        targets += [(module, name) for name in names if hasattr(module, name)]
    return targets


def _rope_cases(g: torch.Generator) -> list:
    """Left-padded rows (positions start later), a cache step (one token far out), Llama 3's base, a drawn case."""
    left_padded = torch.tensor([[0, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5]])
    cache_step = torch.tensor([[37], [1000]])
    b, t = fresh_int(1, 4, g), fresh_int(1, 9, g)
    drawn = torch.randint(0, 4096, (b, t), generator=g)
    return [(torch.randn(2, 3, 6, 8, generator=g, dtype=torch.float64), left_padded, 10000.0),
            (torch.randn(2, 2, 1, 16, generator=g, dtype=torch.float64), cache_step, 10000.0),
            (torch.randn(1, 2, 5, 32, generator=g, dtype=torch.float64), torch.arange(100, 105)[None], 500000.0),
            (torch.randn(b, fresh_int(1, 5, g), t, 2 * fresh_int(1, 33, g), generator=g, dtype=torch.float64),
             drawn, float(fresh_int(100, 100001, g)))]


def _matches(got, want, atol: float = 1e-7) -> bool:
    return tensor_problem(got, want, atol=atol, rtol=1e-6) is None


def _rope_close(got, want) -> bool:
    """Float32 angles are right too (Hugging Face computes them so): at position 4096 they are off by ~5e-4 rad.
    Every mistake the check names moves some entry by O(1)."""
    return _matches(got, want, atol=3e-3)


@never_raises
def check_rope_at(fn) -> bool:
    """Exercise 1: ``fn(x (B, h, T, d_k), positions (B, T), base)`` = RoPE with one position per token.

    Either layout is right: pairs (i, i + d_k/2) as Hugging Face's Llama, or (2i, 2i+1) as RoFormer and lesson 02.
    Calling a ready-made rotation (``transformers``' ``apply_rotary_pos_emb`` / ``LlamaRotaryEmbedding`` /
    ``rotate_half``, the course library's RoPE) is the shortcut ruled out; ignoring ``positions`` (arange(T)) and
    turning by −mθ are the common mistakes."""
    g = fresh_generator()
    cases = _rope_cases(g)
    results = []
    with watching(fn, _rope_targets()) as calls:
        for x, positions, base in cases:
            ok, got = attempt(fn, x.clone(), positions.clone(), base)
            if not ok:
                return False
            results.append(got)
    if calls:
        names = ", ".join(sorted(set(calls)))
        return fail(f"You called {names}: write the rotation yourself (cos and sin of positions·θ_i, then the pairs "
                    "turned); a ready-made rotation hides exactly what this exercise is about.",
                    f"你调用了 {names}：请自己写出旋转（先算 positions·θ_i 的 cos 和 sin，再把每一对转过去）；"
                    "现成的旋转函数恰好把本题要练的东西藏起来了。")
    layouts = ("half", "interleaved")
    for (x, positions, base), got in zip(cases, results):
        if any(_rope_close(got, _rope_reference(x, positions, base, layout)) for layout in layouts):
            continue
        shape = f"x {tuple(x.shape)}, positions {positions.tolist() if positions.numel() <= 12 else '…'}"
        if not isinstance(got, torch.Tensor) or got.shape != x.shape:
            return report(tensor_problem(got, x), f"For {shape}", f"当 {shape} 时")
        arange = torch.arange(x.shape[2]).expand_as(positions)
        if not torch.equal(arange, positions) and any(
                _rope_close(got, _rope_reference(x, arange, base, layout)) for layout in layouts):
            return fail(f"For {shape}: you rotated token t by t·θ, ignoring positions. With left padding, or one "
                        "new token after a cache, a token's position is not its index in the tensor: read it "
                        "from positions (one per row and token).",
                        f"当 {shape} 时：你按 t·θ 旋转第 t 个词元，没有用 positions。左侧填充时，或者有了缓存之后"
                        "只送进一个新词元时，词元的位置并不等于它在张量里的下标：位置要从 positions 里读"
                        "（每行、每个词元一个）。")
        if any(_rope_close(got, _rope_reference(x, -positions, base, layout)) for layout in layouts):
            return fail(f"For {shape}: you turned by −m·θ (lesson 02's table turns that way). Scores would still "
                        "depend on the distance only, but every RoPE model turns by +m·θ: (a cos − b sin, "
                        "a sin + b cos), and its weights were trained for that direction.",
                        f"当 {shape} 时：你转的是 −m·θ（第 02 课的表是朝这个方向转的）。分数仍然只取决于距离，"
                        "但所有用 RoPE 的模型都转 +m·θ：(a cos − b sin, a sin + b cos)，"
                        "它们的权重就是按这个方向训练的。")
        return fail(f"For {shape}, base={base:g}: the result is neither layout of RoPE. Pair i turns by "
                    f"positions·θ_i with θ_i = base^(−2i/d_k), i = 0 … d_k/2 − 1; the pairs are (i, i + d_k/2) or "
                    "(2i, 2i + 1).",
                    f"当 {shape}、base={base:g} 时：结果不符合 RoPE 的任何一种排列。第 i 对转过 positions·θ_i，"
                    "θ_i = base^(−2i/d_k)，i = 0 … d_k/2 − 1；配对是 (i, i + d_k/2) 或 (2i, 2i + 1)。")
    # the property left padding relies on: three pad tokens in front shift every position, not the scores
    q, k = torch.randn(2, 1, 1, 4, 16, generator=g, dtype=torch.float64)
    plain, padded = torch.arange(4)[None], torch.arange(3, 7)[None]
    s1 = fn(q, plain, 10000.0) @ fn(k, plain, 10000.0).transpose(-2, -1)
    s2 = fn(q, padded, 10000.0) @ fn(k, padded, 10000.0).transpose(-2, -1)
    gap = float((s1 - s2).abs().max())
    return passed(f"Correct. Shift all positions by 3 (three pad tokens in front) and the scores move by {gap:.1e}: "
                  "RoPE only sees distances.",
                  f"正确。把所有位置都后移 3（前面填充 3 个词元），分数只变了 {gap:.1e}：RoPE 只看距离。")


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: grouped-query attention with a causal mask (and a cache)
# ------------------------------------------------------------------------------------------------------------


def _gqa_reference(q, k, v, grouping: str = "interleave", causal: str = "offset", scale: bool = True):
    """softmax(QKᵀ/√d_k + causal)V with query head j reading key/value head j // (h / h_kv).

    The mistakes the check names: ``grouping="tile"`` (``k.repeat``: head j reads j mod h_kv), ``causal="none"``
    and ``causal="top-left"`` (``tril()`` without the offset T_k − T a cache needs), ``scale=False``."""
    h, h_kv, t, t_k = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    g = h // h_kv
    if grouping == "interleave":
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    else:
        k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
    s = q @ k.transpose(-2, -1)                                                      # (B, h, T, T_k)
    if scale:
        s = s / math.sqrt(q.shape[-1])
    if causal != "none":
        keep = torch.ones(t, t_k, dtype=torch.bool).tril(t_k - t if causal == "offset" else 0)
        s = s.masked_fill(~keep, float("-inf"))
    return s.softmax(-1) @ v                                                         # (B, h, T, d_k)


def _gqa_cases(g: torch.Generator) -> list:
    """(B, h, h_kv, T, T_k, d_k): GQA, a cached step, multi-query, multi-head, a drawn one."""
    h_kv = fresh_int(1, 5, g)
    t_k = fresh_int(2, 12, g)
    shapes = [(2, 4, 2, 6, 6, 8), (1, 6, 3, 1, 9, 4), (2, 8, 1, 3, 7, 16), (1, 4, 4, 5, 5, 8),
              (fresh_int(1, 4, g), h_kv * fresh_int(2, 4, g), h_kv, fresh_int(2, t_k + 1, g), t_k,
               fresh_int(2, 17, g))]
    out = []
    for b, h, hk, t, tk, d in shapes:
        q = torch.randn(b, h, t, d, generator=g, dtype=torch.float64)
        k, v = torch.randn(2, b, hk, tk, d, generator=g, dtype=torch.float64)
        out.append((q, k, v))
    return out


def _gqa_targets() -> list:
    import importlib

    import torch.nn.functional as F

    targets = [(F, "scaled_dot_product_attention")]
    for module_name, names in (("transformers.models.llama.modeling_llama", ("repeat_kv", "eager_attention_forward")),
                               ("course_utils.attention", ("attention_with_weights",))):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        targets += [(module, name) for name in names if hasattr(module, name)]
    return targets


@never_raises
def check_gqa_attention(fn) -> bool:
    """Exercise 2: ``fn(q (B, h, T, d_k), k, v (B, h_kv, T_k, d_k))`` = causal attention where query head j reads
    key/value head j // (h / h_kv); the last query sees every key (T_k ≥ T: a cache holds the earlier ones).

    Ruled out: the grouping done for you (``F.scaled_dot_product_attention(..., enable_gqa=True)``,
    ``transformers``' ``repeat_kv``), or the library's attention. ``k.repeat`` (tiling the heads) is the mistake."""
    cases = _gqa_cases(fresh_generator())
    results = []
    with watching(fn, _gqa_targets()) as calls:
        for q, k, v in cases:
            ok, got = attempt(fn, q.clone(), k.clone(), v.clone())
            if not ok:
                return False
            results.append(got)
    grouped = [name for name, args, kwargs in calls.records
               if name != "scaled_dot_product_attention" or kwargs.get("enable_gqa")]
    if grouped:
        return fail(f"You let {', '.join(sorted(set(grouped)))} do the grouping: that is the exercise. Give every "
                    "query head its key/value head yourself (repeat_interleave, or a view with a group axis), then "
                    "softmax(QKᵀ/√d_k + mask)V.",
                    f"你让 {'、'.join(sorted(set(grouped)))} 替你完成了分组：这正是本题要做的事。请自己给每个查询头"
                    "找到它的键/值头（repeat_interleave，或者加一个分组维度的 view），再算 softmax(QKᵀ/√d_k + 掩码)V。")
    for (q, k, v), got in zip(cases, results):
        want = _gqa_reference(q, k, v)
        if _matches(got, want):
            continue
        h, h_kv, t, t_k = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
        shape = f"h={h}, h_kv={h_kv}, T={t}, T_k={t_k}"
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return report(tensor_problem(got, want), f"For {shape}", f"当 {shape} 时")
        if _matches(got, _gqa_reference(q, k, v, grouping="tile")):
            return fail(f"For {shape}: query head j read key/value head j mod h_kv (k.repeat tiles the heads). The "
                        "groups are consecutive: heads 0 … h/h_kv − 1 share key/value head 0, and so on; that is "
                        "repeat_interleave, and how the weights of every GQA model are laid out.",
                        f"当 {shape} 时：第 j 个查询头读的是第 j mod h_kv 个键/值头（k.repeat 把头平铺了）。"
                        "分组是连续的：第 0 … h/h_kv − 1 个查询头共用第 0 个键/值头，依此类推；这就是 "
                        "repeat_interleave，所有 GQA 模型的权重也都按这个顺序排列。")
        if _matches(got, _gqa_reference(q, k, v, causal="none")):
            return fail(f"For {shape}: no causal mask: a query saw the keys after it.",
                        f"当 {shape} 时：没有因果掩码：查询看到了它后面的键。")
        if _matches(got, _gqa_reference(q, k, v, causal="top-left")):
            return fail(f"For {shape}: with T_k > T the keys hold {t_k - t} cached tokens before the queries: query "
                        f"t sits at position {t_k - t} + t and sees keys 0 … {t_k - t} + t (tril with the offset "
                        "T_k − T, as causal_mask does).",
                        f"当 {shape} 时：T_k > T 说明键里还有查询之前缓存的 {t_k - t} 个词元：第 t 个查询位于位置 "
                        f"{t_k - t} + t，能看到第 0 … {t_k - t} + t 个键"
                        "（带偏移 T_k − T 的 tril，causal_mask 就是这样做的）。")
        if _matches(got, _gqa_reference(q, k, v, scale=False)):
            return fail("Divide the scores by √d_k before the softmax.", "softmax 之前要把分数除以 √d_k。")
        return report(tensor_problem(got, want), f"For {shape}", f"当 {shape} 时")
    return passed("Correct: h query heads, h_kv stored heads of keys and values; the cache shrinks h / h_kv times.",
                  "正确：h 个查询头，只存 h_kv 个键头和值头；缓存缩小为原来的 h_kv / h。")


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: the parameters of one Llama block
# ------------------------------------------------------------------------------------------------------------


def _llama_block_params(d: int, h: int, h_kv: int, d_ff: int) -> int:
    """2 RMSNorm weights (d each), W_q and W_o (d × d), W_k and W_v (d × h_kv·d/h), three FFN maps (d × d_ff)."""
    return 2 * d + 2 * d * d + 2 * d * (h_kv * d // h) + 3 * d * d_ff


def _counting_targets() -> list:
    """Building a module (any nn.Module) or reading an existing one's parameters: how the answer is checked."""
    return [(torch.nn, "Module")] + [(torch.nn.Module, name) for name in (
        "parameters", "named_parameters", "state_dict", "modules", "named_modules", "children", "named_children")]


@never_raises
def check_llama_block_params(fn) -> bool:
    """Exercise 3: ``fn(d_model, n_heads, n_kv_heads, d_ff)`` = the parameters of one Llama block, by formula.

    Counting a built block (``LlamaDecoderLayer``, the course library's or the notebook's) is the shortcut ruled
    out; the multi-head count (K and V as d × d), the two-map FFN and LayerNorm's β or biases are the mistakes."""
    g = fresh_generator()
    h_kv = fresh_int(1, 9, g)
    h = h_kv * fresh_int(1, 5, g)
    cases = [(64, 4, 2, 176), (4096, 32, 8, 14336), (512, 8, 1, 1376), (96, 6, 6, 256),
             (h * 2 * fresh_int(1, 33, g), h, h_kv, fresh_int(1, 3000, g))]
    results = []
    with watching(fn, _counting_targets()) as calls:
        for args in cases:
            ok, got = attempt(fn, *args)
            if not ok:
                return False
            results.append(got)
    if calls:
        return fail("You counted the parameters of a built module: that is how the answer is checked, not "
                    "derived. Write the count from the shapes of the weights.",
                    "你数的是一个已构建模块的参数：那是用来验证答案的办法，不是推导。请根据各个权重的形状写出公式。")
    for (d, h, h_kv, d_ff), got in zip(cases, results):
        want = _llama_block_params(d, h, h_kv, d_ff)
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got != want:
            args = f"d_model={d}, n_heads={h}, n_kv_heads={h_kv}, d_ff={d_ff}"
            if h_kv != h and got == _llama_block_params(d, h, h, d_ff):
                return fail(f"{args}: you counted K and V as d × d, as in multi-head attention. With GQA they "
                            "project to n_kv_heads heads of d/n_heads: d × (n_kv_heads · d/n_heads) each.",
                            f"{args}：你把 K 和 V 都当成了 d × d，那是多头注意力的算法。用了 GQA 之后，它们只投影到 "
                            "n_kv_heads 个 d/n_heads 维的头上：各为 d × (n_kv_heads · d/n_heads)。")
            if got == want - d * d_ff:
                return fail(f"{args}: SwiGLU has three maps, not two: the gate W_gate and W_up (d × d_ff each) and "
                            "W_down (d_ff × d).",
                            f"{args}：SwiGLU 有三个线性映射，不是两个：门控 W_gate 和 W_up（各 d × d_ff），以及 "
                            "W_down（d_ff × d）。")
            biases = 3 * d + 2 * (h_kv * d // h) + 2 * d_ff            # q, k, v, o, gate, up, down
            if isinstance(got, (int, float)) and got - want in (2 * d, biases, biases + 2 * d):
                return fail(f"{args}: a Llama block has no biases and RMSNorm has no β: only one weight vector "
                            "(γ, d numbers) per norm.",
                            f"{args}：Llama 块没有偏置，RMSNorm 也没有 β：每个归一化只有一个权重向量（γ，d 个数）。")
            if got == want - 2 * d:
                return fail(f"{args}: almost: add the two RMSNorm weights (d each).",
                            f"{args}：差一点：还要加上两个 RMSNorm 的权重（各 d 个）。")
            return fail(f"{args}: expected {want:,}, got {got!r}. Count W_q, W_o (d × d), W_k, W_v "
                        "(d × n_kv_heads·d/n_heads), W_gate, W_up, W_down (d × d_ff) and two RMSNorm weights.",
                        f"{args}：应为 {want:,}，实际是 {got!r}。数一数 W_q、W_o（d × d），W_k、W_v"
                        "（d × n_kv_heads·d/n_heads），W_gate、W_up、W_down（d × d_ff）和两个 RMSNorm 权重。")
    gpt = 4 * 4096 * 4096 + 2 * 4096 * 4 * 4096
    llama = _llama_block_params(4096, 32, 8, 14336)
    return passed(f"Correct. A Llama-3-8B block has {llama / 1e6:.0f} M parameters, a GPT block of the same width "
                  f"{gpt / 1e6:.0f} M: GQA gave the saving to a wider FFN (d_ff = 3.5 d).",
                  f"正确。Llama-3-8B 的一个块有 {llama / 1e6:.0f} M 个参数，同样宽度的 GPT 块是 {gpt / 1e6:.0f} M："
                  "GQA 省下来的参数给了更宽的前馈网络（d_ff = 3.5 d）。")
