"""Lesson 08 · output layer and cross-entropy: the figures, the logits widget and the exercise checks.

The notebook writes log-softmax, cross-entropy and the teacher-forcing loss itself and checks them against
``course_utils.losses`` and PyTorch; this module holds what would distract from that:

* :func:`plot_nll_curve` (−log p of the correct class) and :func:`plot_token_losses` (the per-token loss of a
  teacher-forced batch, padding blanked out);
* :func:`build_logits_widget`: five logit sliders, the target class and the label smoothing → probabilities,
  the smoothed target distribution and the loss;
* the ``check_*`` functions of the exercises (they print a verdict and never raise).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from course_utils import losses

from .. import i18n, viz
from ..exercises import as_number, attempt, fail, is_tensor, never_raises, passed, report, slow_exercise, watching

# ------------------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------------------


def plot_nll_curve(marks=(0.01, 0.1, 0.5, 0.9), lang=None):
    """−log p against p, the probability the model gives the correct token, with a few values marked."""
    code = viz.use_language(lang)
    p = np.linspace(0.005, 1.0, 400)
    fig = viz.new_figure((6, 3.8))
    ax = fig.add_subplot()
    ax.plot(p, -np.log(p), color="tab:blue")
    for m in marks:
        ax.plot([m], [-math.log(m)], "o", color="tab:red")
        ax.annotate(f"p={m:g}: {-math.log(m):.2f}", (m, -math.log(m)), textcoords="offset points",
                    xytext=(8, 4), fontsize=9)
    ax.set_xlabel(i18n.pick({"en": "p(correct token)", "zh": "p（正确词元）"}, code))
    ax.set_ylabel(i18n.pick({"en": "loss −log p", "zh": "损失 −log p"}, code))
    ax.set_title(i18n.pick({"en": "Cross-entropy punishes confident mistakes without bound",
                            "zh": "交叉熵对“自信的错误”的惩罚没有上限"}, code))
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 5.5)
    ax.grid(alpha=0.3)
    return fig


def plot_token_losses(per_token, keep: torch.Tensor, tokens=None, lang=None):
    """Heatmaps of per-token losses ``(B, T)``; positions with ``keep`` False (padding) are left blank.

    ``per_token``: one ``(B, T)`` tensor, or a dict ``{panel title: (B, T) tensor}`` drawn side by side on one
    colour scale. ``tokens``: optional ``B`` lists of ``T`` strings written in the cells (the target tokens).
    """
    code = viz.use_language(lang)
    panels = dict(per_token) if isinstance(per_token, dict) else {"": per_token}
    if not panels:
        raise ValueError("per_token is empty: pass a (B, T) tensor or a dict of them")
    keep_np = keep.detach().cpu().numpy().astype(bool)
    losses = {title: t.detach().float().cpu().numpy() for title, t in panels.items()}
    for title, loss in losses.items():
        if loss.shape != keep_np.shape or loss.ndim != 2:
            raise ValueError(f"per_token {loss.shape} ({title!r}) and keep {keep_np.shape} must both be "
                             "(B, T)")
    vmax = max(float(loss[keep_np].max()) for loss in losses.values()) if keep_np.any() else 1.0
    b, t = keep_np.shape
    fig = viz.new_figure((0.6 + (0.85 * t + 0.6) * len(losses) + 1.0, 1.5 + 0.55 * b))
    axes = fig.subplots(1, len(losses), squeeze=False)[0]
    im = None
    for ax, (title, loss) in zip(axes, losses.items()):
        im = ax.imshow(np.ma.masked_where(~keep_np, loss), cmap="magma_r", vmin=0.0, vmax=vmax or 1.0)
        for i in range(b):
            for j in range(t):
                if tokens is None:
                    continue
                text = str(tokens[i][j]) if keep_np[i, j] else "<pad>"
                dark = keep_np[i, j] and loss[i, j] > 0.45 * (vmax or 1.0)
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        ax.set_xticks(range(t))
        ax.set_yticks(range(b))
        ax.set_xlabel(i18n.pick({"en": "target position i", "zh": "目标位置 i"}, code))
        ax.set_title(title or i18n.pick({"en": "−log P(y_i | y_<i, X) per token",
                                         "zh": "每个词元的 −log P(y_i | y_<i, X)"}, code))
    axes[0].set_ylabel(i18n.pick({"en": "sequence in the batch", "zh": "批次中的序列"}, code))
    fig.colorbar(im, ax=list(axes), label=i18n.tr("loss", code), shrink=0.9)
    return fig


# ------------------------------------------------------------------------------------------------------------
# Widget: logits, target class, label smoothing -> probabilities and loss
# ------------------------------------------------------------------------------------------------------------

CLASSES = {"en": ["cat", "dog", "bird", "fish", "frog"], "zh": ["猫", "狗", "鸟", "鱼", "青蛙"]}
START_LOGITS = (2.0, 1.0, 0.0, -1.0, 0.5)


def smoothed_target(target: int, n_classes: int, smoothing: float) -> torch.Tensor:
    """PyTorch's label-smoothed target distribution: ``1 − ε + ε/V`` on the target, ``ε/V`` elsewhere."""
    q = torch.full((n_classes,), smoothing / n_classes)
    q[target] += 1.0 - smoothing
    return q


