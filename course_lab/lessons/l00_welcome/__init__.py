"""Lesson 00 (welcome): the course map, the setup check and the lesson-picker demo.

* :data:`LESSONS` — one line per lesson (title, summary, key formula, part, builds on, leaves with) in both
  languages, from the course's lesson registry :mod:`course_lab.registry`, which also makes the course-map tables of
  the notebook.
* :func:`environment_report` / :func:`cjk_font_report` — what the student's machine has (versions, device,
  a font that can draw Chinese), as plain dicts that the notebook asserts on.
* :func:`build_course_map_widget` — pick a lesson, see the lessons it builds on, what you leave with, and its
  key formula.
* :func:`check_device_choice`, :func:`check_mha_parameter_count`, :func:`check_attention_memory` — the
  exercise checks, built on the shared
  :mod:`course_lab.exercises` (they never raise, so the notebook runs in CI whether or not the student has
  done the exercise).
"""

from __future__ import annotations

import os
import platform
import textwrap

import torch

from ... import fonts, i18n, registry, viz
from .checks import check_attention_memory as check_attention_memory
from .checks import check_device_choice as check_device_choice
from .checks import check_mha_parameter_count as check_mha_parameter_count

# --- the course map -----------------------------------------------------------------------------------------

# One row per lesson (title, one-liner, key formula, part, the lessons it builds on, what it leaves the student with)
# in both languages: the course registry, which also makes the notebook's course-map tables and the READMEs'
# (tools/build_notebooks.py).
LESSONS = registry.LESSONS
Lesson = registry.Lesson


def lesson_info(number: int, lang: str | None = None) -> dict:
    """``{"number", "title", "summary", "formula", "builds_on", "leaves_with"}`` of one lesson in the current (or
    given) language; ``builds_on`` lists the earlier lessons it uses as ``"NN title"`` strings."""
    lesson = registry.by_number(number)  # TypeError / ValueError naming the lessons there are
    earlier = [f"{n:02d} {i18n.pick(registry.by_number(n).title, lang)}" for n in lesson.builds_on]
    return {"number": number, "title": i18n.pick(lesson.title, lang),
            "summary": i18n.pick(lesson.summary, lang), "formula": lesson.formula, "builds_on": earlier,
            "leaves_with": i18n.pick(lesson.leaves_with, lang) if lesson.leaves_with else ""}


def course_map(lang: str | None = None) -> list[dict]:
    """Every lesson as :func:`lesson_info` dicts, in order."""
    return [lesson_info(lesson.number, lang) for lesson in LESSONS]


# --- the setup check ----------------------------------------------------------------------------------------


def cjk_font_report() -> dict:
    """Which installed font draws the Chinese labels: ``{"font", "file", "draws_chinese", "hint"}``.

    ``font`` is None when no installed font covers Chinese; ``hint`` then says how to install one. The check
    opens the font file and looks up every Chinese character of the shared plot labels, so a font that only
    *claims* to be CJK does not pass.
    """
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    name = viz.find_cjk_font()
    if name is None:
        return {"font": None, "file": None, "draws_chinese": False, "hint": fonts.missing_font_message()}
    path = font_manager.findfont(font_manager.FontProperties(family=name), fallback_to_default=False)
    labels = "".join(label["zh"] for label in i18n.LABELS.values())
    chars = sorted({c for c in labels if "\u4e00" <= c <= "\u9fff"})
    font = FT2Font(path)
    missing = [c for c in chars if not font.get_char_index(ord(c))]
    hint = "" if not missing else f"{name} lacks {''.join(missing)}: install fonts-noto-cjk for full coverage"
    return {"font": name, "file": str(path), "draws_chinese": not missing, "hint": hint}


def environment_report() -> dict:
    """Versions of the course's dependencies, the device lessons use, the language and the Chinese font."""
    import ipywidgets
    import matplotlib
    import numpy

    from course_utils.train import pick_device

    device = pick_device()
    font = cjk_font_report()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "matplotlib": matplotlib.__version__,
        "ipywidgets": ipywidgets.__version__,
        "device": device.type,
        "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                        else i18n.pick({"en": f"{platform.machine()}, {os.cpu_count()} CPU cores",
                                        "zh": f"{platform.machine()}，{os.cpu_count()} 个 CPU 核心"})),
        "language": i18n.current_language(),
        "cjk_font": font["font"],
        "cjk_font_ok": font["draws_chinese"],
    }


