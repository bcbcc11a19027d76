"""Lesson 17 · fine-tuning and LoRA: the exercise checks.

Each check prints a verdict in the notebook's language and returns True / False; none raises. Each refuses the
shortcut its exercise forbids (the course's own ``course_utils.lora``, or ``peft``) with a message that says why, and
judges behaviour: outputs, gradients, what an optimizer step changes, never the source text.
"""

from __future__ import annotations

import torch
from torch import nn

import course_utils.lora as lora_lib

from ...exercises import (
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    never_raises,
    number_problem,
    passed,
    report,
    tensor_problem,
    watching,
)

# The library this lesson builds: using it is the shortcut of every exercise.
_LIBRARY = [(lora_lib, "LoRALinear"), (lora_lib, "apply_lora"), (lora_lib, "merge_lora"),
            (lora_lib, "count_parameters"), (lora_lib.LoRALinear, "merge"), (lora_lib.LoRALinear, "delta_weight")]


def _library_shortcut(calls) -> bool:
    return fail(f"You used {calls[0]} from course_utils.lora: that is the course's finished LoRA doing the exercise "
                "for you. Write it with torch operations.",
                f"你用了 course_utils.lora 里的 {calls[0]}：这是课程写好的 LoRA 在替你做练习。请用 torch 运算自己写。")


def _peft_used(obj) -> bool:
    modules = obj.modules() if isinstance(obj, nn.Module) else []
    return any(type(m).__module__.split(".")[0] == "peft" for m in modules) or \
        type(obj).__module__.split(".")[0] == "peft"


def _peft_shortcut() -> bool:
    return fail("That is the peft library's LoRA: the exercise asks for your own, a few lines of torch.",
                "这是 peft 库的 LoRA：练习要你自己写，几行 torch 代码就够。")


# ------------------------------------------------------------------------------------------------------------
# Exercise 1: count the trainable numbers
# ------------------------------------------------------------------------------------------------------------

def _count(d_model: int, n_layers: int, r: int, n_classes: int) -> int:
    return n_layers * 4 * r * 2 * d_model + d_model * n_classes + n_classes


@never_raises
def check_lora_count(fn) -> bool:
    """Exercise 1: ``fn(d_model, n_layers, r, n_classes) -> int``, the trainable parameters of a BERT-like encoder
    with rank-``r`` LoRA on q, k, v and o of every layer (each d_model × d_model) and a new linear head
    (weights and biases) on top. Derived from the shapes of A and B; building the model and counting is refused."""
    g = fresh_generator()
    cases = [(384, 6, 8, 2)] + [(32 * fresh_int(1, 40, g), fresh_int(1, 25, g), fresh_int(1, 65, g),
                                 fresh_int(2, 10, g)) for _ in range(4)]
    for d, n, r, c in cases:
        with watching(fn, _LIBRARY) as calls:
            ok, got = attempt(fn, d, n, r, c)
        if not ok:
            return False
        if calls:
            return _library_shortcut(calls)
        want = _count(d, n, r, c)
        if number_problem(got, want) is None:
            continue
        hints = {n * 4 * r * 2 * d: ("The head is trained too: add its d_model × n_classes weights and n_classes "
                                     "biases.", "输出层也要训练：加上它的 d_model × n_classes 个权重"
                                     "和 n_classes 个偏置。"),
                 n * 4 * r * d + d * c + c: ("Each adapter has TWO matrices: A (r × d_in) and B (d_out × r).",
                                             "每个适配器有**两个**矩阵：A（r × d_in）和 B（d_out × r）。"),
                 n * 4 * r * r + d * c + c: ("A is r × d_in and B is d_out × r: their sizes grow with d_model, not "
                                             "with r².", "A 是 r × d_in，B 是 d_out × r：它们的大小随 d_model 增长，"
                                             "而不是 r²。"),
                 n * 4 * d * d + d * c + c: ("That is the frozen weights W (d × d each); LoRA trains A and B instead.",
                                             "这是冻结的权重 W（每个 d × d）；LoRA 训练的是 A 和 B。")}
        value = got if isinstance(got, (int, float)) else None
        if value in hints:
            return fail(*hints[value])
        return report(number_problem(got, want), f"d_model={d}, n_layers={n}, r={r}, n_classes={c}",
                      f"d_model={d}、n_layers={n}、r={r}、n_classes={c} 时")
    return passed(f"Correct: MiniLM with r = 8 trains {_count(384, 6, 8, 2):,} numbers, 0.65 % of its 22.7 million.",
                  f"正确：r = 8 时 MiniLM 只训练 {_count(384, 6, 8, 2):,} 个数，是 2,270 万的 0.65%。")


