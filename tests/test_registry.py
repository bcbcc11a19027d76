"""The lesson registry (course_lab/registry.py): one row per lesson, and every list of lessons made from it.

The last test is the recipe of docs/design.md ("Recipe: a new lesson") run for real: in a copy of the repository it
adds a stub lesson (its source and its registry row, nothing else), runs the builder and the structural tests, and
they pass. No test of the course hard-codes how many lessons there are.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import astuple
from pathlib import Path

import build_notebooks as bn
import pytest

from course_lab import registry

ROOT = Path(__file__).resolve().parents[1]
LAB = dict(en="Stub", zh="占位")


def _stub(slug: str, part: str | None = None) -> registry.Lesson:
    """A lesson that only has to exist, in the registry's last part unless ``part`` says otherwise."""
    return registry.Lesson(slug, dict(LAB), {"en": "A lesson that only has to exist.", "zh": "只需存在的一课。"},
                           part or registry.PARTS[-1].key)


def test_the_registry_is_sound_and_is_what_lesson_00_shows():
    assert registry.problems() == []
    # The builder's copy, loaded by path (its classes are its own), holds the same rows.
    assert [astuple(row) for row in bn.load_registry().LESSONS] == [astuple(row) for row in registry.LESSONS]
    from course_lab.lessons import l00_welcome as l00

    assert l00.LESSONS is registry.LESSONS


def test_a_registered_lesson_exists_exactly_when_its_source_does():
    sources = bn.lesson_sources(bn.SOURCE_DIR)
    assert bn.registry_problems(sources) == []
    assert [p.stem for p in sources] == [lesson.slug for lesson in registry.LESSONS]
    dropped = bn.registry_problems(sources[:-1])
    assert dropped == [f"notebooks/source/{sources[-1].stem}.md: no such source for the registered lesson "
                       f"{sources[-1].stem} (write it, or remove its row from course_lab/registry.py)"]
    extra = bn.registry_problems([*sources, Path("99_extra.md")])
    assert extra == ["notebooks/source/99_extra.md: not in the lesson registry; add its row to LESSONS in "
                     "course_lab/registry.py"]


def test_problems_name_each_mistake():
    rows, n = registry.LESSONS, len(registry.LESSONS)
    assert registry.problems((*rows, _stub(f"{n:02d}_stub"))) == []
    assert "should be lesson" in " ".join(registry.problems((*rows, _stub(f"{n + 1:02d}_stub"))))
    assert "NN_name" in " ".join(registry.problems((*rows, _stub(f"{n:02d}-stub"))))
    half = registry.Lesson(f"{n:02d}_stub", {"en": "Stub"}, {"en": "x", "zh": "一"}, registry.PARTS[-1].key)
    assert "title in both languages" in " ".join(registry.problems((*rows, half)))
    later = registry.Lesson(f"{n:02d}_stub", dict(LAB), dict(LAB), registry.PARTS[-1].key, builds_on=(n,))
    assert "builds_on names earlier lessons" in " ".join(registry.problems((*rows, later)))
    one = registry.Lesson(f"{n:02d}_stub", dict(LAB), dict(LAB), registry.PARTS[-1].key, leaves_with={"en": "x"})
    assert "leaves with in both languages" in " ".join(registry.problems((*rows, one)))
    assert "not one of PARTS" in " ".join(registry.problems((*rows, _stub(f"{n:02d}_stub", "nosuchpart"))))
    assert "must follow each other" in " ".join(registry.problems((*rows, _stub(f"{n:02d}_stub", "inputs"))))
    # A new part (Part III: the modern Transformer) is one row in PARTS, then its lessons' rows.
    part4 = registry.Part("part4", {"en": "A further part", "zh": "又一部分"})
    new = tuple(_stub(f"{n + i:02d}_stub{i}", "part4") for i in range(3))
    assert registry.problems((*rows, *new), (*registry.PARTS, part4)) == []
    assert "parts without lessons: part4" in registry.problems(rows, (*registry.PARTS, part4))


@pytest.mark.parametrize("n, en, zh", [(0, "zero", "零"), (9, "nine", "九"), (10, "ten", "十"),
                                       (15, "fifteen", "十五"), (18, "eighteen", "十八"), (20, "twenty", "二十"),
                                       (21, "twenty-one", "二十一"), (99, "ninety-nine", "九十九")])
def test_number_words(n, en, zh):
    assert (registry.number_word(n, "en"), registry.number_word(n, "zh")) == (en, zh)


def test_number_words_refuse_what_they_cannot_say():
    with pytest.raises(ValueError, match="0 to 99"):
        registry.number_word(100, "en")
    with pytest.raises(ValueError, match="'en' or 'zh'"):
        registry.number_word(3, "fr")


