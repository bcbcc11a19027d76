"""Test-only helper: build tar archives member by member, hostile ones included (links, devices, ``..``)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

_TYPES = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE,
          "fifo": tarfile.FIFOTYPE}


def make_tar(path: Path, *members) -> Path:
    """Write ``path`` (gzip-compressed when it ends in .gz/.tgz) from ``(name, kind, extra)`` members: ``kind``
    "file" (``extra`` = its bytes) or one of "dir", "sym", "hard", "chr", "fifo" (``extra`` = the link target)."""
    mode = "w:gz" if path.name.endswith((".gz", ".tgz")) else "w"
    with tarfile.open(path, mode) as tar:
        for name, kind, extra in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(extra)
                tar.addfile(info, io.BytesIO(extra))
                continue
            info.type = _TYPES[kind]
            info.linkname = extra or ""
            tar.addfile(info)
    return path
