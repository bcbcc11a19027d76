"""The course's data layer (docs/data.md): find, download, verify (sha256) and load the datasets, e.g.
``data.load_sst2("dev")``; ``python -m course_utils.data`` lists them, ``... fetch NAME`` downloads one."""

from .datasets import DataSource, Examples, Text, load_sst2, load_tiny_shakespeare, train_test_split
from .download import ChecksumMismatch, DataUnavailable, downloads_allowed, fetch, how_to_get, sha256_file
from .registry import REGISTRY, Resource, data_dir, get_resource
from .samples import SampleDataWarning

__all__ = ["REGISTRY", "Resource", "data_dir", "get_resource", "fetch", "how_to_get", "sha256_file",
           "downloads_allowed", "DataUnavailable", "ChecksumMismatch", "load_tiny_shakespeare", "load_sst2",
           "train_test_split", "DataSource", "Examples", "Text", "SampleDataWarning"]
