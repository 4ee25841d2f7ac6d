"""Copy the small, lasting part of a sweep or population folder into the repository: every finished policy and the
files that describe the runs, nothing that is large or only a log.

    python benchmarks/collect_runs.py runs/sweep/paper_campaign benchmarks/results/paper/sweep

Copied, in SRC's layout: each `policy.safetensors` (a finished policy), and the `sweep.json`, `manifest.json`,
`config.json` and `threshold.json` files beside them. Left out: `metrics.jsonl`, `checkpoints/`, `tensorboard/`, logs,
and each run's `evaluation/` cache (it is keyed to this machine's paths and file times; `npsco report` on the copy
measures again, on the same episode seeds). A manifest names
borrowed references by the absolute path they had on the machine that trained them; in the copied JSON files SRC's
absolute path becomes the path from the file's own folder to DST (`../..`), which is how a manifest resolves its
members' paths: the copy works wherever it lies. Running it again copies only what changed: collect as each
population finishes.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

KEEP = ("policy.safetensors", "sweep.json", "manifest.json", "config.json", "threshold.json")
"""The files copied wherever they stand under SRC."""
SKIP_DIRS = ("checkpoints", "tensorboard", "evaluation")
"""Folders never copied (in-training snapshots, TensorBoard logs, evaluation caches)."""


def files_to_copy(src: Path) -> list[Path]:
    """The files under `src` worth keeping (sorted): those named in `KEEP`, outside `SKIP_DIRS`."""
    return [
        path
        for path in sorted(src.rglob("*"))
        if path.name in KEEP and path.is_file() and not set(path.relative_to(src).parts) & set(SKIP_DIRS)
    ]


def collect(src: str | Path, dst: str | Path) -> int:
    """Copy `files_to_copy(src)` into `dst`, SRC's absolute path in JSON text replaced by the relative
    path from the file's folder to `dst`; returns how many files were new or changed."""
    src, dst = Path(src), Path(dst)
    if not src.is_dir():
        raise SystemExit(f"{src}: no such folder")
    if next(src.rglob("manifest.json"), None) is None:
        raise SystemExit(f"{src}: holds no population run (no manifest.json below it)")
    old = str(src.resolve()).encode()
    changed = 0
    for path in files_to_copy(src):
        data = path.read_bytes()
        target = dst / path.relative_to(src)
        if path.suffix == ".json":
            data = data.replace(old, os.path.relpath(dst, target.parent).encode())
        if not target.exists() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
            changed += 1
    return changed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", help="a sweep folder or a population run directory")
    p.add_argument("dst", help="where the copy goes (relative to the folder the tools will run from)")
    args = p.parse_args()
    changed = collect(args.src, args.dst)
    print(f"{changed} file(s) new or changed in {args.dst}")


if __name__ == "__main__":
    main()
