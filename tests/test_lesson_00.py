"""Lesson 00 (welcome): course map, setup report, font check, the lesson-picker widget, exercise checks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import build_notebooks as bn
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.mathtext import MathTextParser

from course_lab import registry, viz
from course_lab.i18n import set_language
from course_lab.lessons import l00_welcome as l00
from course_utils.train import pick_device

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CJK = re.compile("[\u4e00-\u9fff]")
COUNT = len(registry.LESSONS)  # the course's lessons: the registry says how many, no test does


pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


def _markdown(language: str) -> str:
    """The markdown of the built lesson 00 notebook in one language (the builder expanded its placeholders)."""
    nb = json.loads((NOTEBOOKS / language / "00_welcome.ipynb").read_text(encoding="utf-8"))
    return "\n\n".join("".join(cell["source"]) for cell in nb["cells"] if cell["cell_type"] == "markdown")


def _map_rows(language: str) -> list[list[str]]:
    """Rows of the course-map table in the given language's notebook."""
    section = _markdown(language).split("## The course map" if language == "en" else "## 课程地图")[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("| ") and re.match(r"\| \d\d \|", line):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows and not line.startswith("|"):
            break
    return rows


def test_every_lesson_says_what_it_builds_on_and_leaves_with():
    """The card's two lines come from the registry (optional fields: a new lesson's stub row has neither); where
    given, builds_on names earlier lessons and leaves_with is said in both languages."""
    for lesson in l00.LESSONS:
        if lesson.leaves_with:
            assert set(lesson.leaves_with) == {"en", "zh"} and CJK.search(lesson.leaves_with["zh"])
        assert all(0 <= n < lesson.number for n in lesson.builds_on)
    assert l00.LESSONS[7].builds_on and l00.LESSONS[7].leaves_with  # the course's own rows fill them in


def test_lessons_are_numbered_bilingual_and_drawable():
    assert l00.LESSONS is registry.LESSONS
    assert [lesson.number for lesson in l00.LESSONS] == list(range(COUNT))
    parser = MathTextParser("agg")
    for lesson in l00.LESSONS:
        assert set(lesson.title) == set(lesson.summary) == {"en", "zh"}
        assert CJK.search(lesson.summary["zh"])  # titles may be names ("GPT")
        if lesson.formula:  # optional: the card then shows none
            parser.parse(lesson.formula)  # raises ValueError if mathtext cannot draw it


@pytest.mark.parametrize("language", ["en", "zh"])
def test_notebook_course_map_matches_lessons(language):
    rows = _map_rows(language)
    assert [int(r[0]) for r in rows] == list(range(COUNT))
    for row, lesson in zip(rows, l00.LESSONS):
        assert row[1] == lesson.title[language]
        assert row[2] == lesson.summary[language]


def test_notebook_counts_and_ranges_come_from_the_registry():
    """"the map of the fifteen lessons" and the notes' "Lessons 09-14": words and numbers made by the builder."""
    training = registry.part_lessons("training")
    first, last = f"{training[0].number:02d}", f"{training[-1].number:02d}"
    en, zh = _markdown("en"), _markdown("zh")
    assert f"the map of the {registry.number_word(COUNT, 'en')} lessons" in en
    assert f"全部{registry.number_word(COUNT, 'zh')}课" in zh
    assert "{{" not in en + zh
    instructor = bn.build_lesson(bn.SOURCE_DIR / "00_welcome.md", edition="instructor")  # the notes' ranges
    assert f"Lessons {first}-{last} train and use it" in instructor["en"]
    assert f"第 {first} 到 {last} 课在真实数据上训练" in instructor["zh"]


def test_lesson_info_and_errors():
    info = l00.lesson_info(2, "zh")
    assert info["title"] == "位置编码" and info["number"] == 2 and "sin" in info["formula"]
    assert len(l00.course_map("en")) == COUNT and l00.course_map("en")[-1]["number"] == COUNT - 1
    with pytest.raises(ValueError, match=f"^there is no lesson {COUNT}: the course has lessons 0 to {COUNT - 1}$"):
        l00.lesson_info(COUNT)
    with pytest.raises(ValueError, match=f"^there is no lesson {COUNT}: "):
        l00.part_of(COUNT)
    with pytest.raises(TypeError):
        l00.lesson_info("3")
    assert l00.part_of(4, "en") == "Attention"
    for lesson in l00.LESSONS:  # every registered lesson has a part, in both languages
        assert l00.part_of(lesson.number, "en") == registry.part(lesson.part).name["en"]
        assert l00.part_of(lesson.number, "zh") == registry.part(lesson.part).name["zh"]


def test_environment_report():
    report = l00.environment_report()
    expected = {"python", "torch", "numpy", "matplotlib", "ipywidgets", "device", "language", "cjk_font"}
    assert expected <= set(report)
    assert report["torch"] == torch.__version__
    assert report["device"] == pick_device().type
    assert report["language"] == "en"
    set_language("zh")
    assert l00.environment_report()["language"] == "zh"


def test_cjk_font_report_real_and_missing(monkeypatch):
    found = viz.find_cjk_font()
    report = l00.cjk_font_report()
    assert report["font"] == found
    if found is not None:
        assert Path(report["file"]).is_file() and report["draws_chinese"] and report["hint"] == ""
    monkeypatch.setattr(viz, "find_cjk_font", lambda: None)
    missing = l00.cjk_font_report()
    assert missing["font"] is None and not missing["draws_chinese"] and "fonts-noto-cjk" in missing["hint"]


def test_cjk_font_report_font_without_chinese(monkeypatch):
    monkeypatch.setattr(viz, "find_cjk_font", lambda: "DejaVu Sans")  # ships with matplotlib, no Chinese
    report = l00.cjk_font_report()
    assert report["font"] == "DejaVu Sans" and not report["draws_chinese"]
    assert "注" in report["hint"]  # names the characters it lacks


def test_course_map_widget_callback():
    w = l00.build_course_map_widget("en")
    assert w.state["number"] == 0 and w.renders == 1
    w.controls["lesson"].value = 5
    assert w.state["number"] == 5 and w.state["title"] == "Masking" and w.state["part"] == "Attention"
    bars = w.figure.axes[0].patches
    red = [i for i, bar in enumerate(bars) if to_hex(bar.get_facecolor()) == "#d62728"]
    assert red == [5]
    texts = " ".join(t.get_text() for t in w.figure.axes[1].texts)
    assert "Masking" in texts and l00.LESSONS[5].formula in texts
    # What the course-map table lacks: the earlier lessons it uses (orange on the strip, named on the card) and what
    # the student leaves with; the one-line summary, already in the table, is not repeated.
    assert w.state["earlier"] == list(l00.LESSONS[5].builds_on) and w.state["earlier"]
    orange = [i for i, bar in enumerate(bars) if to_hex(bar.get_facecolor()) == "#ff9f40"]
    assert orange == list(l00.LESSONS[5].builds_on)
    flat = " ".join(texts.split())
    assert "Builds on:" in flat and "03 Scaled dot-product attention" in flat
    assert " ".join(l00.LESSONS[5].leaves_with["en"].split()) in flat
    assert l00.LESSONS[5].summary["en"] not in flat
    w.controls["lesson"].value = 0
    assert w.state["builds_on"] == [] and "nothing yet" in " ".join(t.get_text() for t in w.figure.axes[1].texts)


def test_course_map_widget_in_chinese():
    w = l00.build_course_map_widget("zh")
    assert CJK.search(w.controls["lesson"].options[3][0])
    w.controls["lesson"].value = 13
    assert w.state["title"] == "预训练权重（MiniLM）" and w.state["part"] == "训练与应用"
    assert w.state["builds_on"][0] == "07 编码器与解码器" and "线性探测" in w.state["leaves_with"]


def _raises(*_):
    raise NotImplementedError


def test_check_device_choice_tries_every_kind_of_machine(capsys):
    import torch
    real = torch.cuda.is_available, torch.backends.mps.is_available
    assert not l00.check_device_choice(lambda: "tpu")
    assert not l00.check_device_choice(lambda: "cpu")                        # a constant is caught
    assert "always returns 'cpu'" in capsys.readouterr().out
    assert not l00.check_device_choice(lambda: "mps" if torch.backends.mps.is_available() else
                                       "cuda" if torch.cuda.is_available() else "cpu")   # MPS before CUDA
    assert "test CUDA first" in capsys.readouterr().out
    assert not l00.check_device_choice(lambda: pick_device().type)           # the forbidden shortcut
    assert not l00.check_device_choice(_raises)
    assert (torch.cuda.is_available, torch.backends.mps.is_available) == real   # restored
    import course_utils.train
    assert course_utils.train.pick_device is pick_device


def test_check_mha_parameter_count():
    assert l00.check_mha_parameter_count(lambda d, h: 4 * d * d + 4 * d)
    assert not l00.check_mha_parameter_count(lambda d, h: 4 * d * d)          # forgot the biases
    assert not l00.check_mha_parameter_count(lambda d, h: 4 * d * d // h + 4 * d)  # per-head thinking
    assert not l00.check_mha_parameter_count(_raises)


def test_check_attention_memory(capsys):
    assert l00.check_attention_memory(lambda b, h, t: 4 * b * h * t * t)
    assert not l00.check_attention_memory(lambda b, h, t: 4 * b * h * t)
    assert "grows like T" in capsys.readouterr().out
    assert not l00.check_attention_memory(lambda b, h, t: 2 * b * h * t * t)   # float16's 2 bytes
    capsys.readouterr()
    from course_utils import speed

    assert not l00.check_attention_memory(lambda b, h, t: speed.attention_weights_bytes(b, h, t))  # the shortcut
    assert "the course's answer" in capsys.readouterr().out
    assert speed.attention_weights_bytes(2, 4, 16, "bfloat16") == 2 * 4 * 16 * 16 * 2
    with pytest.raises(ValueError, match="pass the name"):
        speed.attention_weights_bytes(1, 1, 1, "fp8")
