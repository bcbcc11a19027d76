"""Plots used by the lessons, with labels in the notebook's language and a working Chinese font.

Every ``plot_*`` function accepts tensors (any device, with or without grad) or arrays, labels its axes
through :func:`course_lab.i18n.tr` and *returns* the Figure without showing it: the notebook displays the
returned value, tests read its data. Figures are created with pyplot (so that Jupyter's inline display is set
up) and at once released from pyplot's registry: they are displayed once (not again at the end of the cell)
and never leak.

Importing this module imports nothing heavy: matplotlib is loaded by the first plot. The Chinese font is found by
:mod:`course_lab.fonts`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

# The Chinese-font logic lives in fonts.py; lessons call it through viz (viz.setup_fonts(), viz.use_language()).
from . import i18n
from .fonts import CJK_FONT_PREFERENCE, CJKFontWarning, find_cjk_font, setup_fonts, use_language  # noqa: F401


def show_token(token: str) -> str:
    """A visible label for a token on an axis: a space becomes ``' '``, a newline ``↵``, a tab ``⇥``."""
    return {" ": "' '", "\n": "↵", "\t": "⇥"}.get(token, token)


def new_figure(figsize):
    """A constrained-layout Figure that pyplot does not keep: the caller returns it and Jupyter shows it once."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = plt.figure(figsize=figsize, layout="constrained")
    # Drop it from pyplot's registry: the caller owns it, Jupyter shows it once (the returned value), no leak.
    plt.close(fig)
    # Closing leaves a canvas whose draw() does nothing: an Agg canvas keeps fig.canvas.draw() real.
    FigureCanvasAgg(fig)
    return fig


_new_figure = new_figure  # its name before it was public; lesson modules written meanwhile may still use it


def to_numpy(x, name: str = "array") -> np.ndarray:
    """A float numpy copy of a tensor (detached, on CPU) or of anything array-like."""
    if hasattr(x, "detach"):
        x = x.detach().to("cpu").float().numpy()
    arr = np.asarray(x, dtype=float)
    if arr.size == 0:
        raise ValueError(f"{name} is empty: pass at least one value")
    return arr


def _squeeze_to(arr: np.ndarray, ndim: int, name: str, expected: str) -> np.ndarray:
    """Drop leading size-1 dimensions (a batch of one) until ``arr`` has ``ndim`` dimensions."""
    while arr.ndim > ndim and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != ndim:
        raise ValueError(f"{name} has shape {tuple(arr.shape)}, expected {expected}: select one item first, "
                         f"e.g. {name}[0]")
    return arr


def _check_tokens(tokens, length: int, what: str):
    if tokens is None:
        return None
    tokens = [str(t) for t in tokens]
    if len(tokens) != length:
        raise ValueError(f"{len(tokens)} {what} tokens for {length} {what} positions: "
                         "pass one token per position")
    return tokens


def plot_positional_encoding(pe, ax=None, lang=None, title=None):
    """Heatmap of a positional-encoding table ``(T, C)`` or ``(1, T, C)``: positions down, dimensions across.

    With ``ax`` it draws there (without a colorbar: the caller owns that layout) and returns ``ax``'s figure.
    """
    table = _squeeze_to(to_numpy(pe, "pe"), 2, "pe", "(positions, dimensions)")
    code = use_language(lang)
    own_figure = ax is None
    if own_figure:
        fig = new_figure((7, 4))
        ax = fig.add_subplot()
    fig = ax.figure
    vmax = float(np.abs(table).max()) or 1.0  # symmetric colour scale: 0 is white, sign is colour
    im = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
    ax.set_xlabel(i18n.tr("dimension", code))
    ax.set_ylabel(i18n.tr("position", code))
    ax.set_title(title if title is not None else i18n.tr("positional_encoding", code))
    if own_figure:
        fig.colorbar(im, ax=ax)
    return fig


def _label_heatmap(ax, tokens_q, tokens_k, show_q=True, show_k=True):
    if tokens_q is not None and show_q:
        ax.set_yticks(range(len(tokens_q)), labels=tokens_q)
    elif not show_q:
        ax.set_yticklabels([])
    if tokens_k is not None and show_k:
        ax.set_xticks(range(len(tokens_k)), labels=tokens_k, rotation=90)
    elif not show_k:
        ax.set_xticklabels([])


