"""A population run directory as evaluation reads it: its trained members and their checkpoints, its settings, and a
fingerprint of everything an evaluation depends on (so that an up-to-date evaluation is reused, a stale one not)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from npsco.errors import NpscoError
from npsco.filecheck import POPULATION_CONFIG, THRESHOLD, Fields, problem, read_checked
from npsco.io import read_bytes, read_json
from npsco.layout import CONFIG_FILE, MANIFEST_FILE, THRESHOLD_FILE
from npsco.limits import MAX_MANIFEST_BYTES
from npsco.manifest import Member, check_borrowed, load_manifest, read_members
from npsco.task_ids import trust_task


@dataclass
class RunInfo:
    """What `evaluate_run` needs from a population run directory."""

    path: Path
    """The run directory, resolved."""
    env_id: str
    config: dict
    """The run's config.json ({} when it has none)."""
    members: list[Member]
    """The members whose training is done (others are listed in `pending`)."""
    pending: list[str]
    r0_default: float | None
    r0_metric: str = "deterministic"
    """The distance `r0_default` is measured in (threshold.json's `metric`)."""

    @property
    def references(self) -> list[Member]:
        return [m for m in self.members if m.role == "reference"]

    def checkpoint(self, member: Member) -> Path:
        """The member's policy file, resolved (a borrowed reference's lies in the run that trained it)."""
        return member.checkpoint_in(self.path).resolve()


def load_run(run: str | Path) -> RunInfo:
    """Read a population run directory (manifest.json, config.json, threshold.json, every field type-checked);
    NpscoError if it is not one. The task its config.json names is trusted (`npsco.task_ids`): the run's policies
    are evaluated on it, whatever task their checkpoints name."""
    manifest = load_manifest(run)
    path = Path(run)
    config = read_checked(path / CONFIG_FILE, POPULATION_CONFIG) if (path / CONFIG_FILE).exists() else {}
    trust_task((config.get("ppo") or {}).get("env_id"))
    members, pending = [], []
    for m in read_members(manifest):
        if m.status != "done":
            pending.append(m.name)
            continue
        check_borrowed(m, m.checkpoint_in(path))
        members.append(m)
    if not members:
        raise NpscoError(f"{run}: no trained policy yet (run `npsco population` to completion first)")
    r0 = manifest.get("r0_default")
    threshold = read_checked(path / THRESHOLD_FILE, THRESHOLD) if (path / THRESHOLD_FILE).exists() else {}
    if r0 is None:
        r0 = threshold.get("r0_default")
    return RunInfo(
        path=path.resolve(),
        env_id=manifest["env_id"],
        config=config,
        members=members,
        pending=pending,
        r0_default=r0,
        r0_metric=str(threshold.get("metric", "deterministic")),
    )


def run_fingerprint(info: RunInfo, episodes: int, seed: int, format_version: int) -> str:
    """A hash of everything an evaluation depends on: the manifest, each checkpoint's size and mtime, the settings."""
    parts = {
        "format_version": format_version,
        "episodes": episodes,
        "seed": seed,
        "manifest": read_bytes(info.path / MANIFEST_FILE, MAX_MANIFEST_BYTES).decode("utf-8", errors="replace"),
        "checkpoints": [[str(info.checkpoint(m)), *_stat(info.checkpoint(m))] for m in info.members],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _stat(path: Path) -> list[int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return [-1, -1]
    return [st.st_size, st.st_mtime_ns]


RUN_TASK = Fields({"ppo": Fields({"env_id": str}, required=("env_id",))}, required=("ppo",))
"""What a run's config.json (of `npsco train` or `npsco population`) says of its task."""


def trust_configured_task(path: str | Path) -> None:
    """Trust (`npsco.task_ids.trust_task`) the task that the user's own run configuration names for `path`: a
    population run directory, or a checkpoint (file or folder) of an `npsco train` run or of a population run
    (`RUN/refs/refI`, `RUN/novel/CHAIN/kK`). Nothing when there is no such config.json (another one is not a
    run's)."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    for run in (folder, folder.parent.parent, folder.parent.parent.parent):
        config = run / CONFIG_FILE
        if not config.is_file():
            continue
        data = read_json(config)
        if problem(data, RUN_TASK, "") is None and (data.get("command") == "train" or (run / MANIFEST_FILE).is_file()):
            trust_task(data["ppo"]["env_id"])
            return
