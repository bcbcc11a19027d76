"""Atomic, verified torch files: the file layer under ``course_utils.checkpoint`` (Ctrl+C held during a write,
temp file + ``fsync`` + read-back + ``os.replace``, stale temp files removed, zip CRC-32s checked)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import re
import signal
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

__all__ = ["defer_interrupts", "write_atomic", "remove_stale_temps", "fsync_directory", "crc_problem",
           "torch_reason", "was_interrupted"]


@contextlib.contextmanager
def defer_interrupts() -> Iterator[None]:
    """Hold Ctrl+C (SIGINT, Jupyter's stop button) until the block ends, then deliver it (torch's zip writer would leave
    a half-written file). Nested: the outer one gets a held interrupt; outside the main thread: no effect."""
    received: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
        installed = True
    except (ValueError, OSError):  # not the main thread of the main interpreter: no signal can arrive here
        installed = False
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGINT, previous)
    if received:  # the block completed: deliver the held interrupt the way it would have been
        if callable(previous):
            previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt


def was_interrupted(err: BaseException) -> bool:
    """True when ``err`` is, or was caused by, a KeyboardInterrupt (torch wraps it in a RuntimeError)."""
    seen = set()
    while err is not None and id(err) not in seen and not isinstance(err, KeyboardInterrupt):
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return isinstance(err, KeyboardInterrupt)


def remove_stale_temps(path: Path, older_than_s: float = 3600.0) -> None:
    """Delete temp files of ``path`` left by a killed save (SIGKILL skips every cleanup): those whose writer is gone
    or, when that cannot be told (no pid in the name, Windows), older than ``older_than_s``; never a running save's."""
    # ".<name>.<pid>.<random>.tmp" (and ".<name>.<random>.tmp" from older versions, without the pid)
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.(?:(\d+)\.)?[^.]+\.tmp$")
    try:
        matches = [(entry, m) for entry in path.parent.iterdir() if (m := pattern.match(entry.name))]
    except OSError:
        return
    for entry, match in matches:
        pid = int(match.group(1) or 0)
        with contextlib.suppress(OSError):  # vanished meanwhile, not ours to delete, or its writer lives (EPERM)
            if pid == os.getpid():
                continue
            if time.time() - entry.lstat().st_mtime > older_than_s:
                entry.unlink()
            elif pid and os.name == "posix":  # os.kill(pid, 0) would terminate the process on Windows
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:  # the writer is gone
                    entry.unlink()


def write_atomic(path: Path, payload: dict[str, Any]) -> None:
    # A temp file in the same directory: os.replace is then an atomic rename (readers see the old file or the new
    # one, never a partial one). Its name holds our pid, so a later save can tell a killed writer's temp file.
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    except OSError as err:  # name the file asked for, not our hidden temp file (a read-only folder or disk)
        raise OSError(err.errno, f"cannot write {path}: the folder {path.parent} is not writable ({err.strerror}): "
                      "choose a checkpoint path in a folder you can write to") from None
    try:
        with os.fdopen(fd, "wb") as f:
            try:  # Linux: read the umask without changing it (os.umask is process-wide)
                mask = int(re.search(r"^Umask:\s*([0-7]+)", Path("/proc/self/status").read_text(), re.M)[1], 8)
            except (OSError, TypeError):
                mask = os.umask(0o022)
                os.umask(mask)
            os.chmod(tmp_name, 0o666 & ~mask)  # mkstemp makes it 0600; a checkpoint is an ordinary file
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the rename makes them "the" checkpoint
        try:  # read it back (memory-mapped: only the pickle is parsed)
            torch.load(tmp_name, map_location="cpu", weights_only=True, mmap=True)
        except pickle.UnpicklingError as err:
            raise TypeError("checkpoint not written: it holds what torch.load(weights_only=True) cannot read back "
                            f"({torch_reason(err)}); store tensors, numbers, strings, lists and dicts only") from None
        os.replace(tmp_name, path)
    except BaseException as err:  # including KeyboardInterrupt: never leave a stray temp file, never touch `path`
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        if not isinstance(err, KeyboardInterrupt) and was_interrupted(err):
            raise KeyboardInterrupt from None  # torch's "enforce fail at inline_container.cc" was a Ctrl+C
        raise


def fsync_directory(directory: Path) -> None:
    # Make the rename itself durable (POSIX); not possible/needed on Windows, hence the broad OSError guard.
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def torch_reason(err: BaseException) -> str:
    """The useful part of a torch.load error, without its advice to retry with ``weights_only=False``
    (which would run any code the file contains) or to call ``add_safe_globals``."""
    text = str(err)
    match = re.search(r"WeightsUnpickler error:\s*(.*)", text)
    reason = match.group(1) if match else text.strip().splitlines()[0] if text.strip() else type(err).__name__
    reason = re.split(r"(?<=\.)\s+(?=Please|Check the|To |This file|Re-running|Alternatively|You can)", reason)[0]
    return re.sub(r"\s*\(?\s*weights_only=False[^.]*\.?", "", reason).strip()[:300]


def crc_problem(path: Path) -> str | None:
    """What is wrong with the zip CRC-32s of a torch file (torch.load skips them), or None (also for a non-zip)."""
    if not zipfile.is_zipfile(path):
        return None
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as err:
        return f"is corrupt or truncated ({err})"
    return None if bad is None else (f"is damaged: the bytes of its entry {bad!r} do not match their CRC-32 "
                                     "checksum (a disk, memory or copy error changed them)")


class FileMismatchError(ValueError):
    """A file is not the one a table or manifest names (size or sha256 differ)."""


_SHA256_CACHE: dict[tuple, str] = {}


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks (a big file need not fit in memory)."""
    digest = hashlib.sha256()
    try:
        f = open(path, "rb")
    except PermissionError:
        raise PermissionError(13, f"cannot read {path}: permission denied; make it readable (chmod u+r)") from None
    with f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike) -> str:
    """:func:`sha256_file`, once per process while path, size, mtime, ctime (``touch`` can't reset it), inode hold."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_ino)
    if key not in _SHA256_CACHE:
        _SHA256_CACHE[key] = sha256_file(path)
    return _SHA256_CACHE[key]


def verify_file(path: str | os.PathLike, *, size: int, sha256: str, fix: str) -> None:
    """Refuse ``path`` unless it has exactly ``size`` bytes and this ``sha256``; the message gives both sizes and
    both hashes, then ``fix``. A file of the expected size is hashed once per process (:func:`file_sha256`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {fix}")
    actual = path.stat().st_size
    if actual != size or file_sha256(path) != sha256:
        raise FileMismatchError(f"{path} is not the expected file: {actual:,} bytes, sha256 {file_sha256(path)}; "
                                f"expected {size:,} bytes, sha256 {sha256}. {fix}")
