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

from course_utils.losses import cross_entropy

from .. import i18n, viz
from ..exercises import attempt, fail, is_tensor, never_raises, passed

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
    loss = float(cross_entropy(logits[None], torch.tensor([target]), label_smoothing=float(smoothing)))
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

@never_raises
def check_log_softmax(fn) -> bool:
    """Exercise 1: ``fn(x)`` = log-softmax over the last dimension, finite even for logits like ±1000."""
    g = torch.Generator().manual_seed(8)
    cases = [torch.randn(3, 6, generator=g),
             torch.tensor([[1000.0, 0.0, -1000.0], [-50.0, -1000.0, -2000.0]]),
             20 * torch.randn(2, 3, 7, generator=g)]
    for x in cases:
        ok, got = attempt(fn, x.clone())
        if not ok or not is_tensor(got, x.shape, "log_softmax", "log_softmax"):
            return False
        want = F.log_softmax(x, dim=-1)
        if not torch.isfinite(got).all():
            return fail("Your result contains inf or nan for large logits: subtract the row maximum before exp().",
                        "logits 很大时结果里出现了 inf 或 nan：先减去每行的最大值，再做 exp()。")
        if not torch.allclose(got, want, atol=1e-4, rtol=1e-5):
            err = float((got - want).abs().max())
            return fail(f"Wrong values (largest difference {err:.3g}): the result should be "
                        "x − m − log Σ exp(x − m), along the last dimension.",
                        f"数值不对（最大差值 {err:.3g}）：结果应为 x − m − log Σ exp(x − m)，沿最后一个维度计算。")
    return passed("Correct: finite for any logits, and exp() of each row sums to 1.",
                  "正确：任何 logits 都不会溢出，每行取 exp() 之后加起来等于 1。")


@never_raises
def check_cross_entropy(fn) -> bool:
    """Exercise 2: ``fn(logits (N, V), targets (N,), ignore_index)`` = mean −log p over non-ignored rows."""
    g = torch.Generator().manual_seed(9)
    logits = 3 * torch.randn(6, 5, generator=g)
    targets = torch.tensor([1, 4, 0, 0, 2, 0])          # ignore_index 0: the padding of this example
    ok, got = attempt(fn, logits.clone(), targets.clone(), 0)
    if not ok or not is_tensor(got, (), "loss", "损失"):
        return False
    want = F.cross_entropy(logits, targets, ignore_index=0)
    if torch.allclose(got.float(), want, atol=1e-5):
        return passed("Correct: padding positions neither add to the loss nor count in the mean.",
                      "正确：填充位置既不计入损失，也不计入平均的分母。")
    nll = -torch.log_softmax(logits, -1).gather(1, targets[:, None]).squeeze(1)
    keep = targets != 0
    if torch.allclose(got.float(), nll.mean(), atol=1e-5):
        return fail("The ignored positions were counted: drop the rows whose target is ignore_index.",
                    "被忽略的位置也算进去了：去掉目标等于 ignore_index 的行。")
    if torch.allclose(got.float(), nll[keep].sum() / len(targets), atol=1e-5):
        return fail("Right sum, wrong count: divide by the number of *kept* positions, not by N.",
                    "求和对了，分母错了：要除以**保留下来的**位置数，而不是 N。")
    return fail(f"Expected {float(want):.4f}, got {float(got):.4f}: loss = mean over kept rows of −log p[target].",
                f"应为 {float(want):.4f}，实际是 {float(got):.4f}：损失 = 保留的行上 −log p[目标] 的平均值。")


@never_raises
def check_teacher_forcing(fn) -> bool:
    """Exercise 3: ``fn(tgt)`` with tgt = <bos> y_1 … y_n <eos> <pad>… returns ``(decoder_input, labels)``."""
    tgt = torch.tensor([[1, 5, 6, 7, 2, 0], [1, 9, 2, 0, 0, 0]])
    ok, got = attempt(fn, tgt.clone())
    if not ok:
        return False
    if not (isinstance(got, tuple) and len(got) == 2):
        return fail("Return a pair (decoder_input, labels).", "请返回一个二元组 (decoder_input, labels)。")
    dec_in, labels = got
    want_in, want_out = tgt[:, :-1], tgt[:, 1:]
    if not (is_tensor(dec_in, want_in.shape, "decoder_input", "decoder_input")
            and is_tensor(labels, want_out.shape, "labels", "labels")):
        return False
    if torch.equal(dec_in, want_out) and torch.equal(labels, want_in):
        return fail("Swapped: the decoder reads <bos> y_1 … (drop the last token) and must predict y_1 … <eos> "
                    "(drop the first).",
                    "两者弄反了：解码器读入 <bos> y_1 …（去掉最后一个词元），"
                    "要预测 y_1 … <eos>（去掉第一个词元）。")
    if not (torch.equal(dec_in, want_in) and torch.equal(labels, want_out)):
        return fail("Not the right shift: labels[:, i] must be the token that follows decoder_input[:, i].",
                    "错位方式不对：labels[:, i] 必须是 decoder_input[:, i] 之后的那个词元。")
    return passed("Correct: position i reads y_<i+1 and is trained to predict the next token.",
                  "正确：位置 i 读入前面的词元，被训练去预测下一个词元。")
