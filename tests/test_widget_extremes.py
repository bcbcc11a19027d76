"""Every lesson widget survives its controls' extremes: a finite figure or a clear message, never a crash or NaN.

Builders are discovered in ``course_lab.lessons`` (functions named ``build_*`` that return an object with
``controls``), so a new lesson's widget is covered without editing this file.
"""

import importlib
import inspect
import math
import pkgutil

import numpy as np
import pytest

import course_lab.lessons as lessons_pkg


def _builders():
    found = []
    for info in pkgutil.iter_modules(lessons_pkg.__path__):
        module = importlib.import_module(f"course_lab.lessons.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            own = fn.__module__ == module.__name__ or fn.__module__.startswith(module.__name__ + ".")
            if not own or not name.startswith("build_"):
                continue
            params = inspect.signature(fn).parameters.values()
            if all(p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                   for p in params) and ("widget" in name or "explorer" in name):
                found.append(pytest.param(fn, id=f"{info.name}.{name}"))
    return found


BUILDERS = _builders()


def test_there_are_widgets_to_check():
    assert len(BUILDERS) >= 9, [p.id for p in BUILDERS]


def _numbers(fig):
    """All numeric data drawn in a figure: images, lines, bars, meshes and scatter offsets."""
    for ax in fig.axes:
        for im in ax.images:
            yield np.ma.filled(np.ma.asarray(im.get_array(), dtype=float), 0.0)
        for line in ax.lines:
            yield np.asarray(line.get_ydata(), dtype=float)
        for patch in ax.patches:
            if hasattr(patch, "get_height"):
                yield np.asarray([patch.get_height()], dtype=float)
        for coll in ax.collections:
            arr = coll.get_array()
            if arr is not None:
                yield np.ma.filled(np.ma.asarray(arr, dtype=float), 0.0)


def _assert_sane(w, what):
    error = getattr(w, "error", None)
    if error:                                  # a clear message shown instead of a figure is allowed
        assert isinstance(error, str) and len(error) > 10, what
        return
    fig = getattr(w, "figure", None)
    if fig is not None:
        for arr in _numbers(fig):
            assert np.isfinite(arr).all(), f"{what}: non-finite data in the figure"
    for key, value in (getattr(w, "state", None) or {}).items():
        if isinstance(value, float):
            assert math.isfinite(value) or math.isinf(value), f"{what}: state[{key!r}] is NaN"


def _extremes(control):
    if hasattr(control, "min") and hasattr(control, "max"):
        return [control.min, control.max, control.value]
    options = getattr(control, "options", None)
    if options:
        values = [o[1] if isinstance(o, tuple) else o for o in options]
        return values[:1] + values[-1:]
    if isinstance(getattr(control, "value", None), bool):
        return [not control.value, control.value]
    return []


@pytest.mark.parametrize("build", BUILDERS)
def test_widget_controls_at_their_extremes(build):
    import matplotlib.pyplot as plt

    w = build()
    controls = getattr(w, "controls", None)
    assert controls, f"{build.__name__} returned no controls"
    items = controls.items() if isinstance(controls, dict) else enumerate(controls)
    for name, control in items:
        for value in _extremes(control):
            control.value = value
            _assert_sane(w, f"{build.__name__}: {name}={value!r}")
    plt.close("all")
