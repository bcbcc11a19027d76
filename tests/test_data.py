"""Tests for course_utils.data: data folder, checksums, downloads, offline messages, loaders and fallbacks.

Downloads are tested against a local http.server on 127.0.0.1 and file:// URLs (no internet in CI); the loaders
against the real files in ../shared/data when that folder exists (skipped otherwise).
"""

import functools
import hashlib
import http.server
import pickle
import re
import threading
import traceback
import urllib.error
import warnings
import zipfile
from pathlib import Path

import pytest

from course_utils import data, safe_files
from course_utils.data import __main__ as cli
from course_utils.data import datasets, download, registry
from course_utils.data.registry import Resource

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_shared = pytest.mark.skipif(not (SHARED / "README.md").is_file(), reason="no ../shared/data here")


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No test may see the developer's data folder or write to the real cache."""
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    monkeypatch.delenv("COURSE_OFFLINE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    safe_files._SHA256_CACHE.clear()


def toy(monkeypatch, content: bytes, name="toy", path="toy/file.txt", **kw) -> Resource:
    """Register a small resource whose published checksum is that of ``content``."""
    res = Resource(name, path, len(content), sha(content), "a toy dataset", "made by the test", **kw)
    monkeypatch.setitem(registry.REGISTRY, name, res)
    return res


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        if self.path.startswith("/truncated/"):  # announce the full size, send half, hang up
            body = (Path(self.directory) / self.path.split("/", 2)[2]).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture
def server(tmp_path):
    """A static file server on 127.0.0.1 serving ``tmp_path/www``; yields (folder, base URL)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(_Handler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".part"))


# ------------------------------------------------------------------------------------------- data folder
def test_data_dir_resolution_order(monkeypatch, tmp_path):
    assert data.data_dir() == tmp_path / "xdg-cache" / "transformers-course"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data.data_dir() == tmp_path / "home" / ".cache" / "transformers-course"
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "env"))
    assert data.data_dir() == tmp_path / "env"
    assert data.data_dir(tmp_path / "arg") == tmp_path / "arg"


def test_relative_course_data_dir_is_found_from_a_subfolder(monkeypatch, tmp_path):
    # A notebook runs in <project>/notebooks/en while COURSE_DATA_DIR=data was meant from <project>.
    (tmp_path / "data").mkdir()
    (tmp_path / "notebooks" / "en").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "notebooks" / "en")
    monkeypatch.setenv("COURSE_DATA_DIR", "data")
    assert data.data_dir() == tmp_path / "data"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    monkeypatch.setenv("COURSE_DATA_DIR", "here")
    assert data.data_dir() == tmp_path / "here"


def test_course_data_dir_is_honoured_by_fetch(monkeypatch, tmp_path):
    toy(monkeypatch, b"hello\n")
    (tmp_path / "d" / "toy").mkdir(parents=True)
    (tmp_path / "d" / "toy" / "file.txt").write_bytes(b"hello\n")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "d"))
    assert data.fetch("toy") == tmp_path / "d" / "toy" / "file.txt"


@needs_shared
def test_registry_matches_shared_readme():
    readme = (SHARED / "README.md").read_text()
    table = dict(re.findall(r"^\| `([^`]+)` \|.*?\| ([0-9a-f]{64}) \|", readme, flags=re.M))
    by_path = {r.path: r for r in data.REGISTRY.values()}
    assert set(table) <= set(by_path)
    for path, digest in table.items():
        assert by_path[path].sha256 == digest, path
        assert by_path[path].size == (SHARED / path).stat().st_size, path


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(ValueError, match="tiny-shakespeare"):
        data.fetch("shakespeare")


# --------------------------------------------------------------------------------------------- checksums
def test_present_file_is_verified_once_then_cached_until_it_changes(monkeypatch, tmp_path):
    toy(monkeypatch, b"abc" * 100)
    path = tmp_path / "toy" / "file.txt"
    path.parent.mkdir()
    path.write_bytes(b"abc" * 100)
    calls = []
    real = safe_files.sha256_file
    monkeypatch.setattr(safe_files, "sha256_file", lambda p: calls.append(p) or real(p))
    assert data.fetch("toy", data_dir=tmp_path) == path
    assert len(calls) == 1
    data.fetch("toy", data_dir=tmp_path)
    assert len(calls) == 1
    path.write_bytes(b"abd" * 100)  # same size, new content, new mtime
    with pytest.raises(data.ChecksumMismatch):
        data.fetch("toy", data_dir=tmp_path)
    assert len(calls) == 2


def test_truncated_file_gives_clear_error_with_the_fix(monkeypatch, tmp_path):
    good = b"0123456789" * 50
    res = toy(monkeypatch, good)
    path = tmp_path / "toy" / "file.txt"
    path.parent.mkdir()
    path.write_bytes(good[:123])
    with pytest.raises(data.ChecksumMismatch) as info:
        data.fetch("toy", data_dir=tmp_path)
    msg = str(info.value)
    assert "corrupt or truncated" in msg and str(path) in msg
    assert res.sha256 in msg and sha(good[:123]) in msg and "500 bytes" in msg and "123 bytes" in msg
    assert "delete it" in msg and "download=True" in msg
    assert (info.value.expected_size, info.value.actual_size) == (500, 123)
    assert info.value.actual_sha256 == sha(good[:123])


def test_corruption_after_a_good_check_is_still_caught(monkeypatch, tmp_path):
    toy(monkeypatch, b"x" * 64)
    path = tmp_path / "toy" / "file.txt"
    path.parent.mkdir()
    path.write_bytes(b"x" * 64)
    data.fetch("toy", data_dir=tmp_path)
    path.write_bytes(b"x" * 63)
    with pytest.raises(data.ChecksumMismatch, match="truncated"):
        data.fetch("toy", data_dir=tmp_path)


# ------------------------------------------------------------------------------------ offline / failures
def _no_network(*args, **kwargs):
    raise AssertionError("urlopen must not be called")


@pytest.mark.parametrize("how", ["env", "argument"])
def test_offline_mode_explains_how_to_get_the_data(monkeypatch, tmp_path, how):
    toy(monkeypatch, b"data", urls=("https://example.org/toy.txt",))
    monkeypatch.setattr(download.urllib.request, "urlopen", _no_network)
    if how == "env":
        monkeypatch.setenv("COURSE_OFFLINE", "1")
    with pytest.raises(data.DataUnavailable) as info:
        data.fetch("toy", data_dir=tmp_path, download=how != "argument")
    msg = str(info.value)
    assert ("COURSE_OFFLINE" if how == "env" else "download=False") in msg
    assert "https://example.org/toy.txt" in msg and str(tmp_path / "toy" / "file.txt") in msg
    assert "COURSE_DATA_DIR" in msg and sha(b"data") in msg
    assert isinstance(info.value, RuntimeError) and not (tmp_path / "toy").exists()


@pytest.mark.parametrize("error", [urllib.error.URLError("[Errno -3] name resolution failed"),
                                   TimeoutError("timed out"), OSError("network is unreachable"),
                                   ConnectionResetError("reset by peer")])
def test_network_failure_is_a_clear_data_unavailable(monkeypatch, tmp_path, error):
    toy(monkeypatch, b"data", urls=("https://example.org/a.txt", "https://mirror.example.org/a.txt"))

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(download.urllib.request, "urlopen", fail)
    with pytest.raises(data.DataUnavailable) as info:
        data.fetch("toy", data_dir=tmp_path, progress=False)
    msg = str(info.value)
    assert "download failed" in msg and str(error) in msg
    assert "https://example.org/a.txt" in msg and "https://mirror.example.org/a.txt" in msg
    assert "COURSE_DATA_DIR" in msg and "save it as" in msg
    shown = "".join(traceback.format_exception(info.value))  # what a notebook would print
    assert "During handling" not in shown and "direct cause" not in shown  # no urllib traceback attached
    assert leftovers(tmp_path) == [] and not (tmp_path / "toy" / "file.txt").exists()


def test_resource_without_url_says_where_to_put_the_file(tmp_path):
    with pytest.raises(data.DataUnavailable, match="no public download URL") as info:
        data.fetch("imdb-subset", data_dir=tmp_path)
    assert str(tmp_path / "imdb_subset" / "IMDB Dataset.csv") in str(info.value)


# ------------------------------------------------------------------------------------------- downloads
def test_download_from_local_server_with_progress_bar(monkeypatch, tmp_path, server, capsys):
    www, base = server
    content = bytes(range(256)) * 2000  # 512 KB: several chunks
    (www / "blob.bin").write_bytes(content)
    toy(monkeypatch, content, urls=(f"{base}/missing.bin", f"{base}/blob.bin"))  # first mirror is a 404
    path = data.fetch("toy", data_dir=tmp_path)
    assert path.read_bytes() == content
    assert "file.txt" in capsys.readouterr().err  # the tqdm bar, labelled with the file name
    assert leftovers(tmp_path) == []
    calls = []
    monkeypatch.setattr(download, "sha256_file", lambda p: calls.append(p))
    assert data.fetch("toy", data_dir=tmp_path, download=False) == path and calls == []  # hash remembered


def test_failed_download_leaves_no_partial_file_and_a_retry_works(monkeypatch, tmp_path, server):
    www, base = server
    content = b"A" * 300_000
    (www / "big.bin").write_bytes(content)
    toy(monkeypatch, content, urls=(f"{base}/truncated/big.bin",))
    with pytest.raises(data.DataUnavailable, match="download failed"):
        data.fetch("toy", data_dir=tmp_path, progress=False)
    assert not (tmp_path / "toy" / "file.txt").exists() and leftovers(tmp_path) == []
    toy(monkeypatch, content, urls=(f"{base}/big.bin",))
    assert data.fetch("toy", data_dir=tmp_path, progress=False).read_bytes() == content


def test_downloaded_bytes_with_wrong_checksum_are_not_kept(monkeypatch, tmp_path, server):
    www, base = server
    (www / "page.html").write_bytes(b"<html>captive portal</html>")
    toy(monkeypatch, b"the real data", urls=(f"{base}/page.html",))
    with pytest.raises(data.ChecksumMismatch, match="Nothing was saved") as info:
        data.fetch("toy", data_dir=tmp_path, progress=False)
    assert info.value.actual_sha256 == sha(b"<html>captive portal</html>")
    assert not (tmp_path / "toy" / "file.txt").exists() and leftovers(tmp_path) == []


def test_derived_download_drops_header_bom_and_crlf(monkeypatch, tmp_path):
    course_copy = '1,"很好,干净"\n0,太吵\n'.encode()
    upstream = b"\xef\xbb\xbf" + b"label,review\r\n" + course_copy.replace(b"\n", b"\r\n")
    (tmp_path / "up.csv").write_bytes(upstream)
    res = data.get_resource("chnsenticorp")
    toy(monkeypatch, course_copy, name="chnsenticorp", path=res.path,
        urls=((tmp_path / "up.csv").as_uri(),), derive=res.derive)
    assert data.fetch("chnsenticorp", data_dir=tmp_path / "d", progress=False).read_bytes() == course_copy
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe not utf-8")  # undecodable: wrong content, not a crash
    toy(monkeypatch, course_copy, name="chnsenticorp", path=res.path,
        urls=((tmp_path / "bin.csv").as_uri(),), derive=res.derive)
    with pytest.raises(data.ChecksumMismatch, match="Nothing was saved"):
        data.fetch("chnsenticorp", data_dir=tmp_path / "e", progress=False)
    assert leftovers(tmp_path / "e") == []


def _zip(path: Path, *members) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, content, mode in members:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, content)
    return path


def test_sst2_train_and_dev_come_from_the_glue_zip_when_needed(monkeypatch, tmp_path):
    buf = tmp_path / "SST-2.zip"
    _zip(buf, ("SST-2/dev.tsv", 'sentence\tlabel\nit \'s a "gem" . \t1\ndull , dull . \t0\n', 0o100644),
         ("SST-2/train.tsv", "sentence\tlabel\nfine \t1\n", 0o100644),
         ("SST-2/test.tsv", "index\tsentence\n0\tno labels here\n", 0o100644))
    toy(monkeypatch, buf.read_bytes(), name="sst2-glue", path="sst2/SST-2.zip", urls=(buf.as_uri(),))
    dev = data.load_sst2("dev", data_dir=tmp_path / "d", progress=False)
    assert list(dev) == [('it \'s a "gem" .', 1), ("dull , dull .", 0)]
    assert dev.source.kind == "downloaded" and "SST-2/dev.tsv" in str(dev.source)
    assert list(data.load_sst2("train", data_dir=tmp_path / "d")) == [("fine", 1)]
    with pytest.raises(data.DataUnavailable, match="without labels"):
        data.load_sst2("test", data_dir=tmp_path / "d", fallback=False)
    with pytest.raises(ValueError, match="'dev'"):
        data.load_sst2("validation")


# ------------------------------------------------------------------------------------------ fallbacks
@pytest.mark.parametrize("loader, size", [
    (lambda: data.load_sst2("train"), 48), (lambda: data.load_sst2("dev"), 12),
])
def test_offline_loaders_fall_back_to_the_bundled_sample_with_one_warning(monkeypatch, loader, size):
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = loader()
    assert len(caught) == 1 and issubclass(caught[0].category, data.SampleDataWarning)
    msg = str(caught[0].message)
    assert "tiny bundled sample" in msg and "COURSE_DATA_DIR" in msg and "fallback=False" in msg
    assert len(rows) == size and rows.source.kind == "sample" and "sample" in rows.describe()
    assert {label for _, label in rows} == {0, 1} and all(text.strip() for text, _ in rows)


def test_fallback_samples_content_and_fallback_false(monkeypatch):
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    with pytest.warns(data.SampleDataWarning, match="tiny-shakespeare"):
        text = data.load_tiny_shakespeare()
    assert 10_000 < len(text) < 50_000 and text.count("\n") > 250 and text.source.kind == "sample"
    again = pickle.loads(pickle.dumps(text))  # DataLoader workers pickle what they are given
    assert again == text and again.source == text.source
    with pytest.warns(data.SampleDataWarning):
        dev = data.load_sst2("dev")
    again = pickle.loads(pickle.dumps(dev))
    assert again == dev and (again.name, again.split, again.source) == (dev.name, dev.split, dev.source)
    for load in (data.load_tiny_shakespeare, data.load_sst2):
        with pytest.raises(data.DataUnavailable):
            load(fallback=False)


def test_corrupt_file_is_never_replaced_by_the_sample(tmp_path):
    path = tmp_path / "tinyshakespeare" / "input.txt"
    path.parent.mkdir()
    path.write_text("First Citizen:\nBefore we proceed")
    with pytest.raises(data.ChecksumMismatch, match="truncated"):
        data.load_tiny_shakespeare(data_dir=tmp_path, fallback=True)


# -------------------------------------------------------------------------------------------- parsers
def test_parsers_handle_layouts_quotes_and_errors(tmp_path):
    assert datasets.parse_label_tsv("label\tsentence\r\n1\ta \"b\"\r\n\r\n", "x") == [('a "b"', 1)]
    with pytest.raises(ValueError, match="line 3"):
        datasets.parse_label_tsv("label\tcontent\n0\tok\n2\tbad label\n", "x")
    with pytest.raises(ValueError, match="header"):
        datasets.parse_label_tsv("a\tb\n", "x")


def test_train_test_split_is_deterministic_and_disjoint(monkeypatch):
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    with pytest.warns(data.SampleDataWarning):
        rows = data.load_sst2("train")
    train, test = data.train_test_split(rows, test_size=0.25, seed=1)
    assert (len(train), len(test)) == (36, 12) and sorted(train + test) == sorted(rows)
    assert data.train_test_split(rows, 0.25, seed=1)[1] == test and test.source == rows.source
    with pytest.raises(ValueError, match="fraction"):
        data.train_test_split(rows, test_size=10)


def test_cli_lists_status(monkeypatch, tmp_path, capsys):
    toy(monkeypatch, b"ok")
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "file.txt").write_bytes(b"not ok")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"toy\s+CORRUPT", out) and re.search(r"tiny-shakespeare\s+missing", out)


# ------------------------------------------------------------------------------------------- real data
@needs_shared
def test_real_files_load_with_the_documented_counts():
    kw = dict(data_dir=SHARED, download=False, fallback=False)
    text = data.load_tiny_shakespeare(**kw)
    assert len(text) == 1_115_394 and len(set(text)) == 65 and text.startswith("First Citizen:")
    sizes = {s: len(data.load_sst2(s, **kw)) for s in ("train", "dev", "test")}
    assert sizes == {"train": 67_349, "dev": 872, "test": 1_821}
    for name in ("chnsenticorp", "imdb-subset"):  # fetched and checked, for the student's own experiments
        assert data.fetch(name, data_dir=SHARED, download=False).stat().st_size == data.get_resource(name).size
