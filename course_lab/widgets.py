"""A small base for the lessons' interactive demos, testable without a browser.

A demo is *named controls* plus a *render function*::

    def render(freq):
        if freq == 0:
            raise ValueError(pick({"en": "choose a frequency > 0", "zh": "请选择大于 0 的频率"}))
        fig = ...                      # a matplotlib Figure
        return fig, {"period": 1 / freq}

    w = LessonWidget({"freq": slider("freq", 1, 10, 1, 2, label={"en": "Frequency", "zh": "频率"})}, render)
    w                                  # in a notebook: the controls and the figure

Every change of a control calls ``render(**values)`` again. Tests (and nbval) drive the demo exactly as a
student does: ``w.controls["freq"].value = 5``, then read ``w.state`` and ``w.figure`` (a real Figure whose
data can be inspected, e.g. ``w.figure.axes[0].images[0].get_array()``).
"""

from __future__ import annotations

import html
import sys
from collections.abc import Callable, Mapping
from decimal import Decimal
from numbers import Real

import ipywidgets as widgets
from IPython import get_ipython
from IPython.display import display
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from . import i18n

# Chinese descriptions are wider than ipywidgets' fixed default label column: let each label take its width.
_STYLE = {"description_width": "initial"}


def _pyplot():
    """pyplot if something already imported it (only then can there be pyplot figures to close)."""
    return sys.modules.get("matplotlib.pyplot")


def _fignums() -> set[int]:
    plt = _pyplot()
    return set(plt.get_fignums()) if plt else set()


def _release_new_figures(before: set[int]) -> None:
    """Drop from pyplot the figures a render created: the widget keeps its own reference to the one it shows.

    Without this every slider move would leave a figure in pyplot's registry (a leak), and Jupyter's inline
    backend would display them all again below the cell.
    """
    plt = _pyplot()
    if plt:
        for num in set(plt.get_fignums()) - before:
            plt.close(num)


def _check_result(result):
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError(f"render must return (figure, state_dict), got {type(result).__name__}: "
                        "end the render function with `return fig, {...}`")
    fig, state = result
    if not isinstance(fig, Figure):
        raise TypeError(f"render returned {type(fig).__name__} as the figure: return a matplotlib Figure "
                        "(e.g. from plt.subplots() or a course_lab.viz function)")
    if not isinstance(state, Mapping):
        raise TypeError(f"render returned {type(state).__name__} as the state: return a dict (may be empty)")
    return fig, dict(state)


class LessonWidget:
    """Controls + render function + an output area; renders once at construction and after every change.

    Attributes: ``controls`` (name → widget), ``figure`` and ``state`` (from the last successful render),
    ``renders`` (number of successful renders), ``error`` (message of the last ValueError, or None), ``ui``
    (the VBox to display), ``status`` (HTML widget showing the error) and ``output`` (shows the figure).

    ``render`` raising ValueError means "this combination of settings is impossible": the message is shown
    under the controls, the previous figure and state stay. Any other exception is a bug and propagates (in a
    live notebook its traceback appears in the output area).
    """

    def __init__(self, controls: Mapping[str, widgets.ValueWidget], render: Callable[..., tuple],
                 title: str | dict | None = None):
        if not isinstance(controls, Mapping) or not controls:
            raise ValueError("controls must be a non-empty dict {name: widget}, e.g. "
                             "{'freq': slider('freq', 1, 10, 1, 2)}")
        for name, control in controls.items():
            if not isinstance(control, widgets.ValueWidget):
                raise TypeError(f"control {name!r} is a {type(control).__name__}, not an ipywidgets value "
                                "widget: use slider(), toggle(), dropdown() or another ipywidgets control")
        if not callable(render):
            raise TypeError(f"render must be a function, got {type(render).__name__}")
        self.controls = dict(controls)
        self.render_function = render
        self.figure = None
        self.state: dict = {}
        self.renders = 0
        self.error: str | None = None
        self._holding = False
        self.status = widgets.HTML()
        self.output = widgets.Output()
        header = []
        if title is not None:
            text = i18n.pick(title) if isinstance(title, dict) else str(title)
            header = [widgets.HTML(f"<b>{html.escape(text)}</b>")]
        self.ui = widgets.VBox(header + list(self.controls.values()) + [self.status, self.output])
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.update()

    @property
    def values(self) -> dict:
        """The current value of every control, as passed to ``render``."""
        return {name: control.value for name, control in self.controls.items()}

    def _on_change(self, change) -> None:
        if self._holding:
            return
        # Inside a kernel the Output context turns a bug's traceback into output under the controls (otherwise
        # it would only reach the browser's log); outside a kernel the exception propagates to the caller.
        with self.output:
            self.update()

    def set(self, **values) -> dict:
        """Set several controls and render once (not once per control); returns the new state."""
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise ValueError(f"unknown control(s) {unknown}; this widget has {sorted(self.controls)}")
        self._holding = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._holding = False
        return self.update()

    def update(self) -> dict:
        """Render with the current values and show the result; returns ``self.state``."""
        before = _fignums()
        try:
            result = self.render_function(**self.values)
        except ValueError as err:  # an impossible setting: explain it, keep the last good figure
            self.error = str(err)
            colon = i18n.pick({"en": ": ", "zh": "："})
            self.status.value = (f'<span style="color:#b00020">⚠ {html.escape(i18n.tr("error"))}{colon}'
                                 f"{html.escape(self.error)}</span>")
            return self.state
        finally:
            _release_new_figures(before)
        fig, state = _check_result(result)
        if type(fig.canvas) is FigureCanvasBase:  # pyplot.close() left a canvas whose draw() does nothing
            FigureCanvasAgg(fig)
        self.figure, self.state = fig, state
        self.renders += 1
        self.error = None
        self.status.value = ""
        if get_ipython() is not None:  # a plain Python script or pytest has nowhere to show it
            self.output.clear_output(wait=True)  # wait: no flicker, the old image stays until the new one
            with self.output:
                display(fig)
        return self.state

    def close(self) -> None:
        """Stop observing the controls and close the widgets (the figure is left to the garbage collector)."""
        for control in self.controls.values():
            control.unobserve(self._on_change, names="value")
        self.ui.close()

    def _ipython_display_(self):
        display(self.ui)


