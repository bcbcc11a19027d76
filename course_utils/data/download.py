"""Get a dataset file into the data folder, intact (sha256), or say in plain words how to get it; downloads go to a
temporary file beside the target, checked, then ``os.replace``d (never a half file)."""

from __future__ import annotations

import http.client
import os
import tempfile
import urllib.error
import urllib.request
from contextlib import suppress
from pathlib import Path

from tqdm.auto import tqdm

from ..safe_files import file_sha256, sha256_file
from .registry import Resource, get_resource
from .registry import data_dir as _resolve_dir

TIMEOUT_S = 60  # seconds without a byte before a download is abandoned
_HEADERS = {"User-Agent": "Mozilla/5.0 (transformers-course)"}  # some hosts (manythings.org) refuse bare clients
_CHUNK = 1 << 16


class DataUnavailable(RuntimeError):
    """The data is not on disk and cannot be downloaded now (offline, downloads disabled, network failure)."""


class ChecksumMismatch(RuntimeError):
    """A file's bytes differ from the published ones: truncated, corrupted, or a different version."""

    def __init__(self, message: str, path: Path, expected: tuple[int, str], actual: tuple[int, str]):
        super().__init__(message)
        self.path = path
        self.expected_size, self.expected_sha256 = expected
        self.actual_size, self.actual_sha256 = actual


class _NetworkError(Exception):
    """Internal: one URL failed for a network reason (kept apart from disk errors, which must surface)."""


def downloads_allowed(download: bool = True) -> bool:
    """``download`` unless the environment says offline (``COURSE_OFFLINE=1``, ``true`` or ``yes``)."""
    return bool(download) and os.environ.get("COURSE_OFFLINE", "").strip().lower() in ("", "0", "false", "no")


def _expect_published(res: Resource, path: Path, size: int, digest: str, url: str | None = None) -> None:
    """Raise :class:`ChecksumMismatch` naming the fix unless ``size`` and ``digest`` are ``res``'s."""
    if size == res.size and digest == res.sha256:
        return
    what = (f"The file downloaded from {url} for {res.name!r} is not the published one (a captive portal page, a cut "
            "transfer, a changed upstream file). Nothing was saved: try again later, or put a copy at the path below."
            if url else f"The file {path} for dataset {res.name!r} is corrupt or truncated. Fix: delete it and call "
            "again with download=True (or re-run the cell), or replace it with a good copy.")
    raise ChecksumMismatch(f"{what}\n  expected: {res.size:,} bytes, sha256 {res.sha256}\n  actual:   {size:,} "
                           f"bytes, sha256 {digest}\n  path:     {path}", path, (res.size, res.sha256), (size, digest))


def verify(res: Resource, path: Path) -> Path:
    """``path`` if its bytes are ``res``'s, else :class:`ChecksumMismatch`."""
    _expect_published(res, path, path.stat().st_size, file_sha256(path))
    return path


def how_to_get(name: str, data_dir: str | os.PathLike | None = None) -> str:
    """Plain-text instructions for getting dataset ``name`` into the data folder by hand."""
    res, root = get_resource(name), _resolve_dir(data_dir)
    derived = " (the course then drops the header line)" if res.derive else ""
    how = ([f"  - with internet access: course_utils.data.fetch({name!r}) downloads it (unset COURSE_OFFLINE if set);",
            f"  - by hand: download {res.urls[0]}{derived} and save it as {root / res.path};"] if res.urls
           else [f"  - there is no public download for these exact bytes: copy the file to {root / res.path};"])
    note = [f"  Note: {res.how_to_get}"] if res.how_to_get else []
    return "\n".join([f"How to get {res.title}:", *how,
                      f"  - or point COURSE_DATA_DIR at a folder that already contains {res.path} (e.g. export "
                      "COURSE_DATA_DIR=/path/to/data, or set os.environ['COURSE_DATA_DIR'] in a notebook).",
                      *note, f"  Expected: {res.size:,} bytes, sha256 {res.sha256}. Source: {res.source}."])