def _render_logits(z0, z1, z2, z3, z4, target, smoothing, lang=None):
    code = viz.use_language(lang)
    names = CLASSES[code]
    logits = torch.tensor([z0, z1, z2, z3, z4], dtype=torch.float32)
    probs = torch.softmax(logits, dim=-1)
    loss = float(losses.cross_entropy(logits[None], torch.tensor([target]), label_smoothing=float(smoothing)))
    nll = float(-torch.log_softmax(logits, dim=-1)[target])
    q = smoothed_target(target, len(names), float(smoothing))
    fig = viz.new_figure((7.5, 4))
    ax = fig.add_subplot()
    colors = ["tab:orange" if i == target else "tab:blue" for i in range(len(names))]
    ax.bar(range(len(names)), probs.numpy(), color=colors, label=i18n.pick({"en": "softmax(logits)",
                                                                            "zh": "softmax(logits)"}, code))
    ax.plot(range(len(names)), q.numpy(), "_", color="black", markersize=30, markeredgewidth=2.5,
            label=i18n.pick({"en": "target distribution", "zh": "目标分布"}, code))
    for i, p in enumerate(probs.tolist()):
        ax.text(i, p + 0.02, f"{p:.2f}", ha="center", fontsize=9)
    ax.set_xticks(range(len(names)), labels=[f"{n}\nz={z:+.1f}" for n, z in zip(names, logits.tolist())])
    ax.set_ylim(0, 1.3)
    ax.set_ylabel(i18n.tr("probability", code))
    ax.legend(loc="upper center", ncols=2)
    ax.set_title(i18n.pick({"en": "loss = {l:.3f}   (−log p[{t}] = {n:.3f}, ε = {e:.2f})",
                            "zh": "损失 = {l:.3f}   （−log p[{t}] = {n:.3f}，ε = {e:.2f}）"}, code)
                 .format(l=loss, t=names[target], n=nll, e=smoothing))
    state = {"logits": logits.numpy(), "probs": probs.numpy(), "target": target,
             "smoothing": float(smoothing), "loss": loss, "nll": nll, "target_distribution": q.numpy()}
    return fig, state


def build_logits_widget(logits=START_LOGITS, target: int = 0, smoothing: float = 0.0):
    """Five logit sliders, a target dropdown and a label-smoothing slider."""
    from ..widgets import LessonWidget, dropdown, slider

    names = CLASSES[i18n.current_language()]
    if len(logits) != len(names):
        raise ValueError(f"give {len(names)} start logits, one per class, got {len(logits)}")
    controls = {f"z{i}": slider(f"z{i}", -8.0, 8.0, 0.5, float(z), label=f"z[{names[i]}]")
                for i, z in enumerate(logits)}
    controls["target"] = dropdown("target", [(n, i) for i, n in enumerate(names)], target,
                                  label={"en": "correct class y", "zh": "正确类别 y"})
    controls["smoothing"] = slider("smoothing", 0.0, 0.5, 0.05, float(smoothing),
                                   label={"en": "label smoothing ε", "zh": "标签平滑 ε"})
    return LessonWidget(controls, _render_logits,
                        title={"en": "Logits → softmax → cross-entropy", "zh": "logits → softmax → 交叉熵"})


# ------------------------------------------------------------------------------------------------------------
# Exercise checks: print a verdict, return True / False, never raise
# ------------------------------------------------------------------------------------------------------------

def _forbidden(calls, en_why: str, zh_why: str) -> bool:
    """The verdict for a forbidden library call: name what was called and why the exercise rules it out."""
    names = ", ".join(dict.fromkeys(calls))
    return fail(f"You called {names}: {en_why}", f"你调用了 {names}：{zh_why}")


# What exercise 1 rules out: library functions that apply the stabilising trick for the student.
# logsumexp too: log(1 + e^z) = logsumexp([0, z]) is the max trick done by the library.
STABLE_BINARY = ((F, "binary_cross_entropy_with_logits"), (F, "logsigmoid"), (F, "softplus"), (torch, "logaddexp"),
                 (torch, "logsumexp"))


