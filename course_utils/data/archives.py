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

import lzma
import os
import posixpath
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
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


def _check_not_through_link(kind: str, name: str, links: set[str] | dict[str, str]) -> None:
    """Refuse writing *through* a link of the same archive (``a -> ..`` then ``a/x``), wherever that link
    appears in it: the lexical check of each link alone cannot see where a chain of links ends up."""
    parts = _parts(name)
    for i in range(1, len(parts)):
        if "/".join(parts[:i]) in links:
            raise _refuse(kind, name, f"path goes through the link {'/'.join(parts[:i])!r}")


def _parts(path: str) -> list[str]:
    return [p for p in re.split(r"[\\/]+", path) if p not in ("", ".")]


def _resolve(kind: str, name: str, path: str, links: dict[str, str]) -> str:
    """Where ``path`` (relative to the archive root) really leads once the archive's own symbolic links are
    followed, as the operating system will follow them: ``l1 -> .`` then ``l2 -> l1/..`` looks harmless
    name by name, but ``l2`` is the folder *above* the destination. Raises if the path climbs out."""
    todo, done, hops = _parts(path), [], 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            if not done:
                raise _refuse(kind, name, f"{path!r} leads outside the destination through the archive's links")
            done.pop()
            continue
        here = "/".join(done + [part])
        if here in links:  # a link used as a folder, or pointing at another link: follow it
            hops += 1
            if hops > 40:
                raise _refuse(kind, name, "symbolic link loop")
            todo = _parts(links[here]) + todo  # relative to the link's folder, which is `done`
            continue
        done.append(part)
    return "/".join(done)


def check_tar_members(members: list[tarfile.TarInfo]) -> None:
    """Raise ``ValueError`` for the first unsafe tar member (see the module docstring)."""
    links: dict[str, str] = {}
    for m in members:  # every symbolic link first: a link may be used before it appears
        if m.issym():
            links["/".join(_parts(m.name))] = m.linkname
    hard_ok: set[str] = set()
    for m in members:
        _check_name("tar", m.name)
        _check_not_through_link("tar", m.name, links)
        key = "/".join(_parts(m.name))
        if m.issym():
            _check_link("tar", m.name, m.linkname, relative_to_member=True)
            _resolve("tar", m.name, posixpath.join(posixpath.dirname(key), m.linkname.replace("\\", "/")), links)
        elif m.islnk():
            _check_link("tar", m.name, m.linkname, relative_to_member=False)
            target = "/".join(_parts(m.linkname))
            if target in links or target not in hard_ok:  # os.link would follow a symlink anywhere
                raise _refuse("tar", m.name, f"hard link to {m.linkname!r}, which is not a regular file stored "
                              "before it")
            hard_ok.add(key)
        elif m.ischr() or m.isblk() or m.isfifo():
            raise _refuse("tar", m.name, "device file or FIFO")
        elif m.isfile():
            hard_ok.add(key)
        elif not m.isdir():
            raise _refuse("tar", m.name, f"unsupported member type {m.type!r}")


def check_zip_members(zf: zipfile.ZipFile) -> None:
    """Raise ``ValueError`` for the first unsafe zip member ; Unix types are in ``external_attr >> 16``."""
    links: dict[str, str] = {}
    for info in zf.infolist():  # the link target is stored as the member's content
        if stat.S_ISLNK(info.external_attr >> 16):
            links["/".join(_parts(info.filename))] = zf.read(info).decode("utf-8", "replace")
    for info in zf.infolist():
        _check_name("zip", info.filename)
        _check_not_through_link("zip", info.filename, links)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            key = "/".join(_parts(info.filename))
            _check_link("zip", info.filename, links[key], relative_to_member=True)
            _resolve("zip", info.filename, posixpath.join(posixpath.dirname(key), links[key].replace("\\", "/")),
                     links)
        elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            raise _refuse("zip", info.filename, "device file, FIFO or socket")


def _merge_into(src: Path, dst: Path) -> None:
    """Move the tree ``src`` into ``dst``: archive entries replace same-named ones, anything else already in
    ``dst`` (a student's own notes inside ``aclImdb/``) stays."""
    for entry in src.iterdir():
        final = dst / entry.name
        if entry.is_dir() and not entry.is_symlink() and final.is_dir() and not final.is_symlink():
            _merge_into(entry, final)
            continue
        if final.is_dir() and not final.is_symlink():
            shutil.rmtree(final)  # a folder where the archive has a file or link of the same name
        elif final.is_symlink() or final.exists():
            final.unlink()
        os.replace(entry, final)


def safe_extract(archive: str | os.PathLike, dest: str | os.PathLike, progress: bool = False) -> Path:
    """Extract a ``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``/``.tar.xz`` or ``.zip`` archive into ``dest``.

    Every member is checked first; absolute paths, ``..`` components, links pointing outside ``dest`` (also
    through a chain of the archive's own links), hard links to anything but a file stored before them,
    writes through a link, device files and FIFOs raise ``ValueError`` naming the member. The archive is
    unpacked into a temporary folder inside ``dest`` and moved into place only once all of it is out, so
    after any error nothing has been written. Files already in ``dest`` that the archive does not contain
    are kept. Returns ``dest``.
    """
    archive, dest = Path(archive), Path(dest)
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"cannot extract into {dest}: it is a file, not a folder")
    is_zip = zipfile.is_zipfile(archive)
    if not is_zip and not tarfile.is_tarfile(archive):
        raise ValueError(f"{archive} is neither a zip nor a tar archive: was the download complete?")
    dest.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".extracting-", dir=dest))
    try:
        if is_zip:
            with zipfile.ZipFile(archive) as zf:
                check_zip_members(zf)
                for info in tqdm(zf.infolist(), desc=f"unzip {archive.name}", disable=not progress, leave=False):
                    zf.extract(info, stage)
        else:
            with tarfile.open(archive) as tar:
                members = tar.getmembers()
                check_tar_members(members)
                bar = tqdm(members, desc=f"untar {archive.name}", disable=not progress, leave=False)
                try:
                    if _HAS_DATA_FILTER:
                        tar.extractall(stage, members=bar, filter="data")
                    else:  # pragma: no cover - Python < 3.11.4: our checks above are the whole defence
                        tar.extractall(stage, members=bar)
                except tarfile.TarError as exc:  # e.g. a FilterError: report it like our own checks
                    raise ValueError(f"refusing to extract {archive.name}: {exc}; nothing was extracted") from None
        _merge_into(stage, dest)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError) as exc:
        raise ValueError(f"{archive} is damaged ({type(exc).__name__}: {exc}); nothing was extracted. Delete it "
                         "and download it again") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return dest


def extract_resource(name: str, data_dir: str | os.PathLike | None = None, download: bool = True,
                     progress: bool = True) -> Path:
    """Fetch archive resource ``name`` (see :func:`fetch`) and unpack it once; return the folder it is in.

    Unpacking goes to a temporary folder inside the destination (see :func:`safe_extract`), and a marker
    file holding the archive's sha256 is written last, so an interrupted extraction is simply redone on the
    next call. Files of the student's own in the destination are never deleted.
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
        safe_extract(archive, target, progress=progress)  # merges: the student's own files there stay
        marker.write_text(res.sha256 + "\n")
    except OSError as exc:  # e.g. a read-only shared data folder that holds only the archive, a full disk
        raise DataUnavailable(f"{archive} is there but cannot be unpacked into {target} ({exc}): copy the "
                              "archive to a writable folder and point COURSE_DATA_DIR at it") from None
    return target