def plot_attention(weights, queries=None, keys=None, ax=None, title=None, lang=None):
    """Heatmap of one head's attention weights ``(T_q, T_k)`` (or ``(1, 1, T_q, T_k)``); rows are queries."""
    w = _squeeze_to(to_numpy(weights, "weights"), 2, "weights", "(T_q, T_k) for one head")
    queries = _check_tokens(queries, w.shape[0], "query")
    keys = _check_tokens(keys, w.shape[1], "key")
    code = use_language(lang, queries, keys, [title] if title else None)
    own_figure = ax is None
    if own_figure:
        # Room for one token label per cell, within what a notebook page can show.
        fig = new_figure((min(12.0, max(4.0, 1.5 + 0.35 * w.shape[1])),
                           min(10.0, max(3.0, 1.2 + 0.35 * w.shape[0]))))
        ax = fig.add_subplot()
    fig = ax.figure
    im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=float(w.max()) or 1.0, interpolation="nearest")
    _label_heatmap(ax, queries, keys)
    ax.set_xlabel(i18n.tr("key", code))
    ax.set_ylabel(i18n.tr("query", code))
    ax.set_title(title if title is not None else i18n.tr("attention_weights", code))
    if own_figure:  # never add a colorbar to someone else's layout
        fig.colorbar(im, ax=ax)
    return fig


def _per_head(item, index: int) -> np.ndarray:
    """(h, T_q, T_k) from a (B, h, T_q, T_k) or (h, T_q, T_k) tensor, or from an attention module."""
    if hasattr(item, "last_weights"):  # a MultiHeadAttention from attention.record_attention(model)
        item = item.last_weights
        if item is None:
            raise ValueError(f"attention module {index} recorded no weights: run the model inside "
                             "`with record_attention(model):` (or with need_weights=True) before plotting")
    arr = to_numpy(item, f"weights_per_layer[{index}]")
    if arr.ndim == 4:
        arr = arr[0]  # first item of the batch
    elif arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3:
        raise ValueError(f"weights_per_layer[{index}] has shape {arr.shape}; expected (B, h, T_q, T_k)")
    return arr