def _description(name: str, label, lang) -> str:
    if label is None:
        return name
    return i18n.pick(label, lang) if isinstance(label, dict) else str(label)


def _decimals(*numbers: Real) -> int:
    """Decimals (1 to 6) the readout needs to show every reachable value exactly: 0.25 → 2, 0.1 → 1."""
    needed = [-Decimal(repr(float(x))).normalize().as_tuple().exponent for x in numbers]
    return min(6, max(1, *needed))  # (the builtins: slider's parameters shadow them only inside slider)


def slider(name: str, min: Real, max: Real, step: Real, value: Real, label: str | dict | None = None, *,
           lang: str | None = None, continuous_update: bool = False):
    """An IntSlider (all four numbers ints) or a FloatSlider, described by ``label`` (``{"en":..,"zh":..}``).

    ``name`` is the keyword the render function receives, and the description when there is no label.
    ``continuous_update=False`` renders when the slider is released: matplotlib is too slow to follow a drag.
    """
    numbers = {"min": min, "max": max, "step": step, "value": value}
    for key, x in numbers.items():
        if isinstance(x, bool) or not isinstance(x, Real):
            raise TypeError(f"slider {name!r}: {key} must be a number, got {x!r}")
    if not min < max:
        raise ValueError(f"slider {name!r}: min={min} must be smaller than max={max}")
    if step <= 0 or step > max - min:
        raise ValueError(f"slider {name!r}: step={step} must be > 0 and at most max - min = {max - min}")
    if not min <= value <= max:
        raise ValueError(f"slider {name!r}: value={value} is outside [{min}, {max}]: choose a start inside")
    kwargs = dict(value=value, min=min, max=max, step=step, description=_description(name, label, lang),
                  style=_STYLE, continuous_update=continuous_update)
    if all(isinstance(x, int) for x in numbers.values()):
        return widgets.IntSlider(**kwargs)
    return widgets.FloatSlider(readout_format=f".{_decimals(min, step, value)}f", **kwargs)


def toggle(name: str, value: bool = False, label: str | dict | None = None, *, lang: str | None = None):
    """A checkbox for an on/off option (e.g. "use the causal mask")."""
    if not isinstance(value, bool):
        raise TypeError(f"toggle {name!r}: value must be True or False, got {value!r}")
    return widgets.Checkbox(value=value, description=_description(name, label, lang), indent=False,
                            style=_STYLE)


def dropdown(name: str, options, value=None, label: str | dict | None = None, *, lang: str | None = None):
    """A dropdown. ``options``: a list of values, of ``(label, value)`` pairs, or a dict ``{label: value}``;
    labels may be bilingual dicts. ``value`` defaults to the first option.
    """
    pairs = list(options.items()) if isinstance(options, Mapping) else [
        o if isinstance(o, tuple) and len(o) == 2 else (str(o), o) for o in options]
    if not pairs:
        raise ValueError(f"dropdown {name!r} needs at least one option")
    pairs = [(i18n.pick(lbl, lang) if isinstance(lbl, dict) else str(lbl), v) for lbl, v in pairs]
    choices = [v for _, v in pairs]
    if value is None:
        value = choices[0]
    elif value not in choices:
        raise ValueError(f"dropdown {name!r}: value={value!r} is not one of the options {choices}")
    return widgets.Dropdown(options=pairs, value=value, description=_description(name, label, lang),
                            style=_STYLE)
