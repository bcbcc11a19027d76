"""The website's builder (tools/build_site.py) without building the site: the parts a reader meets on every page.
The built pages are checked in a browser by tests/browser/test_site.py (`make site-test`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import build_site  # noqa: E402


@pytest.mark.parametrize("given,expected", [
    ("https://github.com/someone/course.git", "https://github.com/someone/course"),
    ("git@github.com:someone/course.git", "https://github.com/someone/course"),
    ("https://gitlab.example.org/group/course/", "https://gitlab.example.org/group/course"),
])
def test_the_repository_address_is_a_web_address(monkeypatch, given, expected):
    monkeypatch.setenv("COURSE_REPO_URL", given)
    assert build_site.repository_url() == expected


def test_github_actions_gives_the_address(monkeypatch):
    monkeypatch.delenv("COURSE_REPO_URL", raising=False)
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "someone/course")
    assert build_site.repository_url() == "https://github.com/someone/course"


@pytest.mark.parametrize("given", ["/work/course", "file:///work/course", "../course.git", ""])
def test_a_local_path_is_no_repository_address(given):
    assert build_site.web_address(given) is None
    assert build_site.colab_url(build_site.web_address(given), "en", "03_x") is None


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_lesson_bar_says_how_to_run_it(lang):
    repo = "https://github.com/someone/course"
    bar = build_site.bar(lang, "03_scaled_dot_product_attention", True, repo)
    assert f'href="{repo}"' in bar and "<code>make lab</code>" in bar and f"git clone {repo}" in bar
    assert ('href="https://colab.research.google.com/github/someone/course/blob/main/notebooks/'
            f'{lang}/03_scaled_dot_product_attention.ipynb"') in bar
    assert 'href="slides/03_scaled_dot_product_attention.html"' in bar
    plain = build_site.bar(lang, "03_scaled_dot_product_attention", True, None)
    assert "colab" not in plain and "course-repo" not in plain and "<code>make lab</code>" in plain


def test_chinese_lines_are_joined_where_a_browser_would_show_a_space():
    text = "第一句。\n第二句，\nPyTorch 的\n中文\n\n- 列表\n- 列表\n\n$$\na\n$$\n```\n中\n文\n```"
    joined = build_site.join_cjk_lines(text)
    assert joined.startswith("第一句。第二句，PyTorch 的中文\n")  # after 。 and ，, and between two Chinese lines
    assert "- 列表\n- 列表" in joined and "$$\na\n$$" in joined and "```\n中\n文\n```" in joined
    assert build_site.join_cjk_lines("中文\nEnglish") == "中文\nEnglish"  # the space between scripts stays


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_glossary_page_is_for_students(lang):
    page = build_site.student_glossary(lang)
    assert "rejected" not in page and "不采用" not in page and "Rules for editing" not in page
    assert "| 交叉熵 |" in page or "| cross-entropy | 交叉熵 |" in page


def test_a_deck_links_back_to_its_lesson():
    body = build_site.deck_links("<html><head></head><body class='x'><div></div></body></html>", "zh", "03_a")
    assert 'href="../03_a.html"' in body and "不含讲者备注" in body and 'rel="icon"' in body
