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

from course_utils import losses

from ... import i18n, viz
from .checks import check_binary_cross_entropy as check_binary_cross_entropy
from .checks import check_smoothed_confidence as check_smoothed_confidence
from .checks import check_soft_target_gradient as check_soft_target_gradient
from .checks import smoothed_target as smoothed_target

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
    from ...widgets import LessonWidget, dropdown, slider

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

