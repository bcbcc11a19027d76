"""Which datasets the course uses, where they live on disk (:func:`data_dir`), their size and sha256."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Resource:
    """One file of a dataset: ``path`` (``/``-separated, in the data folder), ``size`` and ``sha256`` of the file *as
    it lies there*. ``urls`` are tried in order (none: only a data folder has it); ``derive`` maps downloads to it."""

    name: str
    path: str
    size: int
    sha256: str
    title: str
    source: str
    urls: tuple[str, ...] = ()
    how_to_get: str = ""
    derive: Callable[[bytes], bytes] | None = None
    rows: int | None = None  # rows of the course's copy, to say how far another file differs


def _normalize_chnsenticorp(raw: bytes) -> bytes:
    """Upstream CSV -> course layout: UTF-8 without BOM, ``\\n`` line ends (stable sha256 if a mirror re-saved the
    file on another system), no ``label,review`` header row."""
    text = raw.decode("utf-8-sig").replace("\r\n", "\n")
    first, _, rest = text.partition("\n")
    if first.strip().lower() == "label,review":
        text = rest
    return (text.rstrip("\n") + "\n").encode("utf-8")


_SST = "Stanford Sentiment Treebank (Socher et al. 2013)"
_GLUE_NOTE = ("The same sentences (train and dev, with labels) are in GLUE's SST-2.zip, resource 'sst2-glue', which "
              "load_sst2() downloads when this file is missing; GLUE withholds the test labels.")

REGISTRY: dict[str, Resource] = {r.name: r for r in [
    Resource("tiny-shakespeare", "tinyshakespeare/input.txt", 1_115_394,
             "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
             "tiny-shakespeare: 1,115,394 characters of Shakespeare's plays (65 distinct characters)",
             "Andrej Karpathy's char-rnn repository; the text is in the public domain",
             urls=("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",)),
    Resource("sst2-train", "sst2/train.tsv", 3_806_081,
             "e981ceb4fe6c9acd1c79851d0d091b9e78103f1f2a399ca83dda27915d41c56c",
             "SST-2 train: 67,349 movie-review phrases, 'label<TAB>sentence', 0 = negative, 1 = positive",
             f"{_SST} as packaged by GLUE", how_to_get=_GLUE_NOTE),
    Resource("sst2-dev", "sst2/dev.tsv", 94_414, "84207e6be5873fb18db798cc6faec86871f5a426554650ff64a1c34e87665f6f",
             "SST-2 dev: 872 sentences, 'label<TAB>content' (the split papers report)",
             f"{_SST} as packaged by GLUE", how_to_get=_GLUE_NOTE),
    Resource("sst2-test", "sst2/test.tsv", 193_576, "fcd46f967b7b8efd8b5398481dadf873886298d092195167af907fd532e81e1c",
             "SST-2 test with labels: 1,821 sentences, 'label<TAB>content'",
             f"{_SST}; GLUE's public test split has no labels",
             how_to_get="GLUE's SST-2.zip has this split without labels: a labelled copy is only in a data folder."),
    Resource("sst2-glue", "sst2/SST-2.zip", 7_439_277,
             "d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa",
             "GLUE SST-2.zip: SST-2/train.tsv and SST-2/dev.tsv ('sentence<TAB>label'), SST-2/test.tsv (no labels)",
             "GLUE benchmark (Wang et al. 2018); the treebank is Socher et al. 2013",
             urls=("https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",)),
    Resource("chnsenticorp", "chnsenticorp/ChnSentiCorp_htl_all.csv", 2_904_841,
             "fd9e05bc82672483f7af8f8c46e86919aeea1852a22e971efdde8522d7b78f50",
             "ChnSentiCorp hotel reviews: 7,766 Chinese reviews, 'label,review' without a header row "
             "(5,322 positive / 2,444 negative)",
             "ChnSentiCorp (Tan Songbo), as published in the SophonPlus/ChineseNlpCorpus repository",
             urls=("https://raw.githubusercontent.com/SophonPlus/ChineseNlpCorpus/master/datasets/"
                   "ChnSentiCorp_htl_all/ChnSentiCorp_htl_all.csv",),
             how_to_get="The upstream CSV has a 'label,review' header line; the course's copy drops it.",
             derive=_normalize_chnsenticorp),
    Resource("imdb-subset", "imdb_subset/IMDB Dataset.csv", 3_261_893,
             "27eb2025b12430a31ade5f433f204a2ccfaad0d15e962c5f832848e6fd4c46da",
             "First 2,500 rows of the 50k-review 'IMDB Dataset.csv', 'review,sentiment' with a header row",
             "Reviews from Maas et al. 2011 in the widely shared 50k-row CSV",
             how_to_get="No public URL: only a data folder has these bytes."),
    Resource("tatoeba-cmn", "tatoeba_cmn/cmn.txt", 1_976_573,
             "d8719bfc39a689b8040652557e73a9117dae47691011c8e9a6b3038efe97dc97",
             "Tatoeba English-Chinese pairs: 32,028 rows, 'english<TAB>chinese' (much of the Chinese traditional)",
             "Tatoeba (tatoeba.org, CC BY 2.0 FR) as packaged in cmn-eng.zip by manythings.org/anki",
             how_to_get="No public copy has these bytes: https://www.manythings.org/anki/cmn-eng.zip grows and adds "
             "an attribution column; load_tatoeba_cmn() downloads it and reads it (or any cmn.txt) once checked.",
             rows=32_028),
]}


def get_resource(name: str) -> Resource:
    """Return the :class:`Resource` called ``name``; ``ValueError`` listing the known names otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}: choose one of {', '.join(sorted(REGISTRY))}") from None


def _expand(path: Path, what: str) -> Path:
    try:  # pathlib says only "Could not determine home directory" for ~nosuchuser
        return path.expanduser()
    except RuntimeError:
        raise ValueError(f"{what}: there is no user {path.parts[0][1:]!r} on this machine: give an absolute path (or "
                         "~/... for your own home folder)") from None


def data_dir(path: str | os.PathLike | None = None) -> Path:
    """The data folder: ``path``, else ``$COURSE_DATA_DIR`` (a relative one also from each parent folder, as
    notebooks run inside ``notebooks/en``), else ``$XDG_CACHE_HOME/transformers-course``; not created here."""
    if path is not None:
        return _expand(Path(path), "data_dir").absolute()
    env = os.environ.get("COURSE_DATA_DIR", "").strip()
    if env:
        chosen = _expand(Path(env), f"COURSE_DATA_DIR={env!r}")
        if not chosen.is_absolute() and not chosen.exists():
            chosen = next((up / chosen for up in Path.cwd().parents if (up / chosen).exists()), chosen)
        return chosen.absolute()
    cache = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = _expand(Path(cache), f"XDG_CACHE_HOME={cache!r}") if cache else Path.home() / ".cache"
    return (base / "transformers-course").absolute()
