"""A minimal Linux inotify reader (ctypes) for the kill supervisor.

It sees a streaming query's checkpoint log entries (``offsets/K``, the temporary file renamed to
``commits/K``) appear.

Where inotify is not available :meth:`Inotify.open` returns None and the supervisor polls.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
from pathlib import Path
from typing import Any

__all__ = ["Inotify"]

_IN_CREATE, _IN_MOVED_TO = 0x100, 0x80


class Inotify:
    """A minimal Linux inotify reader (ctypes); ``None``-safe.

    :meth:`open` returns None where inotify is not available, and the caller polls instead.
    """

    def __init__(self, fd: int, libc: Any):
        self.fd = fd
        self.libc = libc
        self.watches: dict[int, Path] = {}

    @classmethod
    def open(cls) -> Inotify | None:
        """A new inotify instance, or None where the kernel offers none."""
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        return cls(fd, libc) if fd >= 0 else None

    def watch(self, folder: Path) -> bool:
        """Watch ``folder`` for created and moved-in files; False when it cannot be watched."""
        wd = self.libc.inotify_add_watch(self.fd, str(folder).encode(), _IN_CREATE | _IN_MOVED_TO)
        if wd < 0:
            return False
        self.watches[wd] = folder
        return True

    def read(self, timeout: float) -> list[tuple[Path, str]]:
        """The ``(path, event)`` pairs that arrive within ``timeout`` seconds."""
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return []
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        out, i = [], 0
        while i + 16 <= len(data):
            wd, _mask, _cookie, n = struct.unpack_from("iIII", data, i)
            name = data[i + 16: i + 16 + n].split(b"\0", 1)[0].decode(errors="replace")
            out.append((self.watches.get(wd, Path()), name))
            i += 16 + n
        return out

    def close(self) -> None:
        """Close the inotify descriptor."""
        os.close(self.fd)
