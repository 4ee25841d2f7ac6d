"""Files of a run directory, written, read and deleted safely (docs/reliability.md).

- Writing: every file a later step depends on is written to a temporary file, flushed, fsynced and renamed over the
  target, so an interrupted run never leaves a half-written file that could be read as valid.
- Reading: regular files only (a FIFO, device or socket is refused before it is opened for reading), sizes and JSON
  nesting bounded (`npsco.limits`), so that a file someone else wrote cannot hang npsco or exhaust its memory.
- Deleting: `remove_inside` is the one function in npsco that deletes files: only inside a given folder, never through
  a symbolic link.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import os
import re
import shutil
import stat
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from npsco.errors import NpscoError
from npsco.layout import CONFIG_FILE, EVALUATION_FILE, MANIFEST_FILE, POLICY_FILE, SWEEP_FILE, THRESHOLD_FILE
from npsco.limits import (
    MAX_CONFIG_BYTES,
    MAX_EVALUATION_BYTES,
    MAX_JSON_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_NESTING,
    MAX_SWEEP_BYTES,
    MAX_THRESHOLD_BYTES,
    MAX_TOML_BYTES,
)

LOCK_FILE = ".npsco.lock"
"""The lock file of a folder npsco writes (`npsco.locks`); it stays when the folder is emptied."""
TRASH_PREFIX = ".npsco-trash-"
"""A folder's entries on their way out (`fresh_dir`)."""
STALE_TEMP = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
"""The temporary file of an atomic write (`.NAME.XXXXXXXX.tmp`): one left behind was cut short by a kill."""


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


# --------------------------------------------------------------------------------------------------------- writing
def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically (temp file in the same folder, fsync, rename). An OSError names `path`
    (`named`), whichever step failed: a write to an open file says no name of its own."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise named(e, path) from e
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)  # mkstemp's 0600 would make reports and tables private to their writer
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        remove_inside(path.parent, tmp)
        if isinstance(e, OSError):
            raise named(e, path) from e
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write `obj` as indented JSON to `path` atomically (NaN/inf are refused: they are not JSON)."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n")


def named(e: OSError, path: str | os.PathLike) -> OSError:
    """`e` (same errno, same type) naming `path`: the file npsco was writing, not a temporary file or no file."""
    return OSError(e.errno, e.strerror or str(e), str(path))


KEPT = "every file npsco wrote before is whole (files are replaced atomically) and finished policies are kept"
"""What a file-system error leaves: said by each message of `file_system_message`."""
FILE_SYSTEM_ERRORS = {
    errno.ENOSPC: ("the disk is full", "free some space and run the same command again to resume"),
    errno.EDQUOT: ("the disk is full", "free some space and run the same command again to resume"),
    errno.EFBIG: (
        "the file is too large for this system (past the file size limit: `ulimit -f`, or the file system's)",
        "raise the limit and run the same command again to resume",
    ),
    errno.EROFS: ("the file system is read-only", "write elsewhere (--out), or make it writable and run it again"),
    errno.EACCES: ("permission denied", "write elsewhere (--out), or make it writable and run it again"),
    errno.EPERM: ("permission denied", "write elsewhere (--out), or make it writable and run it again"),
}
"""The errors of a file system that a user can fix, with what happened and what to do."""


def is_file_system_error(e: BaseException) -> bool:
    """Whether `e` is an error of the file system that the user can fix (`FILE_SYSTEM_ERRORS`): a full disk or quota,
    a file past the size limit, a read-only file system, no permission."""
    return isinstance(e, OSError) and e.errno in FILE_SYSTEM_ERRORS


def file_system_message(e: OSError) -> str:
    """One line for a file-system error (`is_file_system_error`): the cause, the file, what was kept, what to do.
    The disk full: `the disk is full while writing RUN/manifest.json: every file npsco wrote before is whole ...`."""
    cause, todo = FILE_SYSTEM_ERRORS.get(e.errno or 0, (e.strerror or str(e), "run the same command again to resume"))
    where = f" while writing {e.filename}" if e.filename else " (the file was not named)"
    return f"{cause}{where}: {KEPT}; {todo}"