def test_placeholders_come_from_the_registry_and_unknown_ones_fail():
    training = registry.part_lessons("training")
    text = bn.expand_placeholders("{{lesson_count}} · {{first:training}}-{{last:training}}", "zh", "x")
    assert text == f"{registry.number_word(len(registry.LESSONS), 'zh')} · " \
                   f"{training[0].number:02d}-{training[-1].number:02d}"
    assert bn.expand_placeholders("{{course_map}}", "en", "x") == registry.course_map_table("en")
    for wrong in ("{{lesson_counts}}", "{{first}}", "{{course_map:en}}"):
        with pytest.raises(bn.SourceFormatError, match="unknown placeholder"):
            bn.expand_placeholders(wrong, "en", "00_welcome, line 3")
    with pytest.raises(bn.SourceFormatError, match="there is no part 'nope'"):
        bn.expand_placeholders("{{first:nope}}", "en", "x")


def test_readme_tables_are_made_from_the_registry():
    assert bn.stale_readmes() == {}, "run tools/build_notebooks.py"
    for language, path in bn.READMES.items():
        text = path.read_text(encoding="utf-8")
        assert registry.readme_table(language) in text
        edited = text.replace(registry.LESSONS[-1].title[language], "A title typed by hand", 1)
        assert edited != text and bn.readme_text(edited, language) == text  # the builder undoes a hand edit
    with pytest.raises(bn.SourceFormatError, match="needs the lines"):
        bn.readme_text("| 00 | no markers |", "en")


def test_site_and_slides_list_the_registered_lessons():
    import build_site
    import export_slides

    slugs = [lesson.slug for lesson in registry.LESSONS]
    for lang in ("en", "zh"):
        assert [p.stem for p in export_slides.lessons(lang, folder=ROOT / "notebooks")] == slugs
        assert build_site.course_map(lang) == [(f"{lesson.number:02d}", lesson.summary[lang])
                                               for lesson in registry.LESSONS]


STUB = """%% markdown slide
:: en
# {nn} · Stub
A lesson that only has to exist.
:: zh
# {nn} · 占位
只需存在的一课。

%% markdown notes
:: en
Speaker notes of the stub.
:: zh
占位课的讲稿。

%% code -
print(1 + 1)

%% markdown -
:: en
<details><summary>Solution</summary>

`2`
</details>
:: zh
<details><summary>参考答案</summary>

`2`
</details>
"""

# The structural tests the new lesson must pass (the slow notebook runs are left to nbval).
STRUCTURAL = [
    "tests/test_registry.py", "-k", "not a_new_lesson",
    "tests/test_lesson_00.py", "tests/test_editions.py", "tests/test_notebook_guard.py", "tests/test_lesson_shape.py",
    "tests/test_bilingual.py::test_every_lesson_has_a_source_and_both_languages",
    "tests/test_packaging.py::test_readmes_link_each_other_and_list_every_lesson",
    "tests/test_widget_extremes.py::test_course_map_widget_shows_every_registered_lesson",
]


def _copy_of_the_repository(to: Path) -> None:
    """The files git knows (committed or not, ignored ones left out), copied to ``to``."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to know which files make the repository")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)


@pytest.mark.slow
def test_a_new_lesson_is_a_source_and_a_registry_row(tmp_path):
    copy = tmp_path / "course"
    _copy_of_the_repository(copy)
    nn = f"{len(registry.LESSONS):02d}"
    # The two hand-made changes of the recipe: the source ...
    (copy / "notebooks" / "source" / f"{nn}_stub.md").write_text(STUB.format(nn=nn), encoding="utf-8")
    # ... and its row, appended to LESSONS.
    module = copy / "course_lab" / "registry.py"
    text = module.read_text(encoding="utf-8")
    end = "\n)\n\n\ndef problems("
    assert text.count(end) == 1, "LESSONS no longer ends where this test adds a row"
    row = (f'    Lesson("{nn}_stub", {{"en": "Stub", "zh": "占位"}},\n'
           f'           {{"en": "A lesson that only has to exist.", "zh": "只需存在的一课。"}}, '
           f'"{registry.PARTS[-1].key}"),')
    module.write_text(text.replace(end, f"\n{row}{end}"), encoding="utf-8")

    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    built = subprocess.run([sys.executable, "tools/build_notebooks.py"], cwd=copy, env=env, capture_output=True,
                           text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "wrote 4 of" in built.stdout  # 00 (its map) and the stub, each in two languages
    checked = subprocess.run([sys.executable, "tools/build_notebooks.py", "--check"], cwd=copy, env=env,
                             capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr  # notebooks and READMEs now match the sources
    assert "wrote the lesson table of README.md" in built.stdout and "README_zh.md" in built.stdout
    paired = [f"tests/test_bilingual.py::test_committed_{name}[{nn}_stub]" for name in (
        "pair_code_is_identical_outside_comments", "pair_has_the_same_tokens_with_strings_blanked",
        "zh_prose_is_chinese", "notebooks_are_clean_slides")]  # the new lesson's own bilingual checks
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", *STRUCTURAL, *paired]
    tests = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert tests.returncode == 0, tests.stdout[-6000:] + tests.stderr[-2000:]
    assert f"the map of the {registry.number_word(len(registry.LESSONS) + 1, 'en')} lessons" in \
        (copy / "notebooks" / "en" / "00_welcome.ipynb").read_text(encoding="utf-8")
