"""Lesson 00 · welcome: the exercise checks (they print a verdict, return True / False and never raise).

The lesson module re-exports them; this module never imports the lesson's ``__init__``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...exercises import (
    attempt,
    fresh_generator,
    fresh_int,
    never_raises,
    one_value_problem,
    report,
    run_check,
    tracking_sizes,
)

_AVAILABLE = ((True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"), (False, False, "cpu"))


@never_raises
def check_device_choice(my_device: Callable[[], str], lang: str | None = None) -> bool:
    """Exercise 1: ``my_device()`` returns ``"cuda"``, ``"mps"`` or ``"cpu"``, the best one available.

    The answer is tried on four pretend machines (CUDA and/or MPS reported available or not), so a constant
    such as ``lambda: "cpu"`` fails; calling the course's ``pick_device`` is the shortcut the exercise forbids.
    """
    import course_utils.train

    from ...exercises import fail, passed, watching

    answers = []
    with watching(my_device, [(course_utils.train, "pick_device")]) as calls:
        for cuda, mps, _ in _AVAILABLE:
            saved = torch.cuda.is_available, torch.backends.mps.is_available
            torch.cuda.is_available = lambda cuda=cuda: cuda
            torch.backends.mps.is_available = lambda mps=mps: mps
            try:
                ok, got = attempt(my_device)
            finally:
                torch.cuda.is_available, torch.backends.mps.is_available = saved
            if not ok:
                return False
            if isinstance(got, torch.device) and got.index is None:     # torch.device("cuda") names it too
                got = got.type
            answers.append(got)
    if calls:
        return fail("You called pick_device(): that is the course's answer. Ask PyTorch yourself with "
                    "torch.cuda.is_available() and torch.backends.mps.is_available().",
                    "你调用了 pick_device()：那是课程写好的答案。请自己用 torch.cuda.is_available() 和 "
                    "torch.backends.mps.is_available() 去问 PyTorch。", lang)
    for (cuda, mps, want), got in zip(_AVAILABLE, answers):
        if got != want:
            if len(set(map(str, answers))) == 1:
                return fail(f"Your function always returns {got!r}, whatever the machine has: on a machine "
                            f"with a CUDA GPU it must say 'cuda', on a Mac with MPS 'mps'.",
                            f"无论机器上有什么，你的函数总是返回 {got!r}：在有 CUDA GPU 的机器上应返回 'cuda'，"
                            f"在有 MPS 的 Mac 上应返回 'mps'。", lang)
            return fail(f"With CUDA {'available' if cuda else 'missing'} and MPS {'available' if mps else 'missing'} "
                        f"the answer is {want!r}, yours is {got!r}: test CUDA first, then MPS.",
                        f"CUDA {'可用' if cuda else '不可用'}、MPS {'可用' if mps else '不可用'} 时应返回 {want!r}，"
                        f"你的是 {got!r}：先检查 CUDA，再检查 MPS。", lang)
    return passed("Correct: CUDA first, then MPS, else the CPU, on all four pretend machines.",
                  "正确：在四台假想的机器上都是先 CUDA、再 MPS、最后 CPU。", lang)


def _mha_classes() -> list:
    import course_utils
    import course_utils.multihead

    return [(course_utils, "MultiHeadAttention"), (course_utils.multihead, "MultiHeadAttention"),
            (torch.nn, "MultiheadAttention"), (torch.nn, "Module")]   # any module built: type(mha)(d, h), a layer


@never_raises
def check_mha_parameter_count(count: Callable[[int, int], int], lang: str | None = None) -> bool:
    """Exercise 2: the number of parameters of ``MultiHeadAttention(d_model, n_heads)``, from a formula."""
    from course_utils import MultiHeadAttention

    from ...exercises import fail, watching

    g, cases = fresh_generator(), []
    drawn = [(h * fresh_int(1, 33, g), h) for h in (fresh_int(1, 17, g), fresh_int(1, 17, g))]   # fresh each run
    for d_model, n_heads in ((16, 4), (64, 8), (64, 1), (96, 12), *drawn):
        with torch.device("meta"):
            real = sum(p.numel() for p in MultiHeadAttention(d_model, n_heads).parameters())
        cases.append(((d_model, n_heads), real))
    with watching(count, _mha_classes()) as calls:
        ok, got = attempt(count, 64, 8)
    if not ok:
        return False
    if calls:
        return fail("You built the layer and counted its parameters: the exercise asks for the formula, "
                    "from the shapes of W^Q, W^K, W^V, W^O and their biases.",
                    "你构建了这一层再去数它的参数：本题要求用公式，从 W^Q、W^K、W^V、W^O 及其偏置的形状推出来。",
                    lang)
    d, h = 64, 8
    hints = {4 * d * d: ("the four weight matrices are right; add the four biases, one number per output: 4·d_model.",
                         "四个权重矩阵算对了；还要加上四个偏置，每个输出一个数：4·d_model。"),
             h * (4 * d * d + 4 * d): ("that counts a full set of weights per head. The heads share W^Q, W^K, W^V, "
                                       "W^O: each is d_model × d_model, and head i uses its slice of d_k columns.",
                                       "这相当于每个头都有一整套权重。其实所有头共用 W^Q、W^K、W^V、W^O："
                                       "每个都是 d_model × d_model，第 i 个头只用其中 d_k 列。"),
             3 * d * d + 3 * d: ("W^Q, W^K and W^V are there; the output projection W^O (d_model × d_model, with its "
                                 "bias) is a parameter too.",
                                 "W^Q、W^K、W^V 都算了；输出投影 W^O（d_model × d_model，带偏置）也是参数。")}
    if isinstance(got, (int, float)) and got in hints:
        en, zh = hints[got]
        return fail(f"For d_model = 64, 8 heads you get {got}: {en}", f"d_model = 64、8 个头时你得到 {got}：{zh}", lang)
    return run_check(count, cases, lang=lang)


@never_raises
def check_attention_memory(fn: Callable[[int, int, int], int], lang: str | None = None) -> bool:
    """Exercise 3: bytes of the float32 attention weights ``(B, h, T, T)`` of one layer, from the shape."""
    from course_utils import speed

    from ...exercises import fail, watching

    g = fresh_generator()
    drawn = [(fresh_int(1, 65, g), fresh_int(1, 33, g), fresh_int(1, 4097, g)) for _ in range(3)]  # fresh each run
    cases = [((b, h, t), speed.attention_weights_bytes(b, h, t))
             for b, h, t in ((1, 1, 3), (2, 4, 16), (1, 8, 8192), (32, 16, 512), *drawn)]
    with watching(fn, [*_mha_classes(), (speed, "attention_weights_bytes")]) as calls, tracking_sizes() as sizes:
        ok, got = attempt(fn, 2, 4, 16)
    if not ok:
        return False
    if sizes.largest >= 2 * 4 * 16 * 16:                   # a (B, h, T, T) tensor, on the meta device or not
        return fail("You built a (B, h, T, T) tensor and measured it (on the meta device it even costs no memory): "
                    "the exercise asks for the formula, B·h·T·T numbers times 4 bytes, which also answers before "
                    "anything is built.",
                    "你构造了一个 (B, h, T, T) 张量再去测量它（放在 meta 设备上甚至不占内存）：本题要的是公式，"
                    "B·h·T·T 个数乘以 4 字节，在构造任何东西之前就能给出答案。", lang)
    if any("attention_weights_bytes" in str(call) for call in calls):
        return fail("You called course_utils.speed.attention_weights_bytes: that is the course's answer. Compute "
                    "it yourself from the shape (B, h, T, T) and 4 bytes per float32 number.",
                    "你调用了 course_utils.speed.attention_weights_bytes：那是课程写好的答案。请自己由形状 "
                    "(B, h, T, T) 和每个 float32 数占 4 字节算出来。", lang)
    if calls:
        return fail("You ran an attention layer to measure it: compute the size from the shape (B, h, T, T) and "
                    "4 bytes per float32 number.",
                    "你运行了一个注意力层去测量：请直接由形状 (B, h, T, T) 和每个 float32 数占 4 字节算出来。", lang)
    if (problem := one_value_problem(got, 2 * 4 * 16 * 4)) is not None:
        return report(problem, "Not yet", "还不对", lang)
    if got == 2 * 4 * 16 * 4:
        return fail("That grows like T: the weights hold one number per (query, key) pair, T × T per head.",
                    "这是按 T 线性增长的：注意力权重对每一对（查询，键）存一个数，每个头是 T × T 个。", lang)
    return run_check(fn, cases, lang=lang)
