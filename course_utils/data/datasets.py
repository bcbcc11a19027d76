"""Loaders returning lists and strings whose ``.source`` and ``.describe()`` say where the data came from; with
``fallback=True`` a tiny bundled sample (and a warning) stands in for missing data, never for a corrupt file."""

from __future__ import annotations

import os
import random
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import samples
from .download import DataUnavailable, fetch
from .registry import data_dir as _resolve_dir
from .registry import get_resource

SST2_SPLITS = ("train", "dev", "test")
LABEL_NAMES = ("negative", "positive")


@dataclass(frozen=True)
class DataSource:
    """Where a loader's data came from: ``kind`` is ``"data_dir"``, ``"downloaded"`` (by this call) or ``"sample"``."""

    kind: str
    location: str
    detail: str = ""

    def __str__(self) -> str:
        what = {"data_dir": "data folder", "downloaded": "downloaded to", "sample": "TINY bundled sample"}
        detail = f" ({self.detail})" if self.detail else ""
        return f"{what.get(self.kind, self.kind)}: {self.location}{detail}"


class Examples(list):
    """A ``list`` of ``(text, label)`` pairs that also knows its ``name``, ``split`` and ``source``."""

    def __init__(self, rows=(), name: str = "", split: str = "", source: DataSource | None = None,
                 label_names: tuple[str, ...] = LABEL_NAMES):
        super().__init__(rows)
        self.name, self.split, self.source, self.label_names = name, split, source, label_names

    def describe(self) -> str:
        """e.g. ``SST-2 [dev]: 872 examples (negative 428, positive 444) from data folder: …/dev.tsv``."""
        counts = Counter(label for _, label in self)
        parts = ", ".join(f"{self.label_names[k] if 0 <= k < len(self.label_names) else k} {counts[k]:,}"
                          for k in sorted(counts))
        return f"{self.name} [{self.split}]: {len(self):,} examples ({parts}) from {self.source}"


class Text(str):
    """A ``str`` that also knows its ``name`` and ``source`` (slicing gives a plain ``str``)."""

    def __new__(cls, value: str = "", name: str = "", source: DataSource | None = None):
        obj = super().__new__(cls, value)
        obj.name, obj.source = name, source
        return obj

    def describe(self) -> str:
        return f"{self.name}: {len(self):,} characters, {len(set(self))} distinct, from {self.source}"


def _fetch_with_kind(name: str, data_dir, download: bool, progress: bool) -> tuple[Path, str]:
    """:func:`fetch` plus ``"data_dir"`` or ``"downloaded"``."""
    existed = (_resolve_dir(data_dir) / get_resource(name).path).is_file()
    return fetch(name, data_dir, download, progress), "data_dir" if existed else "downloaded"


def parse_label_tsv(text: str, where: str) -> list[tuple[str, int]]:
    """Rows of a TSV whose header is ``label<TAB>sentence`` (the course's) or ``sentence<TAB>label`` (GLUE's). Tabs
    only, no CSV quoting (SST sentences contain bare ``"``); fields stripped (GLUE leaves a space before each tab)."""
    lines = text.split("\n")
    header = [h.strip().lower() for h in lines[0].rstrip("\r").split("\t")]
    if "label" not in header or len(header) != 2:
        raise ValueError(f"{where}: expected header 'label<TAB>sentence' or 'sentence<TAB>label': {lines[0][:80]!r}")
    li = header.index("label")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2 or fields[li].strip() not in ("0", "1"):
            raise ValueError(f"{where}, line {number}: expected '<0 or 1><TAB><text>', got {line[:80]!r}")
        sentence = fields[1 - li].strip()
        if sentence:
            rows.append((sentence, int(fields[li])))
    return rows


def load_tiny_shakespeare(data_dir: str | os.PathLike | None = None, fallback: bool = True,
                          download: bool = True, progress: bool = True) -> Text:
    """The tiny-shakespeare corpus as one string (1,115,394 characters), or the bundled prose sample."""
    try:
        path, kind = _fetch_with_kind("tiny-shakespeare", data_dir, download, progress)
    except DataUnavailable as exc:
        if not fallback:
            raise
        text = samples.sample_text()
        samples.warn_sample("tiny-shakespeare", "prose_en.txt", f"{len(text):,} characters", exc)
        return Text(text, "tiny-shakespeare (sample)",
                    DataSource("sample", samples.sample_location("prose_en.txt"), "original prose, CC0"))
    with open(path, encoding="utf-8", newline="") as f:  # newline="": keep the text byte-for-byte
        return Text(f.read(), "tiny-shakespeare", DataSource(kind, str(path)))


def load_sst2(split: str = "train", data_dir: str | os.PathLike | None = None, fallback: bool = True,
              download: bool = True, progress: bool = True) -> Examples:
    """SST-2 ``split`` (``train`` 67,349 / ``dev`` 872 / ``test`` 1,821) as ``(sentence, label)`` pairs from
    ``sst2/<split>.tsv``, else (train, dev) GLUE's ``SST-2.zip``; the labelled test split only from a data folder."""
    if split not in SST2_SPLITS:
        raise ValueError(f"split must be one of {SST2_SPLITS}, got {split!r} (SST-2's validation split is 'dev')")
    try:
        path, kind = _fetch_with_kind(f"sst2-{split}", data_dir, download, progress)  # never downloads
        with open(path, encoding="utf-8", newline="") as f:
            return Examples(parse_label_tsv(f.read(), str(path)), "SST-2", split, DataSource(kind, str(path)))
    except DataUnavailable as exc:
        missing = exc
    if split != "test":
        try:
            path, kind = _fetch_with_kind("sst2-glue", data_dir, download, progress)
            member = f"SST-2/{split}.tsv"
            with zipfile.ZipFile(path) as zf:
                rows = parse_label_tsv(zf.read(member).decode("utf-8"), f"{path}:{member}")
            return Examples(rows, "SST-2", split, DataSource(kind, str(path), f"member {member}"))
        except DataUnavailable as exc:
            labelled = _resolve_dir(data_dir) / get_resource(f"sst2-{split}").path
            missing = DataUnavailable(f"{exc}\nAlternatively, put the labelled 'label<TAB>sentence' copy at "
                                      f"{labelled} (see docs/data.md).")
    if not fallback:
        raise missing
    rows, file = samples.sample_sentiment(split), "sentiment_en.tsv"
    samples.warn_sample("SST-2", file, f"{len(rows)} sentences", missing)
    detail = f"split {split!r}: every {samples.HOLDOUT_EVERY}th row is held out"
    return Examples(rows, "SST-2 (sample)", split, DataSource("sample", samples.sample_location(file), detail))


def train_test_split(examples: Examples, test_size: float = 0.2, seed: int = 0) -> tuple[Examples, Examples]:
    """Shuffle with ``seed`` and split off ``test_size`` (a fraction) of the examples; sources are kept."""
    if isinstance(test_size, bool) or not isinstance(test_size, (int, float)) or not 0 < test_size < 1:
        raise ValueError(f"test_size must be a fraction between 0 and 1, got {test_size!r}")
    if len(examples) < 2:
        raise ValueError(f"train_test_split needs at least 2 examples (one to train on, one to test), got "
                         f"{len(examples)}: load more data")
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    n_test = min(len(order) - 1, max(1, round(len(order) * test_size)))  # both parts keep at least one row
    meta = dict(name=getattr(examples, "name", ""), source=getattr(examples, "source", None))
    return (Examples([examples[i] for i in order[n_test:]], split="train", **meta),
            Examples([examples[i] for i in order[:n_test]], split="test", **meta))
