"""Disk faults during a build become one typed error, ``BuildIOError`` (exit 6).

A build that cannot write (disk full ``ENOSPC``, quota ``EDQUOT``, file size limit ``EFBIG``
from ``ulimit -f``, read-only file system ``EROFS``, denied ``EACCES``/``EPERM``, ``EIO``)
fails with the errno named in its evidence, whether the fault comes from an ``os`` call or
from SQLite (``SQLITE_FULL``, ``SQLITE_IOERR_*``, ``SQLITE_READONLY``, ``SQLITE_CANTOPEN``,
``SQLITE_PERM``). The staging file is removed by the builder's own cleanup and the previous
generation keeps serving: publish flips the active pointer last.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from core.errors import BuildIOError

if TYPE_CHECKING:
    from core.index.layout import IndexLayout

IO_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.ENOTDIR}
)
_SQLITE_IO = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")


def _sqlite_io(exc: sqlite3.Error) -> str | None:
    name = getattr(exc, "sqlite_errorname", None) or ""
    return name if any(name.startswith(prefix) for prefix in _SQLITE_IO) else None


@contextmanager
def build_io_errors(layout: IndexLayout) -> Iterator[None]:
    """Turn a disk fault inside the block into ``BuildIOError``; anything else passes unchanged."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in IO_ERRNOS:
            raise
        raise BuildIOError(
            f"the build of {layout.index_dir} could not write: {exc.strerror or exc}"
            f"{f' ({exc.filename})' if exc.filename else ''}; nothing was published",
            index_dir=str(layout.index_dir),
            errno=errno.errorcode.get(exc.errno or 0, str(exc.errno)),
            path=exc.filename,
        ) from exc
    except sqlite3.OperationalError as exc:
        name = _sqlite_io(exc)
        if name is None:
            raise
        raise BuildIOError(
            f"the build of {layout.index_dir} could not write: {exc}; nothing was published",
            index_dir=str(layout.index_dir),
            sqlite_error=name,
        ) from exc
