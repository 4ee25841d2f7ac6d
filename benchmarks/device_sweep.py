"""Lend a running sweep to another machine for a while: pack it, resume it there, merge back what finished.

A sweep's population folders name their borrowed references by absolute path, so the other machine resumes the sweep
at the same absolute path as here (the campaign checkout's). The three steps, for a sweep run from a checkout C pinned
at commit X (`git worktree add`), with the other machine reached by a tool that copies this repository over and brings
back files written to $OUT:

    # 1. here, in this repository's root: the sweep's code, grid and state (no logs) into .devrun/, wheels into .whl/
    python benchmarks/device_sweep.py pack C runs/sweep/NAME GRID --commit X --dest .devrun
    # 2. there, in the copied repository's root (stops the sweep after DEADLINE seconds; returns $OUT/device.tgz)
    bash benchmarks/device_sweep.sh DEADLINE
    # 3. here, with the sweep in C stopped (its parent process rewrites manifests): take the policies that finished
    python benchmarks/device_sweep.py merge device.tgz C/runs/sweep/NAME

Step 1 needs the other machine's Python packages only where it lacks them (`--wheels`: gymnasium, mujoco and the small
packages npsco needs, for CPython 3.12 on x86-64). The sweep here may go on meanwhile (best on other chains: the lent
machine resumes every policy that is ready), but must be stopped while merging, as its parent process rewrites the
manifests. Merging takes a policy only where the sweep here has not finished it, and only one trained as it would
have been here (same seed, same threshold, against the same policies); any other, and any policy the other machine
left unfinished, stays pending here and trains again from its seed. Step 2 stops the sweep at DEADLINE seconds after
it starts (installing the wheels and unpacking included), then archives: leave a minute to the command's limit.
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from npsco.io import atomic_write_json, fresh_dir, read_json
from npsco.manifest import population_dirs

WHEELS = (
    "gymnasium==1.4.0",
    "farama-notifications==0.0.6",
    "mujoco==4.0.0",
    "mujoco-core==4.0.0",
    "mujoco-studio==4.0.0",
    "websockets==15.0.1",
    "glfw==2.11.0",
    "pyopengl==3.1.10",
    "threadpoolctl==3.8.0",
)
"""What the lent machine lacks for npsco's CPU training (it has torch, numpy, numba, scipy, matplotlib, safetensors,
tensorboard, tqdm), pinned to the versions of this project's machine so that both simulate the same physics."""
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
LEFT_OUT = ("tensorboard", "checkpoints", "evaluation")
"""Folders not packed: logs and snapshots a resumed sweep does not read."""


def pack(campaign: Path, sweep: str, grid: str, commit: str, dest: Path, wheels: bool) -> None:
    """Write into `dest` the campaign's code (`src/` at `commit`), its grid, its sweep folder (`sweep.tgz`, without
    `LEFT_OUT`) and the campaign's absolute path (`campaign_dir.txt`); with `wheels`, download `WHEELS` into .whl/."""
    campaign = campaign.resolve()
    fresh_dir(dest)
    archive = subprocess.run(
        ["git", "-C", str(campaign), "archive", commit, "src", grid], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    with tarfile.open(dest / "sweep.tgz", "w:gz") as tar:
        tar.add(campaign / sweep, arcname=sweep, filter=lambda info: None if _left_out(info.name) else info)
    (dest / "campaign_dir.txt").write_text(f"{campaign}\n{sweep}\n{grid}\n")
    if wheels:
        platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
             "3.12", "--implementation", "cp", *platforms, "--platform", "any", "-d", ".whl", *WHEELS],
            check=True,
        )  # fmt: skip


def _left_out(name: str) -> bool:
    return bool(set(Path(name).parts) & set(LEFT_OUT))


