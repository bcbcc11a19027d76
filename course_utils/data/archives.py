"""Unpack tar(.gz) and zip archives without letting a hostile archive write outside the target folder.

An archive is just a list of names plus bytes, and a name like ``../../.bashrc`` or ``/etc/passwd``, or a
symbolic link pointing at ``/``, would make a naive ``extractall`` overwrite files anywhere the user can write
("path traversal", CVE-2007-4559). :func:`safe_extract` checks *every* member before writing *anything* and
refuses the whole archive with a ``ValueError`` naming the first bad member.

The checks are explicit (not only Python's ``tarfile`` "data" filter, new in 3.12 and backported to
3.8.17+/3.11.4+) so that the behaviour is the same on every Python the course supports; when the filter
exists it is applied as well, as a second line of defence.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path, PureWindowsPath

from tqdm.auto import tqdm

from .download import DataUnavailable, fetch
from .registry import data_dir as _resolve_dir
from .registry import get_resource

_HAS_DATA_FILTER = hasattr(tarfile, "data_filter")


def _refuse(kind: str, name: str, why: str) -> ValueError:
    return ValueError(f"refusing to extract {kind} member {name!r}: {why}. The archive may be malicious or "
                      "damaged; nothing was extracted")


def _check_name(kind: str, name: str) -> None:
    """A member name must be relative and must not climb out with ``..`` (either slash counts)."""
    if not name or "\x00" in name:
        raise _refuse(kind, name, "empty name or NUL byte")
    if name.startswith(("/", "\\")) or PureWindowsPath(name).drive:
        raise _refuse(kind, name, "absolute path")
    if ".." in re.split(r"[\\/]+", name):
        raise _refuse(kind, name, "'..' path component would escape the destination")


def _escapes(target: str) -> bool:
    """True when a normalized relative path points above the archive root."""
    target = posixpath.normpath(target)
    return target == ".." or target.startswith("../") or target.startswith("/")


def _check_link(kind: str, name: str, target: str, relative_to_member: bool) -> None:
    """Links must point inside: a symlink's target is relative to its folder, a hard link's to the root."""
    if not target or target.startswith(("/", "\\")) or PureWindowsPath(target).drive:
        raise _refuse(kind, name, f"link to absolute path {target!r}")
    base = posixpath.dirname(name) if relative_to_member else ""
    if _escapes(posixpath.join(base, target.replace("\\", "/"))):
        raise _refuse(kind, name, f"link to {target!r} points outside the destination")


def _check_not_through_link(kind: str, name: str, links: set[str]) -> None:
    """Refuse writing *through* a link the same archive created (``a -> ..`` then ``a/x``): the lexical check
    of each link alone cannot see where a chain of links ends up."""
    parts = name.strip("/").split("/")
    for i in range(1, len(parts)):
        if "/".join(parts[:i]) in links:
            raise _refuse(kind, name, f"path goes through the link {'/'.join(parts[:i])!r}")


def check_tar_members(members: list[tarfile.TarInfo]) -> None:
    """Raise ``ValueError`` for the first unsafe tar member (see the module docstring)."""
    links: set[str] = set()
    for m in members:
        _check_name("tar", m.name)
        _check_not_through_link("tar", m.name, links)
        if m.issym():
            _check_link("tar", m.name, m.linkname, relative_to_member=True)
            links.add(m.name.strip("/"))
        elif m.islnk():
            _check_link("tar", m.name, m.linkname, relative_to_member=False)
        elif m.ischr() or m.isblk() or m.isfifo():
            raise _refuse("tar", m.name, "device file or FIFO")
        elif not (m.isfile() or m.isdir()):
            raise _refuse("tar", m.name, f"unsupported member type {m.type!r}")


def check_zip_members(zf: zipfile.ZipFile) -> None:
    """Raise ``ValueError`` for the first unsafe zip member ; Unix types are in ``external_attr >> 16``."""
    links: set[str] = set()
    for info in zf.infolist():
        _check_name("zip", info.filename)
        _check_not_through_link("zip", info.filename, links)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):  # the link target is stored as the member's content
            target = zf.read(info).decode("utf-8", "replace")
            _check_link("zip", info.filename, target, relative_to_member=True)
            links.add(info.filename.strip("/"))
        elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            raise _refuse("zip", info.filename, "device file, FIFO or socket")


def safe_extract(archive: str | os.PathLike, dest: str | os.PathLike, progress: bool = False) -> Path:
    """Extract a ``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``/``.tar.xz`` or ``.zip`` archive into ``dest``.

    Every member is checked first; absolute paths, ``..`` components, links pointing outside ``dest`` (or
    writes through a link), device files and FIFOs raise ``ValueError`` naming the member, and then
    nothing has been written. Returns ``dest``.
    """
    archive, dest = Path(archive), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            check_zip_members(zf)
            for info in tqdm(zf.infolist(), desc=f"unzip {archive.name}", disable=not progress, leave=False):
                zf.extract(info, dest)
        return dest
    if not tarfile.is_tarfile(archive):
        raise ValueError(f"{archive} is neither a zip nor a tar archive: was the download complete?")
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        check_tar_members(members)
        bar = tqdm(members, desc=f"untar {archive.name}", disable=not progress, leave=False)
        try:
            if _HAS_DATA_FILTER:
                tar.extractall(dest, members=bar, filter="data")
            else:  # pragma: no cover - Python < 3.11.4: our checks above are the whole defence
                tar.extractall(dest, members=bar)
        except tarfile.TarError as exc:  # e.g. a FilterError: report it in the same form as our own checks
            raise ValueError(f"refusing to extract {archive.name}: {exc}") from None
    return dest


def extract_resource(name: str, data_dir: str | os.PathLike | None = None, download: bool = True,
                     progress: bool = True) -> Path:
    """Fetch archive resource ``name`` (see :func:`fetch`) and unpack it once; return the folder it is in.

    Unpacking goes to a temporary folder next to the destination, and a marker file holding the archive's
    sha256 is written last, so an interrupted extraction is simply redone on the next call.
    """
    res = get_resource(name)
    if res.extract_to is None:
        raise ValueError(f"dataset {name!r} is not an archive: use fetch({name!r}) to get its file")
    archive = fetch(name, data_dir=data_dir, download=download, progress=progress)
    target = _resolve_dir(data_dir) / res.extract_to
    marker = target / f".{archive.name}.extracted"
    if marker.is_file() and marker.read_text().strip() == res.sha256:
        return target
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target, prefix=".extracting-") as tmp:
            safe_extract(archive, tmp, progress=progress)
            for entry in Path(tmp).iterdir():  # move each top-level entry into place, replacing a stale copy
                final = target / entry.name
                if final.is_dir() and not final.is_symlink():
                    shutil.rmtree(final)
                elif final.exists() or final.is_symlink():
                    final.unlink()
                os.replace(entry, final)
        marker.write_text(res.sha256 + "\n")
    except PermissionError as exc:  # e.g. a read-only shared data folder that holds only the archive
        raise DataUnavailable(f"{archive} is there but cannot be unpacked into {target} ({exc}): copy the "
                              "archive to a writable folder and point COURSE_DATA_DIR at it") from None
    return target
