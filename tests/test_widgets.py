"""LessonWidget driven as a student would (setting control values), without a browser."""

import ipywidgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

from course_lab import i18n, viz
from course_lab.widgets import LessonWidget, dropdown, slider, toggle

X = np.linspace(0.0, 1.0, 32)


def sine_image(freq, flip=False):
    row = np.sin(2 * np.pi * freq * X)
    return np.tile(-row if flip else row, (4, 1))  # (4, 32)


def toy_render(freq, flip=False, cmap="viridis"):
    """Sine heatmap through pyplot, as a lesson might write it (the widget must not leak these figures)."""
    if freq > 8:
        raise ValueError("freq > 8 aliases on 32 samples: choose 8 or less")
    if freq == 7:
        raise RuntimeError("a bug in the lesson code")
    fig, ax = plt.subplots()
    ax.imshow(sine_image(freq, flip), cmap=cmap)
    return fig, {"freq": freq, "flip": flip, "peak_column": int(np.argmax(sine_image(freq, flip)[0]))}


@pytest.fixture(autouse=True)
def english_and_no_leaks():
    i18n.set_language("en")
    plt.close("all")
    yield
    i18n.set_language(None)
    assert plt.get_fignums() == [], "the widget left figures registered in pyplot"


def make_widget(**kwargs):
    controls = {"freq": slider("freq", 1, 10, 1, 2, label={"en": "Frequency", "zh": "频率"}),
                "flip": toggle("flip", label={"en": "Flip sign", "zh": "取反"}),
                "cmap": dropdown("cmap", [("Viridis", "viridis"), ({"en": "Grey", "zh": "灰度"}, "gray")])}
    return LessonWidget(controls, toy_render, **kwargs)


def image(w):
    return np.asarray(w.figure.axes[0].images[0].get_array())


def test_renders_once_at_construction():
    w = make_widget(title={"en": "Sine demo", "zh": "正弦演示"})
    assert w.renders == 1 and w.error is None
    assert w.state == {"freq": 2, "flip": False, "peak_column": int(np.argmax(sine_image(2)[0]))}
    np.testing.assert_allclose(image(w), sine_image(2))
    assert isinstance(w.ui, ipywidgets.VBox)
    assert w.ui.children[0].value == "<b>Sine demo</b>"
    assert all(c in w.ui.children for c in w.controls.values()) and w.output in w.ui.children


def test_changing_a_control_rerenders():
    w = make_widget()
    first_figure, first_image = w.figure, image(w).copy()
    w.controls["freq"].value = 5
    assert w.renders == 2 and w.state["freq"] == 5
    assert w.figure is not first_figure
    assert not np.allclose(image(w), first_image)
    np.testing.assert_allclose(image(w), sine_image(5))
    w.controls["flip"].value = True
    np.testing.assert_allclose(image(w), sine_image(5, flip=True))
    w.controls["cmap"].value = "gray"
    assert w.figure.axes[0].images[0].get_cmap().name == "gray" and w.renders == 4
    assert isinstance(w.figure.canvas, FigureCanvasAgg)  # still drawable after pyplot let go of it
    w.figure.canvas.draw()


def test_value_error_keeps_previous_figure_and_explains():
    w = make_widget()
    w.controls["freq"].value = 3
    figure, state = w.figure, dict(w.state)
    w.controls["freq"].value = 9
    assert w.error == "freq > 8 aliases on 32 samples: choose 8 or less"
    assert "choose 8 or less" in w.status.value and "Error" in w.status.value
    assert w.figure is figure and w.state == state and w.renders == 2
    w.controls["freq"].value = 4  # a valid value clears the message
    assert w.error is None and w.status.value == "" and w.state["freq"] == 4


def test_error_status_punctuation_follows_the_language():
    for lang, label in (("en", "⚠ Error: freq"), ("zh", "⚠ 错误：freq")):     # the fixture resets the language
        i18n.set_language(lang)
        w = make_widget()
        w.controls["freq"].value = 9
        assert label in w.status.value, w.status.value
        plt.close("all")