_REPORT_LABELS = {"device": {"en": "device", "zh": "计算设备"}, "device_name": {"en": "device name", "zh": "设备名称"},
                  "language": {"en": "language", "zh": "语言"}, "cjk_font": {"en": "CJK font", "zh": "中文字体"},
                  "cjk_font_ok": {"en": "draws Chinese", "zh": "能显示中文"}}


def print_environment_report(report: dict, lang: str | None = None) -> None:
    """One line per entry of :func:`environment_report`, its label in the notebook's language (package names
    stay as they are), aligned by display width (a Chinese character takes two columns)."""
    rows = []
    for key, value in report.items():
        label = i18n.pick(_REPORT_LABELS[key], lang) if key in _REPORT_LABELS else key
        if isinstance(value, bool):
            value = i18n.pick({"en": "yes" if value else "no", "zh": "是" if value else "否"}, lang)
        rows.append((label, value))
    width = max(i18n.width(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"{i18n.ljust(label, width)}{value}")


# --- the widget: pick a lesson, see what it builds on, what it leaves you with, its formula ------------------

def part_of(number: int, lang: str | None = None) -> str:
    """Name of the part of the course that lesson ``number`` belongs to."""
    return i18n.pick(registry.part(registry.by_number(number).part).name, lang)


_CARD = {"builds_on": {"en": "Builds on: ", "zh": "用到前面的："},
         "nothing": {"en": "nothing yet: start here", "zh": "无，从这里开始"},
         "leaves_with": {"en": "You leave with: ", "zh": "学完你将得到："}}
_CHOSEN, _EARLIER, _OTHER = "#d62728", "#ff9f40", "#c7d7ea"


def render_lesson_card(lesson: int, lang: str | None = None):
    """A figure: the lessons as a strip (the chosen one red, the earlier lessons it builds on orange) above what the
    course-map table does not say: the lessons it builds on, what the student leaves with, and its formula."""
    code = viz.use_language(lang)
    info = lesson_info(lesson, code)
    uses = registry.by_number(lesson).builds_on
    fig = viz.new_figure((8, 3.4))
    fig.set_layout_engine("none")  # the two panels are placed by hand below
    strip = fig.add_axes((0.03, 0.76, 0.94, 0.17))
    colors = [_CHOSEN if n == lesson else _EARLIER if n in uses else _OTHER for n in range(len(LESSONS))]
    strip.bar(range(len(LESSONS)), [1] * len(LESSONS), color=colors, width=0.9)
    for n in range(len(LESSONS)):
        strip.text(n, 0.5, f"{n:02d}", ha="center", va="center", fontsize=9,
                   color="white" if n == lesson else "black")
    strip.set_axis_off()
    strip.set_xlim(-0.5, len(LESSONS) - 0.5)
    card = fig.add_axes((0.03, 0.02, 0.94, 0.7))
    card.set_axis_off()
    width = 44 if code == "zh" else 88  # a Chinese character is about twice as wide as a Latin letter
    sep = "、" if code == "zh" else ", "
    earlier = sep.join(info["builds_on"]) or i18n.pick(_CARD["nothing"], code)
    card.text(0.0, 0.95, f"{lesson:02d} · {info['title']}   ({part_of(lesson, code)})", fontsize=14, va="top")
    def wrap(text: str) -> str:
        return textwrap.fill(text, width, break_on_hyphens=False)

    card.text(0.0, 0.74, wrap(i18n.pick(_CARD["builds_on"], code) + earlier), fontsize=10, va="top")
    if info["leaves_with"]:  # optional in the registry
        card.text(0.0, 0.47, wrap(i18n.pick(_CARD["leaves_with"], code) + info["leaves_with"]), fontsize=10, va="top")
    card.text(0.5, 0.1, info["formula"], fontsize=15, ha="center", va="center")
    return fig, {**info, "part": part_of(lesson, code), "highlighted": colors.index(_CHOSEN),
                 "earlier": [n for n, color in enumerate(colors) if color == _EARLIER]}


def build_course_map_widget(lang: str | None = None):
    """A dropdown of the lessons; each choice redraws the card (state: number, title, builds_on, leaves_with,
    formula...)."""
    from ...widgets import LessonWidget, dropdown

    options = [(f"{lesson.number:02d} · {i18n.pick(lesson.title, lang)}", lesson.number)
               for lesson in LESSONS]
    control = dropdown("lesson", options, value=0, label={"en": "Lesson", "zh": "课程"}, lang=lang)
    return LessonWidget({"lesson": control}, lambda lesson: render_lesson_card(lesson, lang),
                        title={"en": "Course map", "zh": "课程地图"})


# --- exercises ----------------------------------------------------------------------------------------------