# ------------------------------------------------------------------------------------------------------------
# Exercise 2: a LoRA layer
# ------------------------------------------------------------------------------------------------------------

def _build(cls, base: nn.Linear, r: int, alpha: float):
    with watching(cls, _LIBRARY) as calls:
        ok, layer = attempt(cls, base, r, alpha)
    return ok, layer, calls


@never_raises
def check_lora_layer(cls) -> bool:
    """Exercise 2: ``cls(base: nn.Linear, r, alpha)`` → a module with ``A`` (r × in) and ``B`` (out × r) that
    computes ``base(x) + (alpha / r) · x Aᵀ Bᵀ``; starts as ``base`` exactly (B = 0, A random), trains A and B
    only (the base frozen, unchanged by training)."""
    g = fresh_generator()
    d_in, d_out, r = fresh_int(8, 40, g), fresh_int(8, 40, g), fresh_int(2, 7, g)
    alpha = r * (fresh_int(1, 5, g) + 0.5) + 0.25                # α / r is neither 1, r / α nor α
    base = nn.Linear(d_in, d_out)
    saved = {k: v.clone() for k, v in base.state_dict().items()}
    ok, layer, calls = _build(cls, base, r, alpha)
    if not ok:
        return False
    if calls:
        return _library_shortcut(calls)
    if _peft_used(layer):
        return _peft_shortcut()
    if not isinstance(layer, nn.Module) or not all(isinstance(getattr(layer, n, None), torch.Tensor) for n in "AB"):
        return fail("Expected an nn.Module with parameters A and B (e.g. self.A = nn.Parameter(...)).",
                    "应该返回一个 nn.Module，带参数 A 和 B（例如 self.A = nn.Parameter(...)）。")
    A, B = layer.A, layer.B
    for name, t, shape in (("A", A, (r, d_in)), ("B", B, (d_out, r))):
        if tuple(t.shape) != shape:
            return fail(f"{name} must have shape {shape}, got {tuple(t.shape)}.", f"{name} 的形状应为 {shape}，实际是 "
                        f"{tuple(t.shape)}。")
    x = torch.randn(5, d_in, generator=g)
    with torch.no_grad():
        y0 = layer(x)
    if bool((B != 0).any()):
        return fail("B does not start at zero: the adapted model must start exactly as the pretrained one "
                    "(B A = 0), or the first steps fight a random change to every layer.",
                    "B 的初始值不是零：加了适配器的模型必须从预训练模型原样出发（B A = 0），"
                    "否则最初几步都在和每一层上的随机改动较劲。")
    if not bool((A != 0).any()):
        return fail("A is zero too: with A = 0 and B = 0 both gradients are zero (∂L/∂B ∝ A x, ∂L/∂A ∝ Bᵀ g) "
                    "and nothing ever trains. Initialise A at random.",
                    "A 也是零：A = 0 且 B = 0 时两个梯度都是零（∂L/∂B ∝ A x，∂L/∂A ∝ Bᵀ g），"
                    "什么也训练不了。请随机初始化 A。")
    if problem := tensor_problem(y0, base(x).detach()):
        return report(problem, "output at initialisation (must equal base(x))", "初始化时的输出（应等于 base(x)）")
    trainable = {id(p) for p in layer.parameters() if p.requires_grad}
    if id(base.weight) in trainable or id(base.bias) in trainable:
        return fail("The base layer still trains: freeze it (base.requires_grad_(False)), or full fine-tuning "
                    "is back and the optimizer keeps state for every weight.",
                    "基础层还在训练：要把它冻结（base.requires_grad_(False)），否则就又回到了全参数微调，优化器还要为每个权重保存状态。")
    if trainable != {id(A), id(B)}:
        return fail("Exactly A and B must train (requires_grad=True), nothing else.",
                    "要训练的只能是 A 和 B（requires_grad=True），别的都不行。")
    with torch.no_grad():                                  # known adapters: the scale shows
        A.copy_(torch.randn(r, d_in, generator=g))
        B.copy_(torch.randn(d_out, r, generator=g))
        got = layer(x)
    lowrank = x @ A.detach().T @ B.detach().T
    want = base(x).detach() + alpha / r * lowrank
    if tensor_problem(got, want, atol=1e-4) is not None:
        for scale, en, zh in ((r / alpha, "The scale is α / r, not r / α.", "缩放系数是 α / r，不是 r / α。"),
                              (1.0, "The update is multiplied by α / r: you left the scale out.",
                               "更新要乘以 α / r：你漏掉了缩放系数。"),
                              (alpha, "The scale is α / r: divide by r, so that changing r keeps the update's size.",
                               "缩放系数是 α / r：要除以 r，这样改变 r 时更新的大小才保持不变。")):
            if tensor_problem(got, base(x).detach() + scale * lowrank, atol=1e-4) is None:
                return fail(en, zh)
        return report(tensor_problem(got, want, atol=1e-4), "output with A and B set", "给定 A、B 时的输出")
    with torch.no_grad():                                  # training from the start: the base must not move
        B.zero_()
        A.copy_(torch.randn(r, d_in, generator=g) * 0.1)
    opt = torch.optim.SGD([p for p in layer.parameters() if p.requires_grad], lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        layer(x).pow(2).mean().backward()
        opt.step()
    if any(not torch.equal(v, saved[k]) for k, v in base.state_dict().items()):
        return fail("Training changed the base layer's weights: they must stay frozen.",
                    "训练改动了基础层的权重：它们必须保持冻结。")
    if bool((B == 0).all()):
        return fail("Three optimizer steps left B at zero: does the gradient reach B through your forward?",
                    "优化器走了三步，B 还是零：梯度能通过你的前向计算传到 B 吗？")
    return passed("Correct: a LoRA layer that starts as the pretrained one, trains r · (in + out) numbers and leaves "
                  "W untouched.",
                  "正确：这个 LoRA 层从预训练层原样出发，只训练 r · (in + out) 个数，W 纹丝不动。")


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: merge
# ------------------------------------------------------------------------------------------------------------

@never_raises
def check_merge(fn) -> bool:
    """Exercise 3: ``fn(layer) -> nn.Linear`` for a trained ``course_utils.lora.LoRALinear`` (``layer.base``,
    ``layer.lora_A`` (r × in), ``layer.lora_B`` (out × r), ``layer.scale``): one plain linear layer with the same
    outputs (W + scale · B A, the same bias), leaving ``layer`` as it was. The library's merge is refused."""
    g = fresh_generator()
    d_in, d_out, r, alpha = fresh_int(8, 48, g), fresh_int(8, 48, g), fresh_int(1, 6, g), fresh_int(1, 33, g)
    alpha += alpha == r  # scale α / r = 1 would let a merge that forgets the scale pass
    layer = lora_lib.LoRALinear(nn.Linear(d_in, d_out), r=r, alpha=float(alpha))
    with torch.no_grad():
        layer.lora_B.copy_(torch.randn(d_out, r, generator=g))
    x = torch.randn(7, d_in, generator=g)
    with torch.no_grad():
        want = layer(x)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    with watching(fn, _LIBRARY[1:]) as calls:
        ok, merged = attempt(fn, layer)
    if not ok:
        return False
    if calls:
        return _library_shortcut(calls)
    if any(not torch.equal(v, before[k]) for k, v in layer.state_dict().items()) or layer.merged:
        return fail("Your function changed the LoRA layer it was given: build a new nn.Linear (the adapters may "
                    "still be needed, e.g. to train further or to save them alone).",
                    "你的函数改动了传进来的 LoRA 层：请新建一个 nn.Linear"
                    "（适配器可能还要用，比如继续训练或单独保存）。")
    if not isinstance(merged, nn.Linear) or isinstance(merged, lora_lib.LoRALinear):
        return fail(f"Expected an nn.Linear, got {type(merged).__name__}.",
                    f"应该返回 nn.Linear，实际是 {type(merged).__name__}。")
    with torch.no_grad():
        got = merged(x)
        base = layer.base(x)
        lowrank = x @ layer.lora_A.T @ layer.lora_B.T
    if tensor_problem(got, want) is not None:
        if tensor_problem(got, base + lowrank) is None:
            return fail("Multiply B A by the scale α / r (layer.scale) before adding it to W.",
                        "把 B A 加到 W 上之前，要先乘以缩放系数 α / r（layer.scale）。")
        if tensor_problem(got, base) is None:
            return fail("The merged layer is the base alone: add scale · B A to its weight.",
                        "合并后的层只是基础层本身：要把 scale · B A 加到它的权重上。")
    if not report(tensor_problem(got, want), "merged outputs against the LoRA layer's",
                  "合并后的输出与 LoRA 层的输出相比"):
        return False
    return passed("Correct: W' = W + (α / r) B A gives the same outputs, and inference costs nothing extra.",
                  "正确：W' = W + (α / r) B A 给出相同的输出，推理时没有任何额外开销。")


# ------------------------------------------------------------------------------------------------------------
# Exercise 4: predict what one step changes
# ------------------------------------------------------------------------------------------------------------

def _as_names(got):
    if isinstance(got, str):
        got = [got] if got.strip() else []
    if not isinstance(got, (set, frozenset, list, tuple)) or not all(isinstance(s, str) for s in got):
        return None
    return {s.strip().upper() for s in got}


def _experiment(steps: int) -> set[str]:
    torch.manual_seed(0)
    layer = lora_lib.LoRALinear(nn.Linear(6, 5), r=2, alpha=4.0)
    A0, B0 = layer.lora_A.detach().clone(), layer.lora_B.detach().clone()
    opt = torch.optim.SGD([layer.lora_A, layer.lora_B], lr=0.1)            # plain SGD: no weight decay, no momentum
    for _ in range(steps):
        opt.zero_grad()
        layer(torch.randn(4, 6)).pow(2).mean().backward()
        opt.step()
    return {name for name, p, p0 in (("A", layer.lora_A, A0), ("B", layer.lora_B, B0)) if not torch.equal(p, p0)}


@never_raises
def check_which_change(fn) -> bool:
    """Exercise 4 (predict): ``fn(steps) -> {"A", "B"} subset``, the adapter matrices that plain SGD has changed after
    ``steps`` steps from LoRA's initialisation (B = 0, A random). Any set, list, tuple or single string of the
    letters is accepted, in either case. The check then runs the experiment to show it."""
    g = fresh_generator()
    later = fresh_int(2, 100, g)
    drawn = [0, 1, later, later + fresh_int(1, 100, g)]      # two drawn counts: no table of a past run passes
    for steps in drawn:
        with watching(fn, _LIBRARY) as calls:
            ok, got = attempt(fn, steps)
        if not ok:
            return False
        if calls:
            return fail("Predict, do not run: the exercise asks what the gradients ∂L/∂B = g (A x)ᵀ and "
                        "∂L/∂A = Bᵀ g xᵀ are at the start, not the result of an experiment.",
                        "请预测，不要运行：练习问的是一开始的梯度 ∂L/∂B = g (A x)ᵀ 和 ∂L/∂A = Bᵀ g xᵀ 是什么，"
                        "而不是实验结果。")
        names = _as_names(got)
        if names is None:
            return fail(f"Return a set of the letters 'A' and 'B' (e.g. {{'A'}}), got {got!r}.",
                        f"请返回由字母 'A'、'B' 组成的集合（例如 {{'A'}}），实际得到 {got!r}。")
        want = _experiment(steps)
        if names != want:
            if steps == 1 and "A" in names:
                return fail("After one step A has not moved: its gradient Bᵀ g xᵀ is zero while B = 0. Only B "
                            "moves, and from the second step on A follows.",
                            "第一步之后 A 没有动：B = 0 时它的梯度 Bᵀ g xᵀ 是零。只有 B 在动，从第二步起 A 才跟着动。")
            if steps >= 2 and names == {"B"}:
                return fail(f"After {steps} steps B is no longer zero, so A's gradient Bᵀ g xᵀ is not zero either.",
                            f"{steps} 步之后 B 已经不是零了，所以 A 的梯度 Bᵀ g xᵀ 也不再是零。")
            return fail(f"After {steps} step(s): expected {sorted(want)}, got {sorted(names)}.",
                        f"{steps} 步之后：应为 {sorted(want)}，实际是 {sorted(names)}。")
    return passed("Correct, and the experiment agrees: step 1 moves B only (A's gradient is Bᵀ g xᵀ = 0), then both.",
                  "正确，实验也这样说：第 1 步只有 B 在动（A 的梯度 Bᵀ g xᵀ = 0），之后两个都动。")
