"""Plots return real figures with the data and labels asked for; Chinese text really renders."""

import subprocess
import sys
import warnings

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib import font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from course_lab import fonts, i18n, viz


@pytest.fixture(autouse=True)
def isolated(monkeypatch):
    """English unless a test says otherwise; rcParams (fonts) restored; no figure left in pyplot."""
    monkeypatch.delenv("COURSE_LANG", raising=False)
    i18n.set_language("en")
    with matplotlib.rc_context():
        yield
    i18n.set_language(None)
    assert plt.get_fignums() == [], "a plot function left a figure registered in pyplot (leak)"


def _softmax_weights(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(*shape, generator=g), dim=-1)


def test_import_is_light():
    code = "import sys, course_lab.viz; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_positional_encoding_heatmap():
    pe = torch.linspace(-1, 1, 20 * 8).reshape(1, 20, 8).requires_grad_()  # (1, T, C) with grad: detached
    fig = viz.plot_positional_encoding(pe)
    heat = fig.axes[0]
    assert len(fig.axes) == 2 and len(heat.images) == 1  # heatmap + colorbar
    np.testing.assert_allclose(heat.images[0].get_array(), pe[0].detach().numpy(), rtol=1e-6)
    assert (heat.get_xlabel(), heat.get_ylabel()) == ("Dimension", "Position")
    zh = viz.plot_positional_encoding(pe[0].detach().numpy(), lang="zh")
    assert (zh.axes[0].get_xlabel(), zh.axes[0].get_ylabel()) == ("维度", "位置")


def test_positional_encoding_on_given_axes():
    fig, (a, b) = plt.subplots(1, 2)
    try:
        out = viz.plot_positional_encoding(np.zeros((5, 4)), ax=b)
        assert out is fig and len(b.images) == 1 and len(a.images) == 0
        assert len(fig.axes) == 2  # no colorbar squeezed into the caller's layout
    finally:
        plt.close(fig)


def test_positional_encoding_rejects_a_batch():
    with pytest.raises(ValueError, match=r"shape \(2, 5, 4\).*pe\[0\]"):
        viz.plot_positional_encoding(np.zeros((2, 5, 4)))


def test_attention_single_head():
    w = _softmax_weights(1, 1, 4, 5)
    fig = viz.plot_attention(w, queries=list("abcd"), keys=["the", "cat", "sat", "on", "mat"], title="T")
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), w[0, 0].numpy(), rtol=1e-6)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["the", "cat", "sat", "on", "mat"]
    assert [t.get_text() for t in ax.get_yticklabels()] == list("abcd")
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("Key", "Query", "T")
    with pytest.raises(ValueError, match="3 key tokens for 5 key positions"):
        viz.plot_attention(w, keys=["a", "b", "c"])
    with pytest.raises(ValueError, match="one head"):
        viz.plot_attention(_softmax_weights(2, 4, 4))