def test_error_message_is_html_escaped():
    def render(n):
        raise ValueError("<script>alert(1)</script> n must be < 3")
    w = LessonWidget({"n": slider("n", 0, 5, 1, 1)}, render)
    assert w.figure is None and w.renders == 0
    assert "<script>" not in w.status.value and "&lt;script&gt;" in w.status.value


def test_other_exceptions_are_bugs_and_propagate():
    w = make_widget()
    with pytest.raises(RuntimeError, match="bug in the lesson"):
        w.controls["freq"].value = 7
    with pytest.raises(TypeError, match=r"return fig, \{"):
        LessonWidget({"n": slider("n", 0, 5, 1, 1)}, lambda n: plt.figure())


def test_no_figure_leak_over_many_changes():
    w = make_widget()
    for freq in [1, 2, 3, 4, 5, 6, 8, 9, 1, 2, 3]:  # includes an error (9): its partial figures go too
        w.controls["freq"].value = freq
        assert plt.get_fignums() == []
    assert w.renders == 11


def test_set_renders_once():
    w = make_widget()
    state = w.set(freq=6, flip=True)
    assert w.renders == 2 and state == w.state and state["flip"] is True
    np.testing.assert_allclose(image(w), sine_image(6, flip=True))
    with pytest.raises(ValueError, match="unknown control"):
        w.set(phase=1)


def test_close_stops_rendering():
    w = make_widget()
    w.close()
    w.controls["freq"].value = 3
    assert w.renders == 1


def test_works_with_a_viz_function():
    def render(temperature):
        logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 1.0, 2.0]])
        weights = torch.softmax(logits / temperature, dim=-1)
        return viz.plot_attention(weights), {"max_weight": weights.max().item()}

    w = LessonWidget({"temperature": slider("temperature", 0.25, 4.0, 0.25, 1.0)}, render)
    sharp = w.state["max_weight"]
    w.controls["temperature"].value = 4.0
    assert w.state["max_weight"] < sharp
    np.testing.assert_allclose(image(w).sum(axis=1), [1.0, 1.0], rtol=1e-6)


def test_constructor_checks():
    with pytest.raises(ValueError, match="non-empty dict"):
        LessonWidget({}, toy_render)
    with pytest.raises(TypeError, match="not an ipywidgets value widget"):
        LessonWidget({"freq": ipywidgets.Button()}, toy_render)
    with pytest.raises(TypeError, match="render must be a function"):
        LessonWidget({"freq": slider("freq", 1, 3, 1, 2)}, "render")


def test_slider_helper():
    s = slider("freq", 1, 10, 1, 2)
    assert isinstance(s, ipywidgets.IntSlider) and s.description == "freq" and s.continuous_update is False
    f = slider("temp", 0.0, 2.0, 0.25, 1.0, label={"en": "Temperature", "zh": "温度"}, lang="zh")
    assert isinstance(f, ipywidgets.FloatSlider) and f.description == "温度" and f.readout_format == ".2f"
    with pytest.raises(ValueError, match="min=5 must be smaller than max=1"):
        slider("x", 5, 1, 1, 3)
    with pytest.raises(ValueError, match="outside"):
        slider("x", 0, 1, 0.1, 2)
    with pytest.raises(ValueError, match="step"):
        slider("x", 0, 1, 0, 0)
    with pytest.raises(TypeError, match="must be a number"):
        slider("x", 0, 1, 1, True)


def test_toggle_and_dropdown_helpers():
    t = toggle("causal", True, label={"en": "Causal mask", "zh": "因果掩码"}, lang="zh")
    assert isinstance(t, ipywidgets.Checkbox) and t.value is True and t.description == "因果掩码"
    d = dropdown("mode", {"greedy": "g", "beam": "b"}, value="b")
    assert d.value == "b" and d.label == "beam"
    d = dropdown("mode", ["sum", ({"en": "Mean", "zh": "平均"}, "mean")], lang="zh")
    assert d.value == "sum" and [label for label, _ in d.options] == ["sum", "平均"]
    with pytest.raises(ValueError, match="not one of the options"):
        dropdown("mode", ["a", "b"], value="c")
    with pytest.raises(TypeError):
        toggle("x", 1)