def _unavailable(res: Resource, root: Path, reason: str) -> DataUnavailable:
    return DataUnavailable(f"Dataset {res.name!r} is not in the data folder ({root / res.path} is missing) "
                           f"and {reason}.\n" + how_to_get(res.name, root))


def _download(url: str, dest: Path, progress: bool, check, expected_size: int | None = None) -> None:
    """Download ``url`` to a temp file next to ``dest``, ``check(tmp)`` it (raises if bad), then move it into place
    atomically. Network failures raise :class:`_NetworkError`; disk errors (full disk, permissions) propagate."""
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                response = urllib.request.urlopen(urllib.request.Request(url, headers=_HEADERS), timeout=TIMEOUT_S)
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
                raise _NetworkError(exc) from None
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            with response, tqdm(total=total or expected_size, unit="B", unit_scale=True, unit_divisor=1024,
                                desc=dest.name, disable=not progress, leave=False) as bar:
                while True:
                    try:
                        chunk = response.read(_CHUNK)
                    except (http.client.HTTPException, OSError) as exc:  # reset, timeout, incomplete read
                        raise _NetworkError(exc) from None
                    if not chunk:
                        break
                    out.write(chunk)
                    bar.update(len(chunk))
            if total is not None and out.tell() < total:
                raise _NetworkError(f"connection closed after {out.tell():,} of {total:,} bytes")
        check(tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)  # after a failure: no partial file left behind, even hidden


def fetch(name: str, data_dir: str | os.PathLike | None = None, download: bool = True, progress: bool = True) -> Path:
    """The local path of dataset file ``name``, its sha256 checked (else :class:`ChecksumMismatch`); a missing file
    is downloaded from the registry's URLs in order when allowed, kept only if intact, else :class:`DataUnavailable`."""
    res, root = get_resource(name), _resolve_dir(data_dir)
    path = root / res.path
    if path.is_file():
        return verify(res, path)
    if not res.urls:
        raise _unavailable(res, root, "it has no public download URL")
    if not downloads_allowed(download):
        raise _unavailable(res, root, "download=False was passed" if not download
                           else "downloads are disabled by COURSE_OFFLINE")
    created = [d for d in (path.parent, *path.parent.parents) if not d.exists()]  # deepest first

    def check(tmp: Path) -> None:  # `url`: the mirror being tried
        if res.derive is not None:
            with suppress(ValueError):  # e.g. not UTF-8 at all: left as is, so the hash check refuses it
                tmp.write_bytes(res.derive(tmp.read_bytes()))
        _expect_published(res, path, tmp.stat().st_size, sha256_file(tmp), url)

    failures, mismatch = [], None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for url in res.urls:  # mirrors are tried in order; the first intact copy wins
            try:
                _download(url, path, progress, check, None if res.derive else res.size)
                return path
            except _NetworkError as exc:
                failures.append(f"{url}: {exc}")
            except ChecksumMismatch as exc:
                mismatch = exc
                failures.append(f"{url}: wrong content (sha256 {exc.actual_sha256})")
    except OSError as exc:  # the folder, not the network: read-only, full disk, no permission
        raise _unavailable(res, root, f"it cannot be saved in {path.parent} ({exc.strerror or exc}): set "
                           "COURSE_DATA_DIR to a writable folder with free space") from None
    finally:  # a failed download leaves no folder it created behind (a mistyped COURSE_DATA_DIR)
        for folder in created:
            try:
                folder.rmdir()
            except OSError:
                break  # not empty (the file just saved, someone else's files) or already gone
    if mismatch is not None and all("wrong content" in f for f in failures):
        raise mismatch
    reasons = "\n    ".join(failures)  # no exception chaining: a urllib traceback would only bury the reason
    raise _unavailable(res, root, f"the download failed (no internet connection?):\n    {reasons}")
