"""Lesson 08 (output layer and cross-entropy): figures, the logits widget and the exercise checks."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lab import i18n
from course_lab.lessons import l08_output_loss as l08

matplotlib.use("Agg")


pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


# --- helpers and figures ------------------------------------------------------------------------------------

@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
def test_smoothed_target_is_pytorchs_definition(eps):
    q = l08.smoothed_target(2, 5, eps)
    torch.testing.assert_close(q.sum(), torch.tensor(1.0))
    logits = torch.randn(1, 5)
    ours = -(q * F.log_softmax(logits, -1)[0]).sum()
    torch.testing.assert_close(ours, F.cross_entropy(logits, torch.tensor([2]), label_smoothing=eps))


def test_plot_nll_curve():
    fig = l08.plot_nll_curve(marks=(0.5,))
    x, y = fig.axes[0].lines[0].get_data()
    np.testing.assert_allclose(y, -np.log(x))
    assert len(fig.axes[0].lines) == 2


def test_plot_token_losses_single_and_panels():
    keep = torch.tensor([[True, True, False], [True, True, True]])
    loss = torch.rand(2, 3)
    fig = l08.plot_token_losses(loss, keep, tokens=[["a", "b", "c"], ["d", "e", "f"]])
    img = fig.axes[0].images[0].get_array()
    assert img.mask[0, 2] and not img.mask[0, 0]
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "<pad>" in texts and "a" in texts and "c" not in texts
    fig = l08.plot_token_losses({"before": loss, "after": loss / 2}, keep)
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["before", "after"]
    assert panels[0].images[0].get_clim() == panels[1].images[0].get_clim()      # one colour scale
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        l08.plot_token_losses(torch.rand(2, 4), keep)


# --- widget -------------------------------------------------------------------------------------------------

def _bar_heights(w):
    return [p.get_height() for p in w.figure.axes[0].patches]


def test_widget_logits_change_probabilities_and_loss():
    w = l08.build_logits_widget()
    probs, loss = w.state["probs"].copy(), w.state["loss"]
    expected = F.cross_entropy(torch.tensor([l08.START_LOGITS]), torch.tensor([0])).item()
    assert loss == pytest.approx(expected, rel=1e-5)
    np.testing.assert_allclose(_bar_heights(w), probs, rtol=1e-6)

    w.controls["z0"].value = 8.0                           # the correct class becomes very likely
    assert w.state["loss"] < loss and w.state["probs"][0] > probs[0]
    assert _bar_heights(w)[0] == pytest.approx(w.state["probs"][0])

    w.controls["z3"].value = 8.0                           # a wrong class just as likely: loss goes up
    assert w.state["loss"] > 0.6


def test_widget_target_and_smoothing():
    w = l08.build_logits_widget()
    w.controls["target"].value = 3
    assert w.state["target"] == 3
    assert w.state["nll"] == pytest.approx(-math.log(w.state["probs"][3]), rel=1e-5)
    colors = [p.get_facecolor() for p in w.figure.axes[0].patches]
    assert colors[3] != colors[0]                           # the target bar is highlighted

    no_smoothing = w.state["loss"]
    w.controls["smoothing"].value = 0.2
    logits = torch.tensor([l08.START_LOGITS])
    want = F.cross_entropy(logits, torch.tensor([3]), label_smoothing=0.2).item()
    assert w.state["loss"] == pytest.approx(want, rel=1e-5) and w.state["loss"] != no_smoothing
    np.testing.assert_allclose(w.state["target_distribution"], [0.04, 0.04, 0.04, 0.84, 0.04], rtol=1e-6)
    marks = w.figure.axes[0].lines[0].get_ydata()
    np.testing.assert_allclose(marks, w.state["target_distribution"], rtol=1e-6)


def test_widget_is_shift_invariant():
    w = l08.build_logits_widget()
    probs, loss = w.state["probs"].copy(), w.state["loss"]
    w.set(**{f"z{i}": z + 3.0 for i, z in enumerate(l08.START_LOGITS)})
    np.testing.assert_allclose(w.state["probs"], probs, rtol=1e-5)
    assert w.state["loss"] == pytest.approx(loss, rel=1e-5)


def test_widget_speaks_chinese():
    i18n.set_language("zh")
    w = l08.build_logits_widget()
    labels = [t.get_text() for t in w.figure.axes[0].get_xticklabels()]
    assert any("猫" in label for label in labels)
    assert "损失" in w.figure.axes[0].get_title()
    assert w.controls["target"].label == "猫"
    with pytest.raises(ValueError, match="start logits"):
        l08.build_logits_widget(logits=(1.0, 2.0))


# --- exercise checks ----------------------------------------------------------------------------------------

def _not_implemented(*args):
    raise NotImplementedError


def _crash(*args):
    raise RuntimeError("boom")


def test_check_log_softmax(capsys):
    def stable(x):
        m = x.max(dim=-1, keepdim=True).values
        return x - m - torch.log(torch.exp(x - m).sum(dim=-1, keepdim=True))

    def naive(x):
        return torch.log(torch.softmax(x, dim=-1))

    assert l08.check_log_softmax(stable) is True
    assert "✓" in capsys.readouterr().out
    assert l08.check_log_softmax(naive) is False
    assert "subtract the row maximum" in capsys.readouterr().out
    assert l08.check_log_softmax(lambda x: x - x.max(dim=-1, keepdim=True).values) is False
    assert "Wrong values" in capsys.readouterr().out
    assert l08.check_log_softmax(lambda x: x.sum()) is False
    assert l08.check_log_softmax(_not_implemented) is False
    assert "Not attempted" in capsys.readouterr().out
    assert l08.check_log_softmax(_crash) is False
    assert "RuntimeError" in capsys.readouterr().out


def test_check_cross_entropy(capsys):
    def reference(logits, targets, ignore_index):
        keep = targets != ignore_index
        logp = F.log_softmax(logits[keep], dim=-1)
        return -logp.gather(1, targets[keep][:, None]).mean()

    def counts_padding(logits, targets, ignore_index):
        return F.cross_entropy(logits, targets)

    def wrong_count(logits, targets, ignore_index):
        return F.cross_entropy(logits, targets, ignore_index=ignore_index, reduction="sum") / len(targets)

    assert l08.check_cross_entropy(reference) is True
    assert l08.check_cross_entropy(counts_padding) is False
    assert "ignored positions were counted" in capsys.readouterr().out
    assert l08.check_cross_entropy(wrong_count) is False
    assert "wrong count" in capsys.readouterr().out
    assert l08.check_cross_entropy(lambda logits, targets, i: torch.tensor(0.5)) is False
    assert "Expected" in capsys.readouterr().out
    assert l08.check_cross_entropy(lambda logits, targets, i: torch.zeros(3)) is False
    assert l08.check_cross_entropy(_not_implemented) is False
    assert "Not attempted" in capsys.readouterr().out
    assert l08.check_cross_entropy(_crash) is False


def test_check_teacher_forcing(capsys):
    assert l08.check_teacher_forcing(lambda tgt: (tgt[:, :-1], tgt[:, 1:])) is True
    assert l08.check_teacher_forcing(lambda tgt: (tgt[:, 1:], tgt[:, :-1])) is False
    assert "Swapped" in capsys.readouterr().out
    assert l08.check_teacher_forcing(lambda tgt: (tgt, tgt)) is False
    assert l08.check_teacher_forcing(lambda tgt: (tgt[:, :-1], tgt[:, :-1])) is False
    assert "right shift" in capsys.readouterr().out
    assert l08.check_teacher_forcing(lambda tgt: tgt) is False
    assert "pair" in capsys.readouterr().out
    assert l08.check_teacher_forcing(_not_implemented) is False
    assert l08.check_teacher_forcing(_crash) is False


def test_checks_speak_chinese(capsys):
    i18n.set_language("zh")
    assert l08.check_teacher_forcing(_not_implemented) is False
    assert "还没有作答" in capsys.readouterr().out
    assert l08.check_teacher_forcing(lambda tgt: (tgt[:, :-1], tgt[:, 1:])) is True
    assert "正确" in capsys.readouterr().out