def merge_population(theirs: Path, ours: Path) -> list[str]:
    """Copy into population folder `ours` each policy that `theirs` finished and `ours` has not (its folder and its
    manifest entry), where it was trained as it would have been here: the same seed and path, the same threshold, and
    every policy it was trained against the same entry on both sides (or merged just before it). Returns the merged
    members' names; a policy that does not fit stays pending here (it trains again from its seed)."""
    mine = read_json(ours / "manifest.json")
    other = read_json(theirs / "manifest.json")
    if mine.get("r0_default") not in (None, other.get("r0_default")):
        print(f"{ours}: r0 differs there ({other.get('r0_default')} against {mine['r0_default']} here); not merged")
        return []
    theirs_by_name = {member["name"]: member for member in other["members"]}
    ours_by_name = {member["name"]: member for member in mine["members"]}
    merged: list[str] = []
    for i, member in enumerate(mine["members"]):
        new = theirs_by_name.get(member["name"])
        if member["status"] == "done" or new is None or new["status"] != "done":
            continue
        fits = (new["seed"], new["path"]) == (member["seed"], member["path"])
        fits = fits and (theirs / new["path"] / "policy.safetensors").is_file()
        fits = fits and all(
            ref in merged or ours_by_name.get(ref) == theirs_by_name.get(ref) for ref in new["references"]
        )  # e.g. our k0 trained here and theirs there differ: their k1 learnt against the other k0
        if not fits:
            print(f"{ours}: {member['name']} was trained against other policies or settings there; not merged")
            continue
        # replaces an interrupted start here: it would be trained again from scratch anyway
        shutil.copytree(theirs / new["path"], fresh_dir(ours / new["path"]), dirs_exist_ok=True)
        mine["members"][i] = ours_by_name[new["name"]] = new
        merged.append(new["name"])
    if merged:
        if mine.get("r0_default") is None and other.get("r0_default") is not None:
            mine["r0_default"] = other["r0_default"]  # with the threshold file it was computed into, as one unit
            atomic_write_json(ours / "threshold.json", read_json(theirs / "threshold.json"))
        atomic_write_json(ours / "manifest.json", mine)
    return merged


def merge(archive: Path, sweep: Path) -> list[str]:
    """Merge every population of the returned `archive` (device.tgz) into the sweep folder `sweep`, references
    first; returns the merged policies as `<population folder>/<name>`. A population the sweep here has not started
    is named, not copied (resume here first, or merge it by hand)."""
    if not (sweep / "sweep.json").is_file():
        raise SystemExit(f"{sweep}: no sweep.json; give the sweep folder itself")
    merged = []
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        roots = [path.parent for path in Path(tmp).rglob("sweep.json")]
        if len(roots) != 1:
            raise SystemExit(f"{archive}: holds {len(roots)} sweep folders (sweep.json), not one")
        for theirs in population_dirs(roots[0]):  # in grid order: the references before the methods
            rel = theirs.relative_to(roots[0])
            if not (sweep / rel / "manifest.json").is_file():
                print(f"{rel}: not started here; not merged")
                continue
            merged += [f"{rel}/{name}" for name in merge_population(theirs, sweep / rel)]
    return merged


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="pack a sweep, its code and its grid into DEST")
    p.add_argument("campaign", type=Path, help="the checkout the sweep runs from")
    p.add_argument("sweep", help="the sweep folder, relative to the checkout")
    p.add_argument("grid", help="the grid file, relative to the checkout")
    p.add_argument("--commit", required=True, help="the commit the checkout is pinned at")
    p.add_argument("--dest", type=Path, default=Path(".devrun"))
    p.add_argument("--wheels", action="store_true", help="also download the lent machine's missing wheels to .whl/")
    m = sub.add_parser("merge", help="merge the policies a returned archive finished into the sweep folder here")
    m.add_argument("archive", type=Path)
    m.add_argument("sweep", type=Path, help="the sweep folder here (its sweep must be stopped)")
    args = parser.parse_args(argv)
    if args.command == "pack":
        pack(args.campaign, args.sweep, args.grid, args.commit, args.dest, args.wheels)
        print(f"packed {args.campaign}/{args.sweep} at {args.commit} into {args.dest}")
    else:
        merged = merge(args.archive, args.sweep)
        print(f"merged {len(merged)} finished policies: {', '.join(merged) or 'none'}")


if __name__ == "__main__":
    main()
