"""Lesson 05 — masking: the mask-grid widget and the exercise checks.

The widget is a T × T grid of toggle buttons, one per (query, key) cell: pressed = the query *may
attend* to that key (the course convention, ``course_utils.masks``). Every change recomputes the attention
weights of fixed random queries and keys through ``course_utils.attention.attention_with_weights``,
so a row whose keys are all switched off shows the library's documented answer: zero weights, not NaN.

Tests drive it like a student: ``w.controls["cell_2_3"].value = False`` or ``w.controls["preset"].value =
"causal"``, then read ``w.state["mask"]`` / ``w.state["weights"]``.
"""

from __future__ import annotations

import ipywidgets as widgets
import torch

from course_utils import masks
from course_utils.attention import attention_with_weights

from ... import i18n, viz
from ...widgets import LessonWidget, dropdown
from .checks import check_left_padded_mask as check_left_padded_mask
from .checks import check_masked_softmax as check_masked_softmax
from .checks import check_sliding_window_mask as check_sliding_window_mask

PRESETS = ("none", "causal", "padding", "causal_padding", "custom")
_PRESET_LABELS = {
    "none": {"en": "no mask (all keys)", "zh": "不加掩码（全部可见）"},
    "causal": {"en": "causal", "zh": "因果掩码"},
    "padding": {"en": "padding (last {n} keys are <pad>)", "zh": "填充掩码（最后 {n} 个键是 <pad>）"},
    "causal_padding": {"en": "causal + padding", "zh": "因果 + 填充"},
    "custom": {"en": "custom (your clicks)", "zh": "自定义（按你的点击）"},
}


def preset_mask(name: str, t: int = 6, n_pad: int = 2) -> torch.Tensor:
    """The ``(T, T)`` keep-mask of a preset: ``none``, ``causal``, ``padding`` (last ``n_pad`` keys hidden) or
    ``causal_padding``."""
    if not 0 <= n_pad < t:
        raise ValueError(f"n_pad={n_pad} must be in [0, T) = [0, {t}): at least one real token is needed")
    full = torch.ones(t, t, dtype=torch.bool)
    pad = full.clone()
    if n_pad:
        pad[:, t - n_pad:] = False              # every query row: the last n_pad keys are padding
    table = {"none": full, "causal": masks.causal_mask(t), "padding": pad,
             "causal_padding": masks.causal_mask(t) & pad}
    if name not in table:
        raise ValueError(f"unknown preset {name!r}: choose one of {sorted(table)}")
    return table[name]


def demo_qkv(t: int = 6, d_k: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fixed random queries, keys and values ``(1, 1, T, d_k)`` (own generator: global RNG untouched)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, t, d_k, generator=g) for _ in range(3))
    return q * 1.5, k, v    # a little sharper than unit scale, so that masking visibly moves the weights