@never_raises
def check_binary_cross_entropy(fn) -> bool:
    """Exercise 1: ``fn(z (N,), y (N,) of 0./1.)`` = per-example ``−[y log σ(z) + (1 − y) log(1 − σ(z))]``,
    finite for logits like ±1000, written without the library functions that stabilise it."""
    g = torch.Generator().manual_seed(8)
    cases = [(3 * torch.randn(7, generator=g), torch.tensor([0.0, 1, 1, 0, 1, 0, 1])),
             (torch.tensor([1000.0, -1000.0, 0.0, 50.0, -50.0, 1000.0]), torch.tensor([0.0, 1, 1, 1, 0, 1]))]
    for z, y in cases:
        with watching(fn, STABLE_BINARY) as calls:
            ok, got = attempt(fn, z.clone(), y.clone())
        if not ok:
            return False
        if calls:
            return _forbidden(calls, "it applies the trick for you. Write log(1 + e^z) with the maximum "
                                     "max(0, z) taken out, as log_softmax does for (0, z).",
                              "它替你用了这个技巧。请自己写出 log(1 + e^z)，先把最大值 max(0, z) 提出来，"
                              "就像 log_softmax 对 (0, z) 所做的那样。")
        if not is_tensor(got, z.shape, "loss per example", "每个样本的损失"):
            return False
        want = F.binary_cross_entropy_with_logits(z, y, reduction="none")
        got = got.detach().float()
        if not torch.isfinite(got).all():
            return fail("inf or nan for z = ±1000: σ(z) rounds to exactly 0 or 1 and its log is −inf. Never take "
                        "the log of σ(z); use log σ(z) = z − log(1 + e^z) with the maximum taken out.",
                        "z = ±1000 时出现了 inf 或 nan：σ(z) 被舍入成恰好 0 或 1，取对数就是 −inf。不要对 σ(z) 取对数；"
                        "用 log σ(z) = z − log(1 + e^z)，并先提出最大值。")
        if torch.allclose(got, -want, atol=1e-4):
            return fail("The sign is flipped: the loss is the *negative* log-likelihood, never below 0.",
                        "符号反了：损失是**负**对数似然，不会小于 0。")
        if not torch.allclose(got, want, atol=1e-4, rtol=1e-5):
            err = float((got - want).abs().max())
            return fail(f"Wrong values (largest difference {err:.3g}): the loss is log(1 + e^z) − y·z.",
                        f"数值不对（最大差值 {err:.3g}）：损失应为 log(1 + e^z) − y·z。")
    return passed("Correct: a single logit is a two-class softmax over (0, z), so the same max trick keeps it "
                  "finite. PyTorch's version is F.binary_cross_entropy_with_logits.",
                  "正确：一个 logit 就是对 (0, z) 做二分类 softmax，同样的减最大值技巧让它保持有限。"
                  "PyTorch 里对应的是 F.binary_cross_entropy_with_logits。")


# What exercise 2 rules out: the library losses that accept a target distribution.
SOFT_TARGET_LOSSES = ((F, "cross_entropy"), (F, "kl_div"), (losses, "cross_entropy"))


