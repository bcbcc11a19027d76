"""The course-model cell of lessons 09-12 in a lone notebook (Colab, Kaggle, next to a pip-installed wheel), which has
no course_models/ folder: the course model is fetched once into the data folder's ``course_models/`` from where the
repository publishes it (``COURSE_MODELS_URL``, else the address in assets/course_models_published.json), its
manifest checked against the sha256 pinned there and its weights against the manifest; when it cannot be, one line
says what the lesson skips and how to get the model, and the lesson runs on."""

from __future__ import annotations

import json
import os
from pathlib import Path

from course_utils.data.download import _download, _NetworkError, downloads_allowed
from course_utils.data.registry import data_dir
from course_utils.pretrained.course_models import CourseModel, course_models_dir, load_course_model
from course_utils.safe_files import file_sha256

from . import i18n
from .assets import asset

__all__ = ["CourseModelUnavailable", "fetch_course_model", "fetched_dir", "load_or_skip", "pin_published"]

GET_THEM = ("clone the course's repository (its course_models/ folder) and run from there, set COURSE_MODELS_DIR to a "
            "copy of that folder, or set COURSE_MODELS_URL to where it is published")
WHAT = ("the comparison with the course model", "与课程模型的比较")


class CourseModelUnavailable(FileNotFoundError):
    """The course model is not on this machine and could not be fetched; the message says how to get it."""


def published() -> dict:
    """The pinned table: ``{"url": base URL or None, "models": {name: {"bytes", "sha256"} of its manifest}}``."""
    return json.loads(asset("course_models_published.json").read_text(encoding="utf-8"))


def fetched_dir() -> Path:
    """Where fetched course models are kept: ``course_models/`` in the data folder (``COURSE_DATA_DIR``)."""
    return data_dir() / "course_models"


def fetch_course_model(name: str, url: str | None = None, folder: str | os.PathLike | None = None,
                       progress: bool = True) -> Path:
    """Download course model ``name`` (manifest, then weights) from ``url`` (default ``$COURSE_MODELS_URL``, else
    the published address) into ``folder`` (default :func:`fetched_dir`), each file checked before it is kept;
    return the folder. Raises :class:`CourseModelUnavailable` (offline, no address, a wrong file)."""
    table = published()
    if name not in table["models"]:
        raise ValueError(f"no course model {name!r}: the published ones are {', '.join(sorted(table['models']))}")
    base = (url or os.environ.get("COURSE_MODELS_URL", "").strip() or table["url"] or "").rstrip("/")
    if not base:
        raise CourseModelUnavailable(f"course model {name!r} is not here and no download address is known: {GET_THEM}")
    if not downloads_allowed():
        raise CourseModelUnavailable(f"course model {name!r} is not here and COURSE_OFFLINE forbids downloads: "
                                     f"{GET_THEM}")
    root = Path(folder) if folder is not None else fetched_dir()
    root.mkdir(parents=True, exist_ok=True)

    def get(file: str, size: int, sha256: str) -> None:
        def check(tmp: Path) -> None:
            actual = (tmp.stat().st_size, file_sha256(tmp))
            if actual != (size, sha256):
                raise CourseModelUnavailable(f"{base}/{file} is not the published file ({actual[0]:,} bytes, sha256 "
                                             f"{actual[1]}; expected {size:,}, {sha256}): nothing was kept; {GET_THEM}")
        target = root / file
        if target.is_file() and target.stat().st_size == size and file_sha256(target) == sha256:
            return
        try:
            _download(f"{base}/{file}", target, progress, check, size)
        except _NetworkError as err:
            raise CourseModelUnavailable(f"course model {name!r} could not be downloaded from {base} ({err}): "
                                         f"{GET_THEM}") from None

    pinned = table["models"][name]
    get(f"{name}.json", pinned["bytes"], pinned["sha256"])
    manifest = json.loads((root / f"{name}.json").read_text(encoding="utf-8"))
    get(manifest["file"], manifest["bytes"], manifest["sha256"])
    return root


def find(name: str) -> Path:
    """The folder holding ``name``: ``COURSE_MODELS_DIR`` or ``course_models/`` from the working directory up (as
    ``load_course_model``), else the fetched copy, downloaded when missing."""
    if os.environ.get("COURSE_MODELS_DIR"):
        return course_models_dir()
    try:
        root = course_models_dir()
        if (root / f"{name}.json").is_file() or name not in published()["models"]:
            return root
    except FileNotFoundError:
        pass
    if (fetched_dir() / f"{name}.json").is_file():
        return fetched_dir()
    return fetch_course_model(name)


def load_or_skip(name: str, lang: str | None = None) -> CourseModel | None:
    """``load_course_model`` from :func:`find`'s folder, or None after one line saying what the lesson skips and how
    to get the model."""
    try:
        return load_course_model(name, find(name))
    except CourseModelUnavailable as err:
        reason = str(err).split(": clone")[0]
        print(i18n.pick({"en": f"⚠ Skipped: {WHAT[0]} ({reason}). To get it: clone the course's repository and run "
                               "the notebook there, or set COURSE_MODELS_DIR to a copy of its course_models/ folder.",
                         "zh": f"⚠ 已跳过：{WHAT[1]}（课程模型 {name} 不在本机，也无法下载）。获取方法：克隆课程仓库"
                               "并在其中运行本笔记本，或把环境变量 COURSE_MODELS_DIR 设为它的 course_models/ 文件夹的"
                               "一份副本。"}, lang))
        return None


def pin_published(folder: str | os.PathLike | None = None) -> None:
    """Rewrite the pinned table from ``folder`` (default: the clone's course_models/) after retraining a model:
    ``python -m course_lab.course_models --pin``."""
    table, root = published(), course_models_dir(folder)
    table["models"] = {p.stem: {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
                       for p in sorted(root.glob("*.json"))}
    asset("course_models_published.json").write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--pin"]:
        pin_published(*sys.argv[2:3])
