"""The course-model cell of lessons 09-12 in a lone notebook (Colab, Kaggle, next to a pip-installed wheel): the
course model is loaded (fetched once when it can be: course_utils.pretrained.course_models), or one line says what
is skipped and how to get it, and the lesson runs on."""

from __future__ import annotations

from course_utils.pretrained.course_models import CourseModel, CourseModelUnavailable, load_course_model

from . import i18n

__all__ = ["load_or_skip"]

WHAT = ("the comparison with the course model", "与课程模型的比较")


def load_or_skip(name: str, lang: str | None = None) -> CourseModel | None:
    """``load_course_model(name)``, or None after one line saying what the lesson skips and how to get the model."""
    try:
        return load_course_model(name)
    except CourseModelUnavailable as err:
        en, zh = WHAT
        reason = str(err).split(": clone")[0]
        print(i18n.pick({"en": f"⚠ Skipped: {en} ({reason}). To get it: clone the course's repository and run the "
                               "notebook there, or set COURSE_MODELS_DIR to a copy of its course_models/ folder.",
                         "zh": f"⚠ 已跳过：{zh}（课程模型 {name} 不在本机，也无法下载）。获取方法：克隆课程仓库"
                               "并在其中运行本笔记本，或把环境变量 COURSE_MODELS_DIR 设为它的 course_models/ 文件夹的"
                               "一份副本。"},
                        lang))
        return None
