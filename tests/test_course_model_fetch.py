"""A lone notebook (Colab, Kaggle, next to a pip-installed wheel) has no course_models/ folder: the course models are
fetched from where they are published (pinned sha256; a file:// URL stands in for the network here), or the lesson
says in one line what it skips and how to get them (issue 39, section 3)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from course_lab import course_models as cm

ROOT = Path(__file__).resolve().parents[1] / "course_models"


def _no_address() -> dict:
    return {**json.loads(cm.asset("course_models_published.json").read_text(encoding="utf-8")), "url": None}


@pytest.fixture
def lone(tmp_path, monkeypatch):
    """An empty working folder with no course_models/ above it and an empty data folder."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("COURSE_MODELS_DIR", raising=False)
    monkeypatch.delenv("COURSE_MODELS_URL", raising=False)
    monkeypatch.delenv("COURSE_OFFLINE", raising=False)
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def test_the_pinned_table_is_the_published_manifests():
    """After retraining a model: python -m course_lab.course_models --pin (then commit the table)."""
    table = cm.published()["models"]
    here = {p.stem: {"bytes": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
            for p in sorted(ROOT.glob("*.json"))}
    assert table == here, "stale table: run python -m course_lab.course_models --pin"


def test_fetch_from_a_published_folder_then_load_offline(lone, monkeypatch):
    monkeypatch.setenv("COURSE_MODELS_URL", ROOT.as_uri())
    model, tokenizers, manifest = cm.load_or_skip("sst2_classifier")
    fetched = lone / "data" / "course_models"
    assert (fetched / "sst2_classifier.json").read_bytes() == (ROOT / "sst2_classifier.json").read_bytes()
    assert (fetched / manifest["file"]).stat().st_size == manifest["bytes"]
    assert not model.training and "words" in tokenizers
    monkeypatch.setenv("COURSE_OFFLINE", "1")                        # now offline: the fetched copy is used
    monkeypatch.setenv("COURSE_MODELS_URL", (lone / "nowhere").as_uri())
    assert cm.load_or_skip("sst2_classifier").manifest == manifest


def test_a_published_file_that_differs_is_refused_and_not_kept(lone):
    mirror = lone / "mirror"
    mirror.mkdir()
    shutil.copy(ROOT / "sst2_classifier.json", mirror / "sst2_classifier.json")
    weights = json.loads((ROOT / "sst2_classifier.json").read_text(encoding="utf-8"))["file"]
    data = bytearray((ROOT / weights).read_bytes())
    data[len(data) // 2] ^= 1
    (mirror / weights).write_bytes(bytes(data))
    with pytest.raises(cm.CourseModelUnavailable, match="is not the published file"):
        cm.fetch_course_model("sst2_classifier", url=mirror.as_uri())
    assert not (lone / "data" / "course_models" / weights).exists()
    (mirror / "sst2_classifier.json").write_text("{}", encoding="utf-8")           # a manifest that is not pinned
    with pytest.raises(cm.CourseModelUnavailable, match="is not the published file"):
        cm.fetch_course_model("sst2_classifier", url=mirror.as_uri())


@pytest.mark.parametrize("how, said", [("no_url", "no download address is known"),
                                       ("offline", "COURSE_OFFLINE forbids downloads"),
                                       ("unreachable", "could not be downloaded")])
def test_unavailable_says_how_to_get_them(lone, monkeypatch, how, said):
    if how != "no_url":
        monkeypatch.setenv("COURSE_MODELS_URL", (lone / "nowhere").as_uri())
    if how == "offline":
        monkeypatch.setenv("COURSE_OFFLINE", "1")
    monkeypatch.setattr(cm, "published", _no_address)
    with pytest.raises(cm.CourseModelUnavailable, match=f"{said}.*clone the course's repository") as info:
        cm.find("gpt_shakespeare")
    assert isinstance(info.value, FileNotFoundError)


@pytest.mark.parametrize("lang, said", [("en", "⚠ Skipped: the comparison with the course model"),
                                        ("zh", "⚠ 已跳过：与课程模型的比较")])
def test_a_lesson_cell_skips_in_one_line(lone, monkeypatch, capsys, lang, said):
    monkeypatch.setattr(cm, "published", _no_address)
    assert cm.load_or_skip("mlm_shakespeare", lang=lang) is None
    out = capsys.readouterr().out
    assert out.startswith(said) and out.count("\n") == 1 and "COURSE_MODELS_DIR" in out


def test_a_clone_still_uses_its_own_folder(monkeypatch):
    monkeypatch.delenv("COURSE_MODELS_DIR", raising=False)
    monkeypatch.chdir(ROOT.parent / "notebooks")
    monkeypatch.setenv("COURSE_MODELS_URL", "file:///nowhere")
    assert cm.find("sst2_classifier") == ROOT
