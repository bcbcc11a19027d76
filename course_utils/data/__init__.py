"""The course's data layer: find, download, verify and load the datasets (docs/data.md), e.g.
``data.load_sst2("dev")``: ``(sentence, label)`` pairs whose ``.describe()`` says how many and from where.

Files live in :func:`data_dir`, checked against their sha256 (:func:`fetch`, :class:`ChecksumMismatch`). Offline
(``COURSE_OFFLINE=1``, ``download=False``, no network) a missing file raises :class:`DataUnavailable` saying where to
get it, or the loaders (``fallback=True``) return a tiny sample with a :class:`SampleDataWarning`.
``python -m course_utils.data`` lists the datasets; ``... fetch NAME`` downloads one.
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
