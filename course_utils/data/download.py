"""Get a dataset file into the data folder, intact, or explain in plain words how to get it.

``fetch(name)`` is the one entry point: a file already in the data folder is checked against its sha256; a
missing one is downloaded (with a progress bar) into a temporary file *in the same folder*, checked, and only
then moved into place with ``os.replace``, which is atomic: an interrupted download never leaves a half file
at the final path.

Hashing a large file takes time, so a successful check is remembered in a small sidecar file
(``.<file>.sha256.json``) keyed by size, modification and change times (``st_ctime`` cannot be set back by
``touch`` or ``os.utime``), device and inode, plus a hash of the file's first and last 64 KiB that is read
again at every use; any change to the file invalidates it.
Read-only data folders (CI's shared copy) skip the sidecar and remember the check for this process only.
A folder that cannot be written (read-only, full) ends in :class:`DataUnavailable` naming the fix, so the
loaders fall back to their sample; a failed download removes the folders it created.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from tqdm.auto import tqdm

from .registry import Resource, get_resource
from .registry import data_dir as _resolve_dir

TIMEOUT_S = 60  # seconds without a byte before a download is abandoned
_CHUNK = 1 << 16
_verified: dict[tuple, str] = {}  # (path, size, mtime_ns, ctime_ns, dev, inode, sample) -> sha256, this process
_SAMPLE = 1 << 16  # bytes hashed at each end of a file for the quick re-check


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
    offline = os.environ.get("COURSE_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")
    return bool(download) and not offline


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in chunks so big files do not need to fit in memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_name(f".{path.name}.sha256.json")


def _state(path: Path) -> tuple:
    """What must be unchanged for an earlier hash of ``path`` to be trusted: the metadata no ordinary tool
    resets (ctime, device, inode) besides size and mtime, and a hash of the first and last 64 KiB."""
    st = path.stat()
    quick = hashlib.sha256()
    with open(path, "rb") as f:
        quick.update(f.read(_SAMPLE))
        if st.st_size > _SAMPLE:
            f.seek(max(_SAMPLE, st.st_size - _SAMPLE))
            quick.update(f.read(_SAMPLE))
    return (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_ino, quick.hexdigest())


_FIELDS = ("size", "mtime_ns", "ctime_ns", "dev", "inode", "sample")


def _cached_sha256(path: Path) -> str:
    """sha256 of ``path``, reusing an earlier result when nothing about the file has changed."""
    key = _state(path)
    if key in _verified:
        return _verified[key]
    try:
        saved = json.loads(_sidecar(path).read_text())
        if [saved[name] for name in _FIELDS] == list(key[1:]) and isinstance(saved["sha256"], str):
            _verified[key] = saved["sha256"]
            return saved["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no sidecar, an unreadable one or one from an older version: hash again
    return _remember(path, sha256_file(path))


def _remember(path: Path, digest: str) -> str:
    """Remember ``digest`` for the current state of ``path``: in memory, and on disk if writable."""
    key = _state(path)
    _verified[key] = digest
    try:
        record = dict(zip(_FIELDS, key[1:]), sha256=digest)
        _sidecar(path).write_text(json.dumps(record))
    except OSError:
        pass  # read-only folder: the in-process cache is enough
    return digest


def _mismatch(res: Resource, path: Path, size: int, digest: str,
              downloaded_from: str | None) -> ChecksumMismatch:
    if downloaded_from:
        what = (f"The file downloaded from {downloaded_from} for {res.name!r} is not the published one "
                "(a proxy or captive portal page, an interrupted transfer, or a changed upstream file). "
                "Nothing was saved. Try again later, or get the file another way and put it at the path "
                "below.")
    else:
        what = (f"The file {path} for dataset {res.name!r} is corrupt or truncated: its bytes differ from "
                "the published ones. Fix: delete it and call again with download=True (or re-run the cell), "
                "or replace it with a good copy.")
    message = (f"{what}\n  expected: {res.size:,} bytes, sha256 {res.sha256}\n"
               f"  actual:   {size:,} bytes, sha256 {digest}\n  path:     {path}")
    return ChecksumMismatch(message, path, (res.size, res.sha256), (size, digest))


def verify(res: Resource, path: Path) -> Path:
    """Return ``path`` if its bytes are ``res``'s, else raise :class:`ChecksumMismatch` naming the fix."""
    size = path.stat().st_size
    digest = _cached_sha256(path)
    if size != res.size or digest != res.sha256:
        raise _mismatch(res, path, size, digest, None)
    return path


