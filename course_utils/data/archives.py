"""Unpack tar(.gz) and zip archives without letting a hostile archive write outside the target folder (a member
``../../.bashrc``, ``/etc/passwd`` or a link to ``/``: CVE-2007-4559). Every member is checked before anything is
written, so every Python behaves the same; ``tarfile``'s "data" filter (3.8.17+/3.11.4+) is also applied if there."""

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
_TAR_TYPES = {tarfile.SYMTYPE: "sym", tarfile.LNKTYPE: "hard", tarfile.DIRTYPE: "dir",
              **dict.fromkeys(tarfile.REGULAR_TYPES, "file"),
              **dict.fromkeys((tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE), "device file or FIFO")}


def _refuse(kind: str, name: str, why: str) -> ValueError:
    return ValueError(f"refusing to extract {kind} member {name!r}: {why}; the archive may be malicious, nothing "
                      "was extracted")


def _parts(path: str) -> list[str]:
    return [p for p in re.split(r"[\\/]+", path) if p not in ("", ".")]


def _key(path: str) -> str:
    return "/".join(_parts(path))


def _is_absolute(path: str) -> bool:
    return path.startswith(("/", "\\")) or bool(PureWindowsPath(path).drive)


def _resolve(kind: str, name: str, path: str, links: dict[str, str]) -> None:
    """Refuse ``path`` if it leads outside once the archive's own links are followed, as the OS will (``l1 -> .``
    then ``l2 -> l1/..`` looks harmless name by name, but ``l2`` is the folder above the destination)."""
    todo, done, hops = _parts(path), [], 0
    while todo:
        part = todo.pop(0)
        here = "/".join(done + [part])
        if part == ".." and not done:
            raise _refuse(kind, name, f"{path!r} leads outside the destination")
        if part == "..":
            done.pop()
        elif here in links:  # a link used as a folder, or pointing at another link: follow it
            hops += 1
            if hops > 40:
                raise _refuse(kind, name, "symbolic link loop")
            todo = _parts(links[here]) + todo  # relative to the link's folder, which is `done`
        else:
            done.append(part)


def _check_members(kind: str, members: list[tuple[str, str, str]]) -> None:
    """Refuse the first unsafe ``(name, type, link target)``; type is ``sym``, ``hard``, ``file``, ``dir`` or the
    reason the member is refused (a device file, ...)."""
    links = {_key(name): target for name, type_, target in members if type_ == "sym"}  # a link may be used early
    stored: set[str] = set()  # regular files so far: the only targets a hard link may have
    for name, type_, target in members:
        if not name or "\x00" in name:
            raise _refuse(kind, name, "empty name or NUL byte")
        if _is_absolute(name):
            raise _refuse(kind, name, "absolute path")
        parts = _parts(name)
        if ".." in parts:
            raise _refuse(kind, name, "'..' path component would escape the destination")
        for i in range(1, len(parts)):  # writing *through* a link (a -> .. then a/x), wherever the link appears
            if "/".join(parts[:i]) in links:
                raise _refuse(kind, name, f"path goes through the link {'/'.join(parts[:i])!r}")
        key = "/".join(parts)
        if type_ in ("sym", "hard") and (not target or _is_absolute(target)):
            raise _refuse(kind, name, f"link to absolute path {target!r}")
        if type_ == "sym":  # relative to its folder; followed through the archive's other links
            _resolve(kind, name, posixpath.join(posixpath.dirname(key), target), links)
        elif type_ == "hard":  # relative to the root; '../x' is never a stored file, so it is refused here too
            if _key(target) in links or _key(target) not in stored:  # os.link would follow a symlink anywhere
                raise _refuse(kind, name, f"hard link to {target!r}, which is not a regular file stored before it")
            stored.add(key)
        elif type_ == "file":
            stored.add(key)
        elif type_ != "dir":
            raise _refuse(kind, name, type_)


def check_tar_members(members: list[tarfile.TarInfo]) -> None:
    """Raise ``ValueError`` for the first unsafe tar member (see :func:`safe_extract`)."""
    _check_members("tar", [(m.name, _TAR_TYPES.get(m.type, f"unsupported member type {m.type!r}"), m.linkname)
                           for m in members])


def check_zip_members(zf: zipfile.ZipFile) -> None:
    """Raise ``ValueError`` for the first unsafe zip member; Unix types are in ``external_attr >> 16``."""
    members = []
    for info in zf.infolist():
        mode = info.external_attr >> 16
        special = stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
        type_ = "sym" if stat.S_ISLNK(mode) else "device file, FIFO or socket" if special else "file"
        target = zf.read(info).decode("utf-8", "replace") if type_ == "sym" else ""  # a link's content is its target
        members.append((info.filename, type_, target))
    _check_members("zip", members)


def _merge_into(src: Path, dst: Path) -> None:
    """Move the tree ``src`` into ``dst``: same-named entries are replaced, anything else (a student's notes) stays."""
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
    """Extract a ``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``/``.tar.xz`` or ``.zip`` archive into ``dest``; return it.

    Absolute paths, ``..``, links leading outside ``dest`` (also through a chain of links), hard links to anything but
    a file stored before them, writes through a link, device files and FIFOs raise ``ValueError`` naming the member.
    Unpacking goes to a temporary folder moved into place once all is out: after any error nothing has been written;
    other files already in ``dest`` are kept."""
    archive, dest = Path(archive), Path(dest)
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"cannot extract into {dest}: it is a file, not a folder")
    if not archive.is_file():
        raise FileNotFoundError(f"no archive at {archive}: check the path (or fetch it with extract_resource)")
    try:  # is_tarfile reads the compressed stream: a cut .tar.gz raises EOFError there
        is_zip = zipfile.is_zipfile(archive)
        readable = is_zip or tarfile.is_tarfile(archive)
    except (EOFError, OSError, tarfile.TarError, zlib.error, lzma.LZMAError) as err:
        raise ValueError(f"{archive} is damaged ({type(err).__name__}: {err}): delete it and download again") from None
    if not readable:
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
                try:  # without the filter (Python < 3.11.4) our checks above are the whole defence
                    tar.extractall(stage, members=bar, **({"filter": "data"} if _HAS_DATA_FILTER else {}))
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
    """Fetch archive resource ``name`` (see :func:`fetch`) and unpack it once; return the folder it is in. A marker
    holding the archive's sha256 is written last, so an interrupted extraction is redone on the next call."""
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