def masked_weights(keep: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention weights ``(T, T)`` of the demo under the ``(T, T)`` keep-mask (rows with no key: zeros)."""
    _, weights = attention_with_weights(q, k, v, keep)
    return weights[0, 0]


def _cell(i: int, j: int) -> str:
    return f"cell_{i}_{j}"


class MaskGridWidget(LessonWidget):
    """A :class:`LessonWidget` laid out as a grid; choosing a preset sets every cell and renders once."""

    def __init__(self, controls, render, t: int, n_pad: int, title=None):
        self.t, self.n_pad = t, n_pad
        super().__init__(controls, render, title=title)
        lang = i18n.current_language()
        head = [widgets.Label(f"{i18n.tr('query', lang)} ↓ / {i18n.tr('key', lang)} →")]
        head += [widgets.Label(str(j), layout=widgets.Layout(justify_content="center")) for j in range(t)]
        cells = []
        for i in range(t):
            cells.append(widgets.Label(str(i)))
            cells += [self.controls[_cell(i, j)] for j in range(t)]
        grid = widgets.GridBox(head + cells, layout=widgets.Layout(
            grid_template_columns=f"auto repeat({t}, 44px)", grid_gap="2px"))
        self.ui = widgets.VBox([w for w in self.ui.children[:1] if isinstance(w, widgets.HTML)]
                               + [self.controls["preset"], grid, self.status, self.output])
        self._paint()

    def mask(self) -> torch.Tensor:
        """The ``(T, T)`` keep-mask the buttons show now."""
        t = self.t
        return torch.tensor([[self.controls[_cell(i, j)].value for j in range(t)] for i in range(t)])

    def apply_preset(self, name: str) -> dict:
        """Set every cell from a preset and render once."""
        keep = preset_mask(name, self.t, self.n_pad)
        values = {_cell(i, j): bool(keep[i, j]) for i in range(self.t) for j in range(self.t)}
        return self.set(**values)

    def _paint(self) -> None:
        for i in range(self.t):
            for j in range(self.t):
                button = self.controls[_cell(i, j)]
                button.description = "1" if button.value else "0"
                button.button_style = "success" if button.value else ""

    def _on_change(self, change) -> None:
        if self._holding:
            return
        preset = self.controls["preset"]
        if change["owner"] is preset:
            if change["new"] != "custom":
                with self.output:
                    self.apply_preset(change["new"])
                self._paint()
            return
        # A click on a cell: the grid no longer follows a preset (unless it happens to match one).
        keep = self.mask()
        matching = [p for p in PRESETS[:-1] if torch.equal(preset_mask(p, self.t, self.n_pad), keep)]
        self._holding = True
        try:
            preset.value = matching[0] if matching else "custom"
        finally:
            self._holding = False
        super()._on_change(change)
        self._paint()


def build_mask_widget(t: int = 6, n_pad: int = 2, preset: str = "causal", seed: int = 0) -> MaskGridWidget:
    """The lesson's widget: a T × T grid of mask cells and the attention-weight heatmap they produce.

    ``state``: ``mask`` (T, T) bool, ``weights`` (T, T), ``row_sums`` (T,), ``empty_rows`` (queries that
    see no key) and ``masked_mass`` (total weight on hidden keys: always 0).
    """
    if not 2 <= t <= 10:
        raise ValueError(f"t={t}: choose a grid between 2 and 10 cells wide (a T × T grid of buttons)")
    lang = i18n.current_language()
    q, k, v = demo_qkv(t, seed=seed)
    start = preset_mask(preset, t, n_pad)
    controls = {"preset": dropdown("preset", [(_preset_label(p, n_pad, lang), p) for p in PRESETS], preset,
                                   label={"en": "Preset", "zh": "预设"}, lang=lang)}
    for i in range(t):
        for j in range(t):
            controls[_cell(i, j)] = widgets.ToggleButton(
                value=bool(start[i, j]), layout=widgets.Layout(width="44px"),
                tooltip=f"{i18n.tr('query', lang)} {i}, {i18n.tr('key', lang)} {j}")

    def render(preset, **cells):
        viz.use_language(lang)
        keep = torch.tensor([[cells[_cell(i, j)] for j in range(t)] for i in range(t)])
        weights = masked_weights(keep, q, k, v)
        fig = viz.new_figure((8.5, 3.8))
        ax_m, ax_w = fig.subplots(1, 2)
        ax_m.imshow(keep.float().numpy(), cmap="Greys", vmin=0, vmax=1.6, interpolation="nearest")
        ax_m.set_title(i18n.pick({"en": "Mask (1 = may attend)", "zh": "掩码（1 = 可以关注）"}, lang))
        im = ax_w.imshow(weights.numpy(), cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
        ax_w.set_title(i18n.tr("attention_weights", lang))
        for i in range(t):
            for j in range(t):
                ax_m.text(j, i, "1" if keep[i, j] else "0", ha="center", va="center", fontsize=8)
                w = float(weights[i, j])
                ax_w.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=7,
                          color="black" if w > 0.6 else "white")
        for ax in (ax_m, ax_w):
            ax.set_xticks(range(t))
            ax.set_yticks(range(t))
            ax.set_xlabel(i18n.tr("key", lang))
            ax.set_ylabel(i18n.tr("query", lang))
        fig.colorbar(im, ax=ax_w, shrink=0.8)
        empty = [i for i in range(t) if not keep[i].any()]
        return fig, {"mask": keep, "weights": weights, "row_sums": weights.sum(-1), "empty_rows": empty,
                     "masked_mass": float(weights[~keep].sum())}

    title = {"en": "Click cells to hide keys; the weights follow",
             "zh": "点击格子隐藏键，注意力权重随之变化"}
    return MaskGridWidget(controls, render, t=t, n_pad=n_pad, title=title)


def _preset_label(name: str, n_pad: int, lang: str) -> str:
    return i18n.pick(_PRESET_LABELS[name], lang).format(n=n_pad)


# ------------------------------------------------------------------------------------------- exercises


__all__ = ["PRESETS", "preset_mask", "demo_qkv", "masked_weights", "MaskGridWidget", "build_mask_widget",
           "check_left_padded_mask", "check_masked_softmax", "check_sliding_window_mask"]