def how_to_get(name: str, data_dir: str | os.PathLike | None = None) -> str:
    """Plain-text instructions for getting dataset ``name`` into the data folder by hand."""
    res = get_resource(name)
    root = _resolve_dir(data_dir)
    lines = [f"How to get {res.title}:"]
    if res.urls:
        lines.append(f"  - with internet access: course_utils.data.fetch({name!r}) downloads it "
                     "(unset COURSE_OFFLINE if it is set);")
        lines.append(f"  - by hand: download {res.urls[0]}" + (" (the course then drops the header line)"
                     if res.derive else "") + f" and save it as {root / res.path};")
    else:
        lines.append("  - there is no public download for these exact bytes: copy the file to "
                     f"{root / res.path};")
    lines.append(f"  - or point COURSE_DATA_DIR at a folder that already contains {res.path} "
                 "(e.g. export COURSE_DATA_DIR=/path/to/data, or set os.environ['COURSE_DATA_DIR'] in a "
                 "notebook).")
    if res.how_to_get:
        lines.append(f"  Note: {res.how_to_get}")
    lines.append(f"  Expected: {res.size:,} bytes, sha256 {res.sha256}. Source: {res.source}.")
    return "\n".join(lines)


def _unavailable(res: Resource, root: Path, reason: str) -> DataUnavailable:
    return DataUnavailable(f"Dataset {res.name!r} is not in the data folder ({root / res.path} is missing) "
                           f"and {reason}.\n" + how_to_get(res.name, root))


def _download_one(url: str, res: Resource, dest: Path, progress: bool) -> None:
    """Download ``url`` to a temp file next to ``dest``, check it, then atomically move it into place."""
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            request = urllib.request.Request(url, headers={"User-Agent": "transformers-course/course_utils"})
            try:
                response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
                raise _NetworkError(exc) from None
            with response:
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                received = 0
                with tqdm(total=total or (None if res.derive else res.size), unit="B", unit_scale=True,
                          unit_divisor=1024, desc=dest.name, disable=not progress, leave=False) as bar:
                    while True:
                        try:
                            chunk = response.read(_CHUNK)
                        except (http.client.HTTPException, OSError) as exc:  # reset, timeout, incomplete read
                            raise _NetworkError(exc) from None
                        if not chunk:
                            break
                        out.write(chunk)  # disk errors (full disk, permissions) propagate as themselves
                        received += len(chunk)
                        bar.update(len(chunk))
            if total is not None and received < total:
                raise _NetworkError(f"connection closed after {received:,} of {total:,} bytes")
        if res.derive is not None:
            try:
                tmp.write_bytes(res.derive(tmp.read_bytes()))
            except ValueError:  # e.g. not UTF-8 at all: certainly not the published file
                raise _mismatch(res, dest, tmp.stat().st_size, sha256_file(tmp), url) from None
        size, digest = tmp.stat().st_size, sha256_file(tmp)
        if size != res.size or digest != res.sha256:
            raise _mismatch(res, dest, size, digest, url)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)  # after a failure: no partial file left behind, even hidden
    _remember(dest, digest)  # the next fetch trusts this hash instead of reading the file again


def fetch(name: str, data_dir: str | os.PathLike | None = None, download: bool = True,
          progress: bool = True) -> Path:
    """Return the local path of dataset file ``name``, downloading it if needed and allowed.

    * present -> its sha256 is checked (cached); a mismatch raises :class:`ChecksumMismatch` with the fix;
    * missing, downloads allowed -> downloaded from the registry's URLs in order, with a progress bar;
    * missing, ``download=False`` or ``COURSE_OFFLINE=1`` or no network -> :class:`DataUnavailable` whose
      message says where to get the file and where to put it.
    """
    res = get_resource(name)
    root = _resolve_dir(data_dir)
    path = root / res.path
    if path.is_file():
        return verify(res, path)
    if not res.urls:
        raise _unavailable(res, root, "it has no public download URL")
    if not downloads_allowed(download):
        why = "download=False was passed" if not download else "downloads are disabled by COURSE_OFFLINE"
        raise _unavailable(res, root, why)
    created = [d for d in (path.parent, *path.parent.parents) if not d.exists()]  # deepest first
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _remove_empty(created)
        raise _unavailable(res, root, f"its folder cannot be created ({exc}); set COURSE_DATA_DIR to a "
                           "writable folder") from None
    failures: list[str] = []
    mismatch: ChecksumMismatch | None = None
    try:
        for url in res.urls:  # mirrors are tried in order; the first intact copy wins
            try:
                _download_one(url, res, path, progress)
                return path
            except _NetworkError as exc:
                failures.append(f"{url}: {exc}")
            except ChecksumMismatch as exc:
                mismatch = exc
                failures.append(f"{url}: wrong content (sha256 {exc.actual_sha256})")
    except OSError as exc:  # the folder, not the network: read-only, full disk, no permission
        _remove_empty(created)
        raise _unavailable(res, root, f"it cannot be saved in {path.parent} ({exc.strerror or exc}): set "
                           "COURSE_DATA_DIR to a writable folder with free space") from None
    _remove_empty(created)  # a mistyped COURSE_DATA_DIR is not left behind by a download that failed
    if mismatch is not None and all("wrong content" in f for f in failures):
        raise mismatch
    # No exception chaining: the reason is in the message, and a urllib traceback would only bury it.
    reasons = "\n    ".join(failures)
    raise _unavailable(res, root, f"the download failed (no internet connection?):\n    {reasons}")


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a failed download created (deepest first), as long as they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (someone else's files), or already gone: leave the rest alone
