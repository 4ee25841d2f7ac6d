"""One writer per folder: the commands that write a run (`train`, `population`, `sweep`, `experiment`, `import`) hold
an exclusive lock on its `.npsco.lock` file for as long as they write it.

The lock is `fcntl.flock`: the operating system releases it when the process ends, however it ends, so the lock of a
killed process never blocks the next command. A second command on the same folder fails at once, in one line naming
the process that holds it (its pid and command line, which the holder writes into the file).
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from types import TracebackType

from npsco.errors import NpscoError
from npsco.io import LOCK_FILE

HOLDER_BYTES = 4096
"""At most this much of the holder's description is read back for the message."""


def this_command() -> str:
    """This process's command line, as the lock file records it (`npsco population --out runs/x ...`)."""
    words = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    if words[0] in ("cli.py", "__main__.py"):  # `python -m npsco.cli ...`
        words[0] = "npsco"
    return " ".join(words)


class FolderLock:
    """The exclusive lock of one folder (created if needed), held from `acquire` until `release` (or the end of the
    process). `with FolderLock(folder):` holds it for a block."""

    def __init__(self, folder: str | os.PathLike, command: str | None = None):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.command = command or this_command()
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FolderLock:
        """Take the lock, or fail at once with a one-line NpscoError naming its holder."""
        if self._fd is not None:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        try:  # O_NOFOLLOW: the lock file is a file of the folder, not a link to one elsewhere
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise NpscoError(f"{self.path}: cannot open the lock file ({e.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, HOLDER_BYTES, 0).decode("utf-8", errors="replace").strip() or "another process"
            os.close(fd)
            pid, _, command = holder.partition(" ")
            who = f"pid {pid}: {command}" if pid.isdigit() else holder
            raise NpscoError(
                f"{self.folder} is being written by another npsco process ({who}); wait for it to end, or write "
                "elsewhere (--out)"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {self.command}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Give the lock back (closing the file releases it); the file stays, it holds no state."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()
