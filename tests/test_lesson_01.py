"""Lesson 01 (tokens to vectors): the norm measurement, its widget and the exercise checks."""

from __future__ import annotations

import math
import re

import pytest
import references
import torch

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


def test_check_one_hot_lookup():
    assert l01.check_one_hot_lookup(references.one_hot_lookup)
    assert not l01.check_one_hot_lookup(lambda ids, E: E[ids] * 2)
    assert not l01.check_one_hot_lookup(lambda ids, E: E[ids].tolist())
    assert not l01.check_one_hot_lookup(lambda ids, E: torch.nn.functional.one_hot(ids) @ E)  # int @ float
    assert not l01.check_one_hot_lookup(_raises)


def test_check_input_vectors(capsys):
    assert l01.check_input_vectors(references.input_vectors)
    from course_utils import sinusoidal_encoding
    assert not l01.check_input_vectors(lambda ids, E: E[ids] + sinusoidal_encoding(ids.shape[1], E.shape[1]))
    assert "values differ" in capsys.readouterr().out
    assert not l01.check_input_vectors(lambda ids, E: E[ids] * math.sqrt(E.shape[1]))  # forgot the positions
    assert not l01.check_input_vectors(_raises)


def test_check_balanced_std():
    assert l01.check_balanced_std(references.balanced_std)
    assert not l01.check_balanced_std(lambda d: d ** -0.5)          # the paper's std: ratio √2, not 1
    assert not l01.check_balanced_std(lambda d: "small")
    assert not l01.check_balanced_std(_raises)
    data = l01.norm_comparison(64, references.balanced_std(64), vocab_size=4000)
    assert abs(data["ratio"] - 1) < 0.03                             # the answer really balances the norms