# --------------------------------------------------------------------------------------------------------- reading
def _kind(mode: int) -> str:
    """What a file that is not a regular one is, for a message."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "a folder" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def read_bytes(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of the regular file `path` (a symbolic link to one is fine), at most `limit` of them. A FIFO, device
    or socket is refused before it is opened for reading (a FIFO would block, /dev/zero never ends), a larger file
    before it is read; a one-line NpscoError names the file."""
    with _open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise NpscoError(f"{path}: {size:,} bytes, past npsco's limit of {limit:,} for this file; refused")
        data = f.read(limit + 1)  # a file that grows while it is read stops at the limit too
    if len(data) > limit:
        raise NpscoError(f"{path}: more than {limit:,} bytes, past npsco's limit for this file; refused")
    return data


def _open_regular(path: str | os.PathLike) -> io.BufferedReader:
    """`path` opened for reading if it is a regular file (a symbolic link to one is fine), else a one-line
    NpscoError; opening does not wait on a FIFO (O_NONBLOCK), and the type is checked on the open file itself."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        raise NpscoError(f"{path}: file not found") from None
    except OSError as e:
        if e.errno != errno.ENXIO:  # ENXIO: a socket (or a device without its driver) cannot be opened at all
            raise
        raise NpscoError(f"{path}: {_kind(os.stat(path).st_mode)}, not a regular file; refused") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NpscoError(f"{path}: {_kind(mode)}, not a regular file; refused")
    return open(fd, "rb")  # noqa: SIM115  (the caller's `with` closes it)


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a regular file's bytes, in hex (a FIFO or device is refused, as by `read_bytes`)."""
    with _open_regular(path) as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class NotFiniteNumber(ValueError):
    """A JSON number too large for a float (`1e400`: it would be read as infinity) or a whole number past 64 bits."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotFiniteNumber(f"the number {text[:40]} is too large (it would be read as infinity)")
    return value


def check_nesting(obj: Any, where: str, limit: int = MAX_NESTING) -> None:
    """Refuse a parsed JSON or TOML document nested deeper than `limit` levels (walked without recursion)."""
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > limit:
            raise NpscoError(f"{where}: nested deeper than {limit} levels; refused")
        stack.extend((child, depth + 1) for child in children)


def _int64(text: str) -> int:
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise NotFiniteNumber(f"the number {text[:40]} is too large (past 64 bits)")
    return value


def loads_finite(raw: bytes | str) -> Any:
    """`json.loads`, refusing NaN and infinity (ValueError), numbers too large for a float and whole numbers past
    64 bits (`NotFiniteNumber`: npsco writes none, and numpy cannot hold them)."""
    return json.loads(raw, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_int64)


def parse_json(raw: bytes | str, where: str) -> Any:
    """A JSON document, refused in one line (naming `where`) when it is not valid JSON, holds NaN or infinity (npsco
    never writes them), a number too large for a float (`1e400`, read as infinity otherwise) or a whole number past 64
    bits, or is nested deeper than `MAX_NESTING` levels."""
    try:
        obj = loads_finite(raw)
    except RecursionError:
        raise NpscoError(f"{where}: nested deeper than {MAX_NESTING} levels; refused") from None
    except NotFiniteNumber as e:
        raise NpscoError(f"{where}: {e}; refused") from None
    except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
        raise NpscoError(f"{where}: not valid JSON ({e})") from None
    check_nesting(obj, where)
    return obj


JSON_LIMITS = {
    CONFIG_FILE: MAX_CONFIG_BYTES,
    MANIFEST_FILE: MAX_MANIFEST_BYTES,
    THRESHOLD_FILE: MAX_THRESHOLD_BYTES,
    EVALUATION_FILE: MAX_EVALUATION_BYTES,
    SWEEP_FILE: MAX_SWEEP_BYTES,
}
"""The size limit of each kind of JSON file npsco reads, by its name (others: `MAX_JSON_BYTES`)."""


def read_json(path: str | os.PathLike, limit: int | None = None) -> Any:
    """Read a JSON file (`read_bytes`, `parse_json`) of at most `limit` bytes (by default its kind's: `JSON_LIMITS`),
    turning a missing, special, oversized, malformed or too deeply nested file into an NpscoError that names it."""
    if limit is None:
        limit = JSON_LIMITS.get(Path(path).name, MAX_JSON_BYTES)
    return parse_json(read_bytes(path, limit), str(path))


def read_toml(path: str | os.PathLike, limit: int = MAX_TOML_BYTES) -> dict[str, Any]:
    """Read a TOML file (a regular file of at most `limit` bytes, `read_bytes`), turning a malformed or too deeply
    nested one into an NpscoError that names it."""
    raw = read_bytes(path, limit)  # a regular file of a sane size (a FIFO would block)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except RecursionError:
        raise NpscoError(f"{path}: nested too deeply; refused") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise NpscoError(f"{path}: not valid TOML ({e})") from None
    check_nesting(data, str(path))
    return data


def check_folder_path(path: str | os.PathLike, flag: str = "--out") -> Path:
    """`path` if npsco can make it a folder (or it is one): refuses, naming `flag`, a path that is a file or lies
    under one (what would be a NotADirectoryError or FileExistsError once something was written)."""
    path = Path(path)
    for part in (path, *path.parents):
        if part.exists() and not part.is_dir():
            what = f"{flag} {path} is" if part == path else f"{flag} {path}: {part} is"
            raise NpscoError(f"{what} a file, not a folder; choose another {flag}")
    return path


# -------------------------------------------------------------------------------------------------------- deleting
def inside(root: str | os.PathLike, path: str | os.PathLike) -> Path:
    """`path` (relative to the folder `root`, or absolute) checked to lie strictly inside `root` and to pass through
    no symbolic link below it: every part of it that exists is a real folder or file. Returns it as `root / ...`;
    an NpscoError otherwise (npsco writes and deletes in a run directory only through paths checked so)."""
    root = Path(root)
    given = Path(path)
    target = given if given.is_absolute() else root / given
    relative = Path(os.path.relpath(os.path.abspath(target), os.path.abspath(root)))
    if relative == Path(".") or relative.parts[0] == os.pardir:
        raise NpscoError(f"{str(path)!r}: not inside the folder {root}; refused")
    current = root
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            raise NpscoError(
                f"{current}: a symbolic link inside {root}; npsco writes and deletes only real folders and files there"
            )
    return current


def remove_inside(root: str | os.PathLike, path: str | os.PathLike) -> None:
    """Delete the file or folder `path` inside the folder `root` (checked by `inside`), if it exists: the one function
    in npsco that deletes. A folder goes with everything in it; a symbolic link within it is removed, never followed
    (`shutil.rmtree`'s guarantee)."""
    target = inside(root, path)
    try:
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
    except FileNotFoundError:
        pass


def run_entries(folder: str | os.PathLike) -> list[str]:
    """The names in `folder`, but for npsco's own lock file and trash (what tells whether a folder is empty)."""
    return sorted(
        e.name for e in os.scandir(Path(folder)) if e.name != LOCK_FILE and not e.name.startswith(TRASH_PREFIX)
    )


def remove_stale_temps(folder: str | os.PathLike) -> list[str]:
    """Delete the temporary files that killed atomic writes left in `folder` (not below it); returns their names.
    Only while holding the folder's lock (`npsco.locks`): another writer's temporary file is not stale."""
    stale = [e.name for e in os.scandir(Path(folder)) if STALE_TEMP.match(e.name) and e.is_file(follow_symlinks=False)]
    for name in stale:
        remove_inside(folder, name)
    return stale


def fresh_dir(path: str | os.PathLike) -> Path:
    """Make the folder `path` empty but for its lock file (`LOCK_FILE`); the folder itself stays, and with it the lock
    held on it. Its entries are first moved into a trash folder inside it, `policy.safetensors` first and
    `config.json` last, then the trash is deleted: a kill at any moment leaves the old run without its policy (never
    a policy beside a config.json it was not trained with), or an empty folder. The trash of an earlier kill goes
    too."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(path):
        if entry.name.startswith(TRASH_PREFIX):
            remove_inside(path, entry.name)
    names = sorted(run_entries(path), key=lambda n: (n != POLICY_FILE, n == CONFIG_FILE, n))
    if names:
        trash = path / f"{TRASH_PREFIX}{os.getpid()}"
        trash.mkdir()
        for name in names:
            os.rename(path / name, trash / name)
        _fsync_dir(path)
        remove_inside(path, trash.name)
    return path
