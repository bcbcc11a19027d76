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


def _bce(z, y):
    m = torch.clamp(z, min=0)
    return m + torch.log(torch.exp(-m) + torch.exp(z - m)) - y * z


def _log_softmax(x):
    m = x.max(dim=-1, keepdim=True).values
    return x - m - torch.log(torch.exp(x - m).sum(dim=-1, keepdim=True))


def test_check_binary_cross_entropy(capsys):
    def through_two_classes(z, y):                         # the lesson's log_softmax over the logits (0, z)
        logp = _log_softmax(torch.stack([torch.zeros_like(z), z], -1))
        return -(logp * torch.stack([1 - y, y], -1)).sum(-1)

    def naive(z, y):
        p = torch.sigmoid(z)
        return -(y * torch.log(p) + (1 - y) * torch.log(1 - p))

    assert l08.check_binary_cross_entropy(_bce) is True
    assert l08.check_binary_cross_entropy(through_two_classes) is True
    assert "✓" in capsys.readouterr().out
    assert l08.check_binary_cross_entropy(naive) is False
    assert "inf or nan" in capsys.readouterr().out
    for shortcut in (lambda z, y: F.binary_cross_entropy_with_logits(z, y, reduction="none"),
                     lambda z, y: -(y * F.logsigmoid(z) + (1 - y) * F.logsigmoid(-z)),
                     lambda z, y: F.softplus(z) - y * z,
                     lambda z, y: torch.logaddexp(torch.zeros_like(z), z) - y * z):
        assert l08.check_binary_cross_entropy(shortcut) is False
        assert "applies the trick for you" in capsys.readouterr().out
    assert l08.check_binary_cross_entropy(lambda z, y: -_bce(z, y)) is False
    assert "sign is flipped" in capsys.readouterr().out
    assert l08.check_binary_cross_entropy(lambda z, y: _bce(z, 1 - y)) is False
    assert "log(1 + e^z) − y·z" in capsys.readouterr().out
    assert l08.check_binary_cross_entropy(lambda z, y: _bce(z, y).mean()) is False
    assert "expected shape" in capsys.readouterr().out
    assert l08.check_binary_cross_entropy(_not_implemented) is False
    assert "Not attempted" in capsys.readouterr().out
    assert l08.check_binary_cross_entropy(_crash) is False
    assert "RuntimeError" in capsys.readouterr().out


def test_check_soft_target_gradient(capsys):
    def good(logits, q):
        return (torch.softmax(logits, -1) - q) / len(q)

    assert l08.check_soft_target_gradient(good) is True
    assert "(softmax(z) − q) / N" in capsys.readouterr().out
    for wrong, says in ((lambda z, q: torch.softmax(z, -1) - q, "1/N"),
                        (lambda z, q: (q - torch.softmax(z, -1)) / len(q), "sign is flipped"),
                        (lambda z, q: -q / torch.softmax(z, -1) / len(q), "∂L/∂p"),
                        (lambda z, q: (torch.softmax(z, -1) - F.one_hot(q.argmax(-1), q.shape[-1])) / len(q),
                         "hard label"),
                        (lambda z, q: (torch.exp(z) / torch.exp(z).sum(-1, keepdim=True) - q) / len(q), "overflows"),
                        (lambda z, q: torch.softmax(z, -1) * (1 - q) / len(q), "Not yet"),
                        (lambda z, q: (torch.softmax(z, -1) - q).mean(), "expected shape")):
        assert l08.check_soft_target_gradient(wrong) is False
        assert says in capsys.readouterr().out

    def by_backward(z, q):
        z = z.clone().requires_grad_(True)
        F.cross_entropy(z, q).backward()
        return z.grad

    def by_func_grad(z, q):
        return torch.func.grad(lambda t: F.cross_entropy(t, q))(z)

    for shortcut in (by_backward, by_func_grad):
        assert l08.check_soft_target_gradient(shortcut) is False
        assert "asked autograd" in capsys.readouterr().out
    assert l08.check_soft_target_gradient(_not_implemented) is False
    assert "Not attempted" in capsys.readouterr().out


def _confidence(eps, n_classes, steps=300, lr=0.1):
    logits = torch.zeros(1, n_classes, requires_grad=True)
    optimizer = torch.optim.Adam([logits], lr=lr)
    for _ in range(steps):
        loss = F.cross_entropy(logits, torch.tensor([0]), label_smoothing=eps)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return torch.softmax(logits, -1)[0, 0].item()


def test_check_smoothed_confidence(capsys):
    assert l08.check_smoothed_confidence(_confidence) is True
    out = capsys.readouterr().out
    assert "0.908" in out and "1 − ε + ε/|V|" in out
    assert l08.check_smoothed_confidence(lambda eps, n: _confidence(0.0, n)) is False
    assert "label_smoothing=eps" in capsys.readouterr().out
    assert l08.check_smoothed_confidence(lambda eps, n: _confidence(eps, n, steps=10)) is False
    assert "train longer" in capsys.readouterr().out
    assert l08.check_smoothed_confidence(lambda eps, n: 1 - eps + eps / n) is False
    assert "without training anything" in capsys.readouterr().out
    assert l08.check_smoothed_confidence(lambda eps, n: l08.smoothed_target(0, n, eps)[0]) is False
    assert "without training anything" in capsys.readouterr().out


def test_check_smoothed_confidence_restores_backward(capsys):
    original = torch.Tensor.backward
    l08.check_smoothed_confidence(_confidence)
    assert torch.Tensor.backward is original


def test_checks_speak_chinese(capsys):
    i18n.set_language("zh")
    assert l08.check_binary_cross_entropy(_not_implemented) is False
    assert "还没有作答" in capsys.readouterr().out
    assert l08.check_binary_cross_entropy(_bce) is True
    assert "正确" in capsys.readouterr().out
    assert l08.check_soft_target_gradient(lambda z, q: (q - torch.softmax(z, -1)) / len(q)) is False
    assert "符号反了" in capsys.readouterr().out