def plot_attention_grid(weights_per_layer, tokens_q=None, tokens_k=None, lang=None):
    """Grid of attention heatmaps: one row per layer (attention module), one column per head; batch item 0.

    ``weights_per_layer``: a list of ``(B, h, T_q, T_k)`` tensors (or of the modules that
    ``record_attention`` yields), or a dict ``{row name: tensor}``. Token labels are drawn on the rows/columns
    whose length matches them, so a grid that mixes self- and cross-attention still works.
    """
    if isinstance(weights_per_layer, Mapping):
        names = [str(k) for k in weights_per_layer]
        items = list(weights_per_layer.values())
    elif isinstance(weights_per_layer, Sequence) and not isinstance(weights_per_layer, str):
        items, names = list(weights_per_layer), None
    else:
        items, names = [weights_per_layer], None
    if not items:
        raise ValueError("weights_per_layer is empty: pass one (B, h, T_q, T_k) tensor per attention layer")
    tokens_q = None if tokens_q is None else [str(t) for t in tokens_q]
    tokens_k = None if tokens_k is None else [str(t) for t in tokens_k]
    code = use_language(lang, tokens_q, tokens_k)
    grids = [_per_head(item, i) for i, item in enumerate(items)]
    if names is None:
        names = [i18n.tr("layer_n", code, n=i + 1) for i in range(len(grids))]
    rows, cols = len(grids), max(g.shape[0] for g in grids)
    vmax = max(float(g.max()) for g in grids) or 1.0  # one colour scale so that panels compare
    panel = min(2.3, 14.0 / cols, 12.0 / rows)  # inches per heatmap: big grids shrink to fit a page
    fig = new_figure((1.0 + panel * cols, 0.6 + panel * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    im = None
    for r, grid in enumerate(grids):
        tq = tokens_q if tokens_q is not None and len(tokens_q) == grid.shape[1] else None
        tk = tokens_k if tokens_k is not None and len(tokens_k) == grid.shape[2] else None
        for c in range(cols):
            ax = axes[r, c]
            if c >= grid.shape[0]:  # this layer has fewer heads than the widest one
                ax.remove()
                continue
            # Key labels go on the lowest panel of each column (later rows may have fewer heads).
            bottom = all(c >= g.shape[0] for g in grids[r + 1:])
            im = ax.imshow(grid[c], cmap="viridis", vmin=0.0, vmax=vmax, interpolation="nearest")
            _label_heatmap(ax, tq, tk, show_q=c == 0, show_k=bottom)
            if r == 0:
                ax.set_title(i18n.tr("head_n", code, n=c + 1))
            if c == 0:
                ax.set_ylabel(f"{names[r]}\n{i18n.tr('query', code)}")
            if bottom:
                ax.set_xlabel(i18n.tr("key", code))
    fig.colorbar(im, ax=list(fig.axes), shrink=0.8, label=i18n.tr("attention_weights", code))
    return fig


def _as_history_dict(history) -> dict:
    if hasattr(history, "to_dict"):
        history = history.to_dict()
    if not isinstance(history, Mapping):
        raise TypeError("plot_history expects a dict or an object with .to_dict(), "
                        f"got {type(history).__name__}")
    return dict(history)


def _finite_pairs(xs, ys, name: str, fix: str = "give one value per step (None where there is none)"):
    """Keep the points where y is a number (None / NaN mark steps without a measurement)."""
    if len(xs) != len(ys):
        raise ValueError(f"{name} has {len(ys)} values for {len(xs)} steps: {fix}")
    pts = [(float(x), float(y)) for x, y in zip(xs, ys) if y is not None and np.isfinite(float(y))]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_history(history_or_dict, lang=None):
    """Training (and validation) loss against the step, plus the learning rate on a second y axis if recorded.

    Keys: ``"loss"`` (or ``"train_loss"``); optional ``"step"`` (else ``"epoch"``, else 1, 2, ...);
    ``"val_loss"`` with optional ``"val_step"`` (else the same steps as the loss); ``"lr"`` (one per step).
    """
    d = _as_history_dict(history_or_dict)
    loss = d.get("loss", d.get("train_loss"))
    if loss is None or len(loss) == 0:
        raise ValueError(f"no training loss to plot: the history has keys {sorted(d)}, expected 'loss' "
                         "(one value per step)")
    code = use_language(lang)
    x_key = "step" if "step" in d else "epoch" if "epoch" in d else None
    steps = list(d[x_key]) if x_key else list(range(1, len(loss) + 1))
    fig = new_figure((7, 4))
    ax = fig.add_subplot()
    lines = ax.plot(*_finite_pairs(steps, list(loss), "loss"), label=i18n.tr("train_loss", code))
    val = d.get("val_loss")
    if val is not None and len(val) > 0:
        val_steps = list(d["val_step"]) if "val_step" in d else steps
        pairs = _finite_pairs(val_steps, list(val), "val_loss",
                              "give the steps at which it was measured under 'val_step'")
        lines += ax.plot(*pairs, "o-", label=i18n.tr("val_loss", code))
    ax.set_xlabel(i18n.tr(x_key or "step", code))
    ax.set_ylabel(i18n.tr("loss", code))
    ax.grid(alpha=0.3)
    lr = d.get("lr")
    if lr is not None and len(lr) > 0:
        ax_lr = ax.twinx()
        lines += ax_lr.plot(*_finite_pairs(steps, list(lr), "lr"), "--", color="tab:gray",
                            label=i18n.tr("learning_rate", code))
        ax_lr.set_ylabel(i18n.tr("learning_rate", code))
        ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    ax.legend(lines, [ln.get_label() for ln in lines], loc="upper right")  # one legend for both y axes
    return fig


def plot_histograms(before, after, labels=None, lang=None, bins: int = 50):
    """Side-by-side histograms of two tensors (e.g. activations before/after a LayerNorm), with mean and std.

    ``labels``: two titles, each a string or a ``{"en": ..., "zh": ...}`` dict; default "Before" / "After".
    """
    code = i18n.current_language() if lang is None else i18n.normalize_language(lang)
    if labels is None:
        labels = (i18n.tr("before", code), i18n.tr("after", code))
    labels = [i18n.pick(t, code) if isinstance(t, dict) else str(t) for t in labels]
    if len(labels) != 2:
        raise ValueError(f"labels needs exactly 2 titles (before, after), got {len(labels)}")
    data = [to_numpy(before, "before").ravel(), to_numpy(after, "after").ravel()]
    use_language(code, labels)
    fig = new_figure((9, 3.5))
    axes = fig.subplots(1, 2)
    for ax, values, label, color in zip(axes, data, labels, ("tab:blue", "tab:orange")):
        values = values[np.isfinite(values)]
        if values.size == 0:
            raise ValueError(f"'{label}' has no finite values (all NaN or inf): check the tensor first")
        ax.hist(values, bins=bins, color=color, alpha=0.8)
        ax.set_title(f"{label}\n{i18n.tr('mean', code)} = {values.mean():.3g}, "
                     f"{i18n.tr('std', code)} = {values.std():.3g}")
        ax.set_xlabel(i18n.tr("element_value", code))
        ax.set_ylabel(i18n.tr("count", code))
    return fig
