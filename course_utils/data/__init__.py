"""The course's data layer: find, download, verify and load the datasets (see docs/data.md).

Quick start::

    from course_utils import data
    rows = data.load_sst2("dev")          # list of (sentence, label), label 0 = negative, 1 = positive
    print(rows.describe())                # how many, which labels, and where they came from
    text = data.load_tiny_shakespeare()   # one str

* The data folder is ``$COURSE_DATA_DIR`` or ``~/.cache/transformers-course`` (:func:`data_dir`).
* Every file is checked against its published sha256 (:func:`fetch`); a corrupt one raises
  :class:`ChecksumMismatch`, whose message says how to fix it.
* Offline (``COURSE_OFFLINE=1``, ``download=False`` or no network) a missing file raises
  :class:`DataUnavailable` telling where to get it, or, in the loaders with ``fallback=True`` (the default),
  a tiny bundled sample is returned with a :class:`SampleDataWarning`.
* ``python -m course_utils.data`` lists the datasets and their status; ``... fetch NAME`` downloads one.
"""

from .archives import extract_resource, safe_extract
from .datasets import (
    DataSource,
    Examples,
    Text,
    load_chnsenticorp,
    load_imdb,
    load_sst2,
    load_tiny_shakespeare,
    train_test_split,
)
from .download import ChecksumMismatch, DataUnavailable, downloads_allowed, fetch, how_to_get, sha256_file
from .registry import REGISTRY, Resource, data_dir, get_resource
from .samples import SampleDataWarning

__all__ = [
    "REGISTRY", "Resource", "data_dir", "get_resource",
    "fetch", "how_to_get", "sha256_file", "downloads_allowed", "DataUnavailable", "ChecksumMismatch",
    "safe_extract", "extract_resource",
    "load_tiny_shakespeare", "load_sst2", "load_chnsenticorp", "load_imdb", "train_test_split",
    "DataSource", "Examples", "Text", "SampleDataWarning",
]
