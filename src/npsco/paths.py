"""The one path check of npsco's folders (docs/reliability.md, "Paths and links"): every command that reads or writes
a run folder, a sweep folder or a report folder checks it here before it reads or writes anything in it.

- Below such a folder, everything npsco reads or writes is a real folder or file: a symbolic link anywhere in it (a
  member's folder, `checkpoints/`, `tensorboard/`, `evaluation/`, `report/`, a file) is refused in one line naming
  the link and where it points. The folder itself may be reached through links (`runs/` on another disk).
- An output folder (`npsco report --out`, `npsco evaluate --out`) that lies inside a run or sweep folder is reached
  from it through real folders only (`RUN/report` a link to elsewhere is refused).
- A member's folder is `RUN/` + the path the layout gives it (`npsco.manifest.check_layout`); a borrowed reference's
  lies where the run's `config.json` says it borrows from (`borrowed_folder`).

Where the check is called: `npsco.manifest.load_manifest` (every reader of a population: evaluate, report, threshold,
`--refs-from`, a population's resume), `npsco.population.Population`, `npsco.sweep.Sweep`, `npsco.training` (`npsco
train`), `npsco.ppo.trainer.Trainer` (a policy's training, also in a worker) and the output folders of `report` and
`evaluate`.
"""

from __future__ import annotations

import os
from pathlib import Path

from npsco.errors import NpscoError
from npsco.io import LOCK_FILE, check_folder_path
from npsco.layout import CONFIG_FILE, MANIFEST_FILE, POLICY_FILE, REPORT_MARKER, SWEEP_FILE

MARKERS = (CONFIG_FILE, MANIFEST_FILE, SWEEP_FILE, POLICY_FILE, LOCK_FILE, REPORT_MARKER)
"""The files by which a folder is npsco's (a run, a sweep, a report, an imported policy): only such a folder is walked
(a folder of other files is refused by the command before it reads anything there)."""


def is_npsco_folder(folder: str | os.PathLike) -> bool:
    """Whether `folder` holds one of npsco's own files (`MARKERS`); a link named so counts."""
    return any(os.path.lexists(Path(folder) / name) for name in MARKERS)


def check_tree(folder: str | os.PathLike, known: bool = False) -> Path:
    """`folder` if nothing below it is a symbolic link (walked without following links; the folder itself may be
    one), else a one-line NpscoError naming the first link found and where it points. A folder that does not exist
    passes, and so does one that is not npsco's (`is_npsco_folder`) unless it is `known` to be (a policy's training
    folder, which holds none of those files before its end)."""
    root = Path(folder)
    if not root.is_dir() or not (known or is_npsco_folder(root)):
        return root
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                path = Path(entry.path)
                if entry.is_symlink():
                    raise NpscoError(
                        f"{path}: a symbolic link inside {root} (to {os.readlink(path)}); npsco reads and writes "
                        "there only real folders and files, never through a link: put the real folder or file in "
                        "its place"
                    )
                if entry.is_dir(follow_symlinks=False):
                    stack.append(path)
    return root


def run_folder(path: str | os.PathLike, flag: str = "--out") -> Path:
    """The folder of a run, a sweep or an import that a command reads or writes, checked before anything there is
    read or written: a folder or to be one (`npsco.io.check_folder_path`, naming `flag`), with no link below it
    (`check_tree`)."""
    return check_tree(check_folder_path(path, flag))


def enclosing_run(path: str | os.PathLike) -> Path | None:
    """The nearest folder above `path` (by its name, not following links) that is npsco's (`is_npsco_folder`), or
    None."""
    for parent in Path(os.path.abspath(path)).parents:
        if parent.is_dir() and is_npsco_folder(parent):
            return parent
    return None


def output_folder(path: str | os.PathLike, flag: str = "--out") -> Path:
    """A folder for a command's own output (`npsco report --out`, `npsco evaluate --out`): `run_folder`, and, inside
    a run or sweep folder (`enclosing_run`), reached from it through real folders only."""
    out = run_folder(path, flag)
    run = enclosing_run(out)
    if run is not None:
        current = run
        for part in Path(os.path.relpath(os.path.abspath(out), run)).parts:
            current = current / part
            if current.is_symlink():
                raise NpscoError(
                    f"{flag} {path}: {current} is a symbolic link inside {run} (to {os.readlink(current)}); npsco "
                    f"writes there only real folders, never through a link: choose another {flag}, or put the real "
                    "folder in its place"
                )
    return out


def output_file(path: str | os.PathLike, flag: str = "--out") -> Path:
    """A file a command writes (`npsco threshold --out`), checked before anything is computed: not a folder, and its
    folder an `output_folder` (inside a run, reached through real folders only)."""
    target = Path(path)
    if target.is_dir():
        raise NpscoError(f"{flag} {path}: is a folder; give the path of a file to write")
    output_folder(target.parent if str(target.parent) else Path("."), flag)
    return target


def recorded(target: str | os.PathLike, run: str | os.PathLike) -> str:
    """How the run folder `run` records the path of `target` (another run, or a folder in one): relative to `run`
    when `target` lies in the folder that holds `run` (a sweep's runs, `runs/refs` beside `runs/ipd`), so that the two
    can be copied or moved together; else absolute. Both are resolved first."""
    target, run = Path(target).resolve(), Path(run).resolve()
    if run.parent == target or run.parent in target.parents:
        return os.path.relpath(target, run)
    return str(target)


def resolved(path: str | os.PathLike, run: str | os.PathLike) -> Path:
    """A path the run folder `run` recorded for one of its members (`recorded`), made absolute: a relative one
    against `run`."""
    return (Path(run) / path).resolve()


def readings(path: str | os.PathLike, run: str | os.PathLike) -> list[Path]:
    """The folders a path that a run's config.json records (`refs_from`, `ref_checkpoints`) may name, resolved: an
    absolute path itself; a relative one against the run (as `recorded` writes it), the current folder, or a folder
    above the run (an earlier npsco, or a run committed with paths from its repository's root)."""
    if Path(path).is_absolute():
        return [Path(path).resolve()]
    bases = [Path(run), Path.cwd(), *Path(os.path.abspath(run)).parents]
    return list(dict.fromkeys((base / path).resolve() for base in bases))


def recorded_run(path: str | os.PathLike, run: str | os.PathLike) -> Path:
    """The population run that `run`'s config.json names as `refs_from` (`readings`): the first reading that holds
    a manifest, else the first."""
    found = readings(path, run)
    return next((p for p in found if (p / MANIFEST_FILE).is_file()), found[0])


def borrowed_folder(run: str | os.PathLike, path: str, sources: list[Path]) -> Path:
    """The folder of a borrowed reference that the manifest of `run` records at `path`, if it is one of `sources`
    (where the run's configuration says it borrows from, resolved); else a one-line NpscoError. A manifest can point
    a reader nowhere else."""
    folder = resolved(path, run)
    if folder not in sources:
        where = ", ".join(str(s) for s in sources) if sources else "nowhere: its configuration borrows no reference"
        raise NpscoError(
            f"its path {path!r} is not where this run's config.json says it borrows its references from ({where})"
        )
    return folder