def test_attention_grid_layers_by_heads():
    layers = [_softmax_weights(2, 4, 5, 5, seed=s) for s in range(3)]  # batch of 2: item 0 is plotted
    fig = viz.plot_attention_grid(layers, tokens_q=list("abcde"), tokens_k=list("abcde"))
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert len(heatmaps) == 3 * 4 and len(fig.axes) == 3 * 4 + 1  # + one shared colorbar
    for i, ax in enumerate(heatmaps):
        np.testing.assert_allclose(ax.images[0].get_array(), layers[i // 4][0, i % 4].numpy(), rtol=1e-6)
    assert heatmaps[0].get_title() == "Head 1" and heatmaps[3].get_title() == "Head 4"
    assert heatmaps[4].get_ylabel().startswith("Layer 2")
    # One colour scale for every panel, so that heads can be compared.
    assert len({ax.images[0].get_clim() for ax in heatmaps}) == 1


def test_attention_grid_uneven_heads_dict_and_modules():
    class Recorded:  # what record_attention yields: modules with .last_weights
        def __init__(self, w):
            self.last_weights = w

    grid = {"enc": _softmax_weights(1, 4, 3, 3), "dec-cross": Recorded(_softmax_weights(1, 2, 2, 3))}
    fig = viz.plot_attention_grid(grid, tokens_k=["我", "爱", "猫"], lang="zh")
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert len(heatmaps) == 6 and len(fig.axes) == 7  # the 2 missing heads leave no empty axes behind
    assert heatmaps[0].get_title() == "注意力头 1"
    assert heatmaps[4].get_ylabel() == "dec-cross\n查询"
    with pytest.raises(ValueError, match="record_attention"):
        viz.plot_attention_grid([Recorded(None)])
    with pytest.raises(ValueError, match="empty"):
        viz.plot_attention_grid([])


def test_history_with_validation_and_lr():
    class History:
        def to_dict(self):
            return {"step": [1, 2, 3, 4], "loss": [3.0, 2.0, 1.5, 1.2],
                    "val_loss": [None, 2.2, float("nan"), 1.6], "lr": [1e-4, 2e-4, 3e-4, 2e-4]}

    fig = viz.plot_history(History())
    ax, ax_lr = fig.axes
    train, val = ax.get_lines()
    np.testing.assert_allclose(train.get_xydata(), [[1, 3.0], [2, 2.0], [3, 1.5], [4, 1.2]])
    np.testing.assert_allclose(val.get_xydata(), [[2, 2.2], [4, 1.6]])  # None / NaN = not measured
    np.testing.assert_allclose(ax_lr.get_lines()[0].get_ydata(), [1e-4, 2e-4, 3e-4, 2e-4])
    assert (ax.get_xlabel(), ax.get_ylabel(), ax_lr.get_ylabel()) == ("Step", "Loss", "Learning rate")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["Training loss", "Validation loss", "Learning rate"]


def test_history_minimal_and_errors():
    fig = viz.plot_history({"loss": [2.0, 1.0]}, lang="zh")
    assert len(fig.axes) == 1 and fig.axes[0].get_ylabel() == "损失"
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_xdata(), [1, 2])
    fig = viz.plot_history({"step": [10, 20, 30], "loss": [3, 2, 1], "val_step": [30], "val_loss": [1.5]})
    np.testing.assert_allclose(fig.axes[0].get_lines()[1].get_xydata(), [[30, 1.5]])
    with pytest.raises(ValueError, match="val_step"):
        viz.plot_history({"step": [1, 2, 3], "loss": [3, 2, 1], "val_loss": [1.5]})
    with pytest.raises(ValueError, match="expected 'loss'"):
        viz.plot_history({"step": [1]})
    with pytest.raises(TypeError, match="to_dict"):
        viz.plot_history([1.0, 2.0])


def test_histograms():
    g = torch.Generator().manual_seed(0)
    before, after = 3 * torch.randn(500, generator=g) + 2, torch.randn(500, generator=g)
    fig = viz.plot_histograms(before, after, [{"en": "raw", "zh": "原始"}, "LayerNorm"], lang="zh", bins=20)
    assert len(fig.axes) == 2
    assert all(len(ax.patches) == 20 for ax in fig.axes)
    assert sum(p.get_height() for p in fig.axes[0].patches) == 500
    assert fig.axes[0].get_title().startswith("原始\n均值 = ")
    assert f"{before.mean().item():.3g}" in fig.axes[0].get_title()
    assert fig.axes[1].get_xlabel() == "元素值"
    default = viz.plot_histograms(before, after)
    assert default.axes[0].get_title().startswith("Before")


# --- Chinese fonts ---------------------------------------------------------------------------------------

def _draw_raising_on_missing_glyphs(fig):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*Glyph.*missing")
        fig.canvas.draw()


def test_chinese_labels_render_with_an_installed_font():
    # Fails on a machine without any CJK font (setup_fonts returns None and the glyphs would be missing).
    name = viz.setup_fonts("zh")
    assert name is not None, "no CJK font installed: apt-get install fonts-wqy-microhei (or fonts-noto-cjk)"
    assert matplotlib.rcParams["font.sans-serif"][0] == name
    assert matplotlib.rcParams["axes.unicode_minus"] is False
    fig = viz.plot_attention(_softmax_weights(3, 3), ["我", "爱", "你"], ["我", "爱", "你"], lang="zh")
    _draw_raising_on_missing_glyphs(fig)
    label = fig.axes[0].xaxis.label
    assert label.get_text() == "键"
    used = font_manager.findfont(label.get_fontproperties(), fallback_to_default=False)
    assert fonts._covers_cjk(used)


def test_the_glyph_check_can_fail():
    # Control for the test above: with only DejaVu Sans, drawing Chinese does warn about missing glyphs.
    matplotlib.rcParams["font.sans-serif"] = ["DejaVu Sans"]
    fig = Figure()
    FigureCanvasAgg(fig)
    fig.text(0.5, 0.5, "注意力")
    with pytest.raises(UserWarning, match="Glyph"):
        _draw_raising_on_missing_glyphs(fig)


def test_returned_figures_really_draw():
    # pyplot swaps a closed figure's canvas for one whose draw() does nothing; ours must still render.
    fig = viz.plot_attention(_softmax_weights(3, 3))
    assert isinstance(fig.canvas, FigureCanvasAgg)
    fig.canvas.draw()
    assert np.asarray(fig.canvas.buffer_rgba()).std() > 0  # something was painted


def test_chinese_tokens_in_an_english_notebook_get_a_font():
    fig = viz.plot_attention(_softmax_weights(2, 2), ["北京", "欢迎"], ["北京", "欢迎"], lang="en")
    assert fig.axes[0].get_xlabel() == "Key"
    _draw_raising_on_missing_glyphs(fig)


def test_english_leaves_fonts_alone():
    before = list(matplotlib.rcParams["font.sans-serif"])
    assert viz.setup_fonts("en") is None
    assert matplotlib.rcParams["font.sans-serif"] == before


def test_missing_font_warns_once_with_instructions(monkeypatch):
    monkeypatch.setattr(font_manager.fontManager, "ttflist", [])
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda *a, **k: [])  # nothing installed at all
    monkeypatch.setattr(fonts, "_warned_missing_font", False)
    before = list(matplotlib.rcParams["font.sans-serif"])
    with pytest.warns(viz.CJKFontWarning) as record:
        assert viz.setup_fonts("zh") is None
    message = str(record[0].message)
    for hint in ("apt-get install fonts-noto-cjk", "fonts-wqy-microhei", "PingFang SC", "Microsoft YaHei",
                 "conda-forge", matplotlib.get_cachedir()):
        assert hint in message
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        assert viz.setup_fonts("zh") is None
    assert not [w for w in again if issubclass(w.category, viz.CJKFontWarning)]
    assert matplotlib.rcParams["font.sans-serif"] == before


def test_font_name_alone_is_not_trusted(monkeypatch):
    # A font registered as "SimHei" but without Chinese glyphs (here: DejaVu's file) must not be chosen.
    dejavu = [f for f in font_manager.fontManager.ttflist if f.name == "DejaVu Sans"][0]
    fake = font_manager.FontEntry(fname=dejavu.fname, name="SimHei")
    monkeypatch.setattr(font_manager.fontManager, "ttflist", [dejavu, fake])
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda *a, **k: [dejavu.fname])  # no rescue by rescanning
    assert viz.find_cjk_font() is None
