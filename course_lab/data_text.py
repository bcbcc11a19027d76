"""The one line a lesson prints about the data it loaded, in the notebook's language.

course_utils has no language layer: its loaders return lists and strings that carry their facts as fields
(``name``, ``split``, ``label_names``, ``source.kind`` / ``location`` / ``detail``) and an English ``describe()``.
:func:`describe` builds the line from those fields, in English (the loader's own ``describe()``) or in Chinese, so a
Chinese notebook prints ``SST-2 开发集：872 个样本（负面 428，正面 444），来自数据目录：…/dev.tsv`` instead of the
English line. The bundled-sample case says so in Chinese too; the loader's ``SampleDataWarning`` stays English (a
library's message) and this line is the lesson's Chinese explanation after it.
"""

from __future__ import annotations

import re
from collections import Counter

from . import i18n

_LABELS_ZH = {"negative": "负面", "positive": "正面"}
_SPLITS_ZH = {"train": "训练集", "dev": "开发集", "validation": "验证集", "test": "测试集", "all": "全部"}
_KIND_ZH = {"data_dir": "来自数据目录", "downloaded": "已下载到", "sample": "来自课程附带的小样本"}
# The details course_utils' loaders write (course_utils/data/datasets.py, translation.py), in Chinese.
_DETAILS_ZH = (
    (re.compile(r"sha256 = the course's copy"), "sha256 与课程的副本一致"),
    (re.compile(r"sha256 (\w+)…: another release, format checked"), r"sha256 \1…：另一个版本，格式已检查"),
    (re.compile(r"Tatoeba \(tatoeba\.org, CC BY 2\.0 FR\) via the manythings\.org Anki collection"),
     "来自 Tatoeba（tatoeba.org，CC BY 2.0 FR），经 manythings.org 的 Anki 合集整理"),
    (re.compile(r"split '(\w+)': every (\d+)th row is held out"),
     lambda m: f"{_SPLITS_ZH.get(m.group(1), m.group(1))}：每 {m.group(2)} 行留出一行"),
    (re.compile(r"original prose, CC0"), "课程自写的英文文本，CC0"),
    (re.compile(r"member (\S+)"), r"压缩包中的 \1"),
    (re.compile(r"dropped (\d+) empty reviews?"), r"去掉了 \1 条空评论"),
    (re.compile(r"^(.*) \((\d+) columns\)$"), r"\1（\2 列）"),
    (re.compile(r"; "), "；"),
)


def _zh_detail(text: str) -> str:
    for pattern, replacement in _DETAILS_ZH:
        text = pattern.sub(replacement, text)
    return text


def describe(data, lang: str | None = None) -> str:
    """The line that says what ``data`` is and where it came from: ``data.describe()`` in English, the same facts in
    Chinese. ``data`` is what a course_utils loader returns: ``Examples`` (labelled sentences), ``Text`` or
    ``Pairs`` (translation pairs)."""
    if (i18n.normalize_language(lang) if lang else i18n.current_language()) == "en":
        return data.describe()
    source = data.source
    name = data.name.removesuffix(" (sample)")
    where = _zh_detail(source.location)
    detail = f"（{_zh_detail(source.detail)}）" if source.detail else ""
    origin = f"{_KIND_ZH.get(source.kind, source.kind)}：{where}{detail}"
    if source.kind == "sample":
        origin += "。这不是完整的数据集，在它上面得到的结果说明不了真实模型的水平"
    if hasattr(data, "label_names"):  # Examples: (text, label) rows
        counts = Counter(label for _, label in data)
        names = [_LABELS_ZH.get(n, n) for n in data.label_names]
        parts = "，".join(f"{names[k] if 0 <= k < len(names) else k} {counts[k]:,}" for k in sorted(counts))
        return f"{name} {_SPLITS_ZH.get(data.split, data.split)}：{len(data):,} 个样本（{parts}），{origin}。"
    if isinstance(data, str):  # Text
        return f"{name}：{len(data):,} 个字符，其中不同的 {len(set(data))} 个，{origin}。"
    english = len({en for en, _ in data})
    return f"{name}：{len(data):,} 个句对，其中不同的英文句子 {english:,} 个，{origin}。"
