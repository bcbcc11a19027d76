"""Lesson 05 (masking): the mask-grid widget, its presets and the exercise checks."""

from __future__ import annotations

import ipywidgets as widgets
import pytest
import torch

from course_lab import i18n
from course_lab.lessons import l05_masking as l05
from course_utils import masks


@pytest.fixture(scope="module")
def widget():
    w = l05.build_mask_widget(t=6, n_pad=2, preset="causal")
    yield w
    w.close()


def _weights_shown(w) -> torch.Tensor:
    """The heatmap's data as drawn (right panel), not just the state dict."""
    return torch.as_tensor(w.figure.axes[1].images[0].get_array().data)


def test_initial_state_is_causal(widget):
    widget.apply_preset("causal")
    assert torch.equal(widget.state["mask"], masks.causal_mask(6))
    torch.testing.assert_close(widget.state["row_sums"], torch.ones(6))
    assert widget.state["masked_mass"] == 0.0 and widget.state["empty_rows"] == []
    torch.testing.assert_close(_weights_shown(widget), widget.state["weights"], check_dtype=False)
    assert widget.state["weights"][0, 0] == 1.0          # the first query sees only itself


def test_toggle_one_cell_changes_weights(widget):
    widget.apply_preset("causal")
    before, renders = widget.state["weights"].clone(), widget.renders
    widget.controls["cell_4_2"].value = False
    assert widget.renders == renders + 1
    after = widget.state["weights"]
    assert after[4, 2] == 0.0 and not torch.equal(before[4], after[4])
    torch.testing.assert_close(after[:4], before[:4])    # other rows untouched
    assert abs(float(after[4].sum()) - 1.0) < 1e-6       # the row renormalises
    assert widget.controls["preset"].value == "custom"
    assert widget.controls["cell_4_2"].description == "0"
    widget.controls["cell_4_2"].value = True              # back to exactly the causal mask
    assert widget.controls["preset"].value == "causal"
    torch.testing.assert_close(widget.state["weights"], before)


def test_fully_masked_row_gives_zeros_not_nan(widget):
    widget.apply_preset("none")
    widget.set(**{f"cell_3_{j}": False for j in range(6)})
    w = widget.state["weights"]
    assert widget.state["empty_rows"] == [3]
    assert (w[3] == 0).all() and torch.isfinite(w).all()
    torch.testing.assert_close(w.sum(-1), torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 1.0]))
    assert (_weights_shown(widget)[3] == 0).all()


@pytest.mark.parametrize("name", ["padding", "causal_padding", "none", "causal"])
def test_preset_control_sets_every_cell(widget, name):
    renders = widget.renders
    widget.controls["preset"].value = "custom"            # make sure the next value is a change
    widget.controls["preset"].value = name
    assert widget.renders == renders + 1                   # one render for 36 cells
    assert torch.equal(widget.state["mask"], l05.preset_mask(name, 6, 2))
    assert torch.equal(widget.mask(), widget.state["mask"])
    if name in ("padding", "causal_padding"):
        assert (widget.state["weights"][:, 4:] == 0).all()


def test_preset_masks():
    pad = l05.preset_mask("padding", 5, 1)
    assert pad[:, :4].all() and not pad[:, 4].any()
    assert torch.equal(l05.preset_mask("causal_padding", 5, 1), masks.causal_mask(5) & pad)
    with pytest.raises(ValueError, match="unknown preset"):
        l05.preset_mask("diagonal", 5)
    with pytest.raises(ValueError, match="n_pad"):
        l05.preset_mask("padding", 4, 4)
    with pytest.raises(ValueError, match="between 2 and 10"):
        l05.build_mask_widget(t=1)


def test_layout_and_language():
    i18n.set_language("zh")
    try:
        w = l05.build_mask_widget(t=3, n_pad=1, preset="padding")
        assert any(isinstance(c, widgets.GridBox) for c in w.ui.children)
        labels = [label for label, _ in w.controls["preset"].options]
        assert "因果掩码" in labels
        assert w.figure.axes[1].get_title() == "注意力权重"
        assert torch.equal(w.state["mask"], l05.preset_mask("padding", 3, 1))
        w.close()
    finally:
        i18n.set_language(None)


# --------------------------------------------------------------------------------------------- exercises

def _not_implemented(*args):
    raise NotImplementedError


def _solution_left_padded(ids, pad_id):
    t = ids.shape[1]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
    return ((ids != pad_id)[:, None, None, :] & causal) | torch.eye(t, dtype=torch.bool)