@never_raises
def check_soft_cross_entropy(fn) -> bool:
    """Exercise 2: ``fn(logits (N, V), q (N, V))`` = mean over rows of ``−Σ_k q_k log softmax(logits)_k``, for
    any target distribution ``q`` (label smoothing and distillation are two choices of ``q``)."""
    g = torch.Generator().manual_seed(9)
    eps, n_classes = 0.1, 6
    hard = torch.tensor([2, 0, 5])
    cases = [(3 * torch.randn(4, n_classes, generator=g), torch.softmax(torch.randn(4, n_classes, generator=g), -1)),
             (torch.tensor([[1000.0, 0.0, -1000.0, 5.0, 0.0, 0.0]]), torch.tensor([[0.5, 0.5, 0.0, 0.0, 0.0, 0.0]])),
             (2 * torch.randn(3, n_classes, generator=g),
              torch.stack([smoothed_target(int(t), n_classes, eps) for t in hard]))]
    for logits, q in cases:
        with watching(fn, SOFT_TARGET_LOSSES) as calls:
            ok, got = attempt(fn, logits.clone(), q.clone())
        if not ok:
            return False
        if calls:
            return _forbidden(calls, "that loss takes a target distribution and does the whole exercise. Write "
                                     "−Σ q log p yourself, with a stable log-softmax.",
                              "这个损失函数可以直接接受目标分布，整个练习都被它做完了。请自己写出 −Σ q log p，"
                              "其中 log p 用稳定的 log-softmax 计算。")
        if not is_tensor(got, (), "loss", "损失"):
            return False
        want = F.cross_entropy(logits, q)
        got = got.detach().float()
        if not torch.isfinite(got):
            return fail("nan or inf: where q is 0 and log p is −inf, 0 · (−inf) = nan. Compute log p with a stable "
                        "log-softmax (never log(softmax(x))): then log p is finite and 0 · log p = 0.",
                        "出现了 nan 或 inf：q 为 0 而 log p 为 −inf 的地方，0 · (−inf) = nan。请用稳定的 log-softmax "
                        "计算 log p（不要写 log(softmax(x))）：这样 log p 是有限值，0 · log p = 0。")
        if len(q) > 1 and torch.allclose(got, want * len(q), atol=1e-4):
            return fail("You summed over the rows: the loss is their mean.", "你对各行求了和：损失应取各行的平均值。")
        if torch.allclose(got, -want, atol=1e-4):
            return fail("The sign is flipped: the loss is −Σ q log p, never below 0.",
                        "符号反了：损失是 −Σ q log p，不会小于 0。")
        if not torch.allclose(got, want, atol=1e-4, rtol=1e-5):
            return fail(f"Expected {float(want):.4f}, got {float(got):.4f}: average −Σ_k q_k log p_k over the rows.",
                        f"应为 {float(want):.4f}，实际是 {float(got):.4f}：对每一行算 −Σ_k q_k log p_k，再取平均。")
    return passed("Correct, for any q. With q = the smoothed one-hot target it equals cross-entropy with label "
                  "smoothing (the third test); with q = a teacher model's softmax it is the distillation loss.",
                  "正确，对任意 q 都成立。q 取平滑后的独热目标时，它就等于带标签平滑的交叉熵（第三个测试）；"
                  "q 取一个教师模型的 softmax 时，它就是知识蒸馏的损失。")


GRADIENT_CALLS = ((torch.Tensor, "backward"), (torch.autograd, "backward"), (torch.autograd, "grad"))


@never_raises
def check_smoothed_confidence(fn) -> bool:
    """Exercise 3 (an experiment): ``fn(eps, n_classes)`` trains free logits with label smoothing ``eps`` and
    returns the probability the trained model gives the correct class (the optimum is ``1 − ε + ε/V``)."""
    found = []
    for eps, n_classes in ((0.1, 12), (0.3, 5), (0.0, 4)):
        with watching(fn, GRADIENT_CALLS) as calls, slow_exercise():     # it trains: allow minutes, not seconds
            ok, got = attempt(fn, eps, n_classes)
        if not ok:
            return False
        if not calls:
            return fail("You returned a number without training anything (no backward() was called). The "
                        "exercise is an experiment: train, then measure; the formula comes afterwards.",
                        "你没有训练任何东西就返回了一个数（没有调用 backward()）。这个练习是一个实验："
                        "先训练，再测量；公式放在最后再看。")
        value, problem = as_number(got)
        if problem:
            return report(problem, "Return the probability as a number", "请把概率作为一个数返回")
        cap = 1 - eps + eps / n_classes
        if eps > 0 and value > cap + 0.01:
            return fail(f"With ε = {eps} you measured {value:.3f}, above what the smoothed loss allows: is "
                        "label_smoothing=eps passed to the loss you minimise?",
                        f"ε = {eps} 时你测得 {value:.3f}，比平滑后的损失所允许的还高：你最小化的损失里传了 "
                        "label_smoothing=eps 吗？")
        if abs(value - cap) > 0.01:
            return fail(f"For ε = {eps}, |V| = {n_classes} you measured {value:.3f}, still moving: train longer "
                        "(or with a larger learning rate) until the probability stops changing, then read it.",
                        f"ε = {eps}、|V| = {n_classes} 时你测得 {value:.3f}，还没有收敛：训练更久（或用更大的学习率），"
                        "等概率不再变化时再读数。")
        found.append(f"ε = {eps}, |V| = {n_classes}: {value:.3f}")
    return passed("Measured " + "; ".join(found) + ". The smoothed loss is lowest when the model predicts the "
                  "smoothed target itself, so the confidence stops at 1 − ε + ε/|V|: never 100 %.",
                  "测得 " + "；".join(found) + "。模型预测出平滑后的目标分布本身时，平滑损失最小，"
                  "所以置信度停在 1 − ε + ε/|V|，永远到不了 100%。")
