"""Lesson 01 (tokens to vectors): the norm measurement, its widget and the exercise checks."""

from __future__ import annotations

import math
import re

import pytest
import references
import torch
import torch.nn.functional as F

from course_lab.lessons import l01_tokens as l01

pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


def _raises(*_):
    raise NotImplementedError


@pytest.mark.parametrize("d_model", [16, 256])
def test_paper_init_balances_token_and_position(d_model):
    data = l01.norm_comparison(d_model, l01.init_std("paper", d_model), vocab_size=2000)
    torch.testing.assert_close(torch.as_tensor(data["pe_norms"]),
                               torch.full((128,), math.sqrt(d_model / 2)))          # every row, exactly
    assert abs(data["token_mean"] - 1) < 0.05                                         # ‖E_t‖ ≈ 1
    assert abs(data["scaled_mean"] / math.sqrt(d_model) - 1) < 0.05                   # ‖√d E_t‖ ≈ √d
    assert abs(data["ratio"] - math.sqrt(2)) < 0.08


def test_default_torch_init_buries_the_position():
    data = l01.norm_comparison(128, l01.init_std("torch", 128))
    assert abs(data["ratio"] / math.sqrt(2 * 128) - 1) < 0.05                         # grows like √(2d)


def test_norm_comparison_errors():
    with pytest.raises(ValueError, match="unknown init scheme"):
        l01.init_std("xavier", 64)
    with pytest.raises(ValueError, match="d_model"):
        l01.norm_comparison(1, 0.1)
    with pytest.raises(ValueError, match="std"):
        l01.norm_comparison(64, 0.0)


def test_norm_widget_callbacks():
    w = l01.build_norm_widget("en")
    assert w.state["d_model"] == 64 and abs(w.state["ratio"] - math.sqrt(2)) < 0.1
    w.controls["scheme"].value = "torch"
    assert abs(w.state["ratio"] - math.sqrt(128)) < 0.6 and w.state["std"] == 1.0
    w.controls["d_model"].value = 256
    assert w.state["d_model"] == 256 and abs(w.state["ratio"] - math.sqrt(512)) < 1.2
    ax_bar = w.figure.axes[1]
    heights = [bar.get_height() for bar in ax_bar.patches]
    assert heights == pytest.approx([w.state["token_mean"], w.state["scaled_mean"], w.state["pe_mean"]])
    assert w.renders == 3


def test_norm_widget_in_chinese():
    w = l01.build_norm_widget("zh")
    w.controls["scheme"].value = "gpt2"
    assert w.state["std"] == 0.02
    legend = [t.get_text() for t in w.figure.axes[0].get_legend().get_texts()]
    assert any(re.search("[\u4e00-\u9fff]", t) for t in legend)
    assert re.search("[\u4e00-\u9fff]", w.controls["scheme"].options[0][0])


def test_check_one_hot_costs(capsys):
    assert l01.check_one_hot_costs(references.one_hot_costs)
    assert l01.check_one_hot_costs(lambda n, v, d: [float(n * v * d), float(n * v * 4)])   # floats, a list: fine
    out = capsys.readouterr().out
    assert "1.65 GB" in out and "10.7 times E itself" in out, out
    assert not l01.check_one_hot_costs(lambda n, v, d: (4 * n * v, n * v * d))            # swapped
    assert not l01.check_one_hot_costs(lambda n, v, d: n * v * d)
    assert "Return a pair" in capsys.readouterr().out
    assert not l01.check_one_hot_costs(_raises)
    assert not l01.check_one_hot_costs(lambda n, v, d: (n * v * d, 8 * n * v), lang="zh")
    out = capsys.readouterr().out
    assert "int64" in out and "字节数" in out, out


def _embedding_grad_by_autograd(ids, grad_out, vocab_size):
    E = torch.zeros(vocab_size, grad_out.shape[-1], requires_grad=True)
    return torch.autograd.grad((E[ids] * grad_out).sum(), E)[0]


def test_check_embedding_grad(capsys):
    def index_add(ids, grad_out, vocab_size):
        C = grad_out.shape[-1]
        return torch.zeros(vocab_size, C).index_add_(0, ids.flatten(), grad_out.reshape(-1, C))

    def overwrite(ids, grad_out, vocab_size):
        grad = torch.zeros(vocab_size, grad_out.shape[-1])
        grad[ids] = grad_out
        return grad

    def nn_embedding(ids, grad_out, vocab_size):
        layer = torch.nn.Embedding(vocab_size, grad_out.shape[-1])
        layer(ids).backward(grad_out)
        return layer.weight.grad

    assert l01.check_embedding_grad(index_add)
    assert l01.check_embedding_grad(references.embedding_grad)
    assert l01.check_embedding_grad(lambda ids, g, v: F.one_hot(ids, v).to(g.dtype).flatten(0, 1).T @ g.flatten(0, 1))
    # the check's truth is autograd's gradient through nn.Embedding
    for ids, grad_out, vocab_size in l01._gradient_cases():
        torch.testing.assert_close(nn_embedding(ids, grad_out, vocab_size), index_add(ids, grad_out, vocab_size))
    capsys.readouterr()
    assert not l01.check_embedding_grad(overwrite)
    assert "used several times" in capsys.readouterr().out
    assert not l01.check_embedding_grad(lambda ids, g, v: F.one_hot(ids, v).float().transpose(1, 2) @ g)
    assert "expected shape (9, 6)" in capsys.readouterr().out                    # forgot to sum over the batch
    for shortcut in (nn_embedding, _embedding_grad_by_autograd):
        assert not l01.check_embedding_grad(shortcut)
        assert "asked autograd" in capsys.readouterr().out
    assert not l01.check_embedding_grad(_raises)


def test_check_balanced_std(capsys):
    assert l01.check_balanced_std(references.balanced_std)
    ratio = re.search(r"‖√d·E_t‖ / ‖PE‖ = (\d+\.\d+)", capsys.readouterr().out)
    assert ratio and abs(float(ratio.group(1)) - 1) < 0.02                       # the measured balance
    assert not l01.check_balanced_std(lambda d: d ** -0.5)          # the paper's std: ratio √2, not 1
    assert not l01.check_balanced_std(lambda d: "small")
    assert not l01.check_balanced_std(_raises)
    capsys.readouterr()
    assert not l01.check_balanced_std(lambda d: 0.0884)              # right for d_model = 64 only
    assert "for every d_model" in capsys.readouterr().out
    data = l01.norm_comparison(64, references.balanced_std(64), vocab_size=4000)
    assert abs(data["ratio"] - 1) < 0.03                             # the answer really balances the norms