def test_check_left_padded_mask(capsys):
    assert l05.check_left_padded_mask(_solution_left_padded) is True
    assert l05.check_left_padded_mask(l05.checks._reference_left_padded_mask) is True
    capsys.readouterr()
    assert l05.check_left_padded_mask(lambda ids, p: ~_solution_left_padded(ids, p)) is False
    assert "inverted" in capsys.readouterr().out
    assert l05.check_left_padded_mask(lambda ids, p: masks.causal_mask(ids.shape[1]).expand(
        ids.shape[0], 1, -1, -1)) is False
    assert "causal mask alone" in capsys.readouterr().out
    assert l05.check_left_padded_mask(lambda ids, p: masks.combine_masks(
        masks.padding_mask(ids, p), masks.causal_mask(ids.shape[1]))) is False
    assert "sees no key" in capsys.readouterr().out
    assert l05.check_left_padded_mask(lambda ids, p: _solution_left_padded(ids, p)[:, 0]) is False   # (B, T, T)
    assert l05.check_left_padded_mask(lambda ids, p: _solution_left_padded(ids, p).int()) is False

    def per_sequence(ids, p):                             # vectorised inside, but a loop over the batch
        return torch.stack([_solution_left_padded(row[None], p)[0] for row in ids])

    assert l05.check_left_padded_mask(per_sequence) is False
    assert "Python loops" in capsys.readouterr().out
    assert l05.check_left_padded_mask(_not_implemented) is False
    assert "Not attempted" in capsys.readouterr().out
    assert l05.check_left_padded_mask(lambda ids, p: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_left_padding_breaks_the_causal_only_shortcut():
    """The lesson's claim: right padding is hidden by the causal mask for every real query, left padding is not."""
    right = torch.tensor([[4, 5, 6, 0, 0]])
    left = torch.tensor([[0, 0, 4, 5, 6]])
    causal = masks.causal_mask(5)
    both_right = masks.combine_masks(masks.padding_mask(right, 0), causal)[0, 0]
    both_left = masks.combine_masks(masks.padding_mask(left, 0), causal)[0, 0]
    assert torch.equal(both_right[:3], causal[:3])              # real queries: padding changes nothing
    assert not torch.equal(both_left[2:], causal[2:])           # real queries would read the pads
    assert (~both_left[:2].any(-1)).all()                       # two fully masked rows


def test_check_masked_softmax(capsys):
    assert l05.check_masked_softmax(l05.checks._reference_masked_softmax) is True

    def nan_rows(scores, keep):
        return torch.softmax(scores.masked_fill(~keep, float("-inf")), -1)

    def leaky(scores, keep):
        return torch.softmax(scores.masked_fill(~keep, -5.0), -1).masked_fill(~keep.any(-1, keepdim=True), 0)

    def unmasked(scores, keep):
        return torch.softmax(scores, -1)

    def nan_to_num(scores, keep):
        return nan_rows(scores, keep).nan_to_num(0.0)

    assert l05.check_masked_softmax(nan_rows) is False
    assert "NaN" in capsys.readouterr().out
    assert l05.check_masked_softmax(leaky) is False
    assert l05.check_masked_softmax(unmasked) is False
    assert l05.check_masked_softmax(nan_to_num) is True      # values right and gradients finite

    def minus_1e9(scores, keep):
        return torch.softmax(scores.masked_fill(~keep, -1e9), -1).masked_fill(~keep.any(-1, keepdim=True), 0)

    capsys.readouterr()
    assert l05.check_masked_softmax(minus_1e9) is False      # right in float32, raises in float16
    assert "float16" in capsys.readouterr().out
    assert l05.check_masked_softmax(lambda s, k: s.shape) is False
    capsys.readouterr()
    assert l05.check_masked_softmax(_not_implemented) is False
    assert "Not attempted" in capsys.readouterr().out


def test_check_sliding_window_mask():
    assert l05.check_sliding_window_mask(l05.checks._reference_sliding_window_mask) is True

    def off_by_one(t, window):
        i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
        return (j <= i) & (j >= i - window)

    assert l05.check_sliding_window_mask(off_by_one) is False
    assert l05.check_sliding_window_mask(lambda t, w: masks.causal_mask(t)) is False
    assert l05.check_sliding_window_mask(_not_implemented) is False

    def rows_in_a_loop(t, window):
        keep = torch.zeros(t, t, dtype=torch.bool)
        for i in range(t):
            keep[i, max(0, i - window + 1): i + 1] = True
        return keep

    assert l05.check_sliding_window_mask(rows_in_a_loop) is False
    assert l05.check_sliding_window_mask(
        lambda t, w: torch.tril(torch.ones(t, t, dtype=torch.bool)) & ~torch.tril(torch.ones(t, t, dtype=torch.bool),
                                                                                 diagonal=-w)) is True
    window = l05.checks._reference_sliding_window_mask(6, 3)
    assert window.sum(-1).tolist() == [1, 2, 3, 3, 3, 3]
    assert torch.equal(l05.checks._reference_sliding_window_mask(5, 10), masks.causal_mask(5))


def test_checks_speak_chinese(capsys):
    i18n.set_language("zh")
    try:
        assert l05.check_left_padded_mask(_not_implemented) is False
        assert "还没有作答" in capsys.readouterr().out
    finally:
        i18n.set_language(None)
