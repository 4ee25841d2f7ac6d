"""Crash-safe file writing: every file a later step depends on is written to a temporary file, flushed, fsynced and
renamed over the target, so an interrupted run never leaves a half-written file that could be read as valid."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from npsco.errors import NpscoError


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically (temp file in the same folder, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)  # mkstemp's 0600 would make reports and tables private to their writer
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write `obj` as indented JSON to `path` atomically (NaN/inf are refused: they are not JSON)."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n")


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file, turning a missing or malformed file into an NpscoError that names it."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NpscoError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise NpscoError(f"{path}: not valid JSON ({e})") from None


def fresh_dir(path: str | os.PathLike) -> Path:
    """Make `path` an empty folder. An existing one is first renamed aside (one atomic step), then deleted: a kill at
    any moment leaves either the old folder whole or none, never part of the old files beside new ones. Leftovers of
    an earlier kill during the deletion (`.NAME.old-*` beside it) are deleted too."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        trash = path.with_name(f".{path.name}.old-{os.getpid()}")
        os.rename(path, trash)
        _fsync_dir(path.parent)
    for stale in path.parent.glob(f".{path.name}.old-*"):
        shutil.rmtree(stale, ignore_errors=True)
    path.mkdir()
    return path
