"""Copy the small, lasting part of a sweep or population folder into the repository: every finished policy and the
files that describe the runs, nothing that is large or only a log.

    python benchmarks/collect_runs.py runs/sweep/paper_campaign benchmarks/results/paper/sweep

Copied, in SRC's layout: each `policy.safetensors` (a finished policy), and the `sweep.json`, `manifest.json`,
`config.json` and `threshold.json` files beside them. Left out: `metrics.jsonl`, `checkpoints/`, `tensorboard/`, logs,
and each run's `evaluation/` cache (it is keyed to this machine's paths and file times; `npsco report` on the copy
measures again, on the same episode seeds).

The JSON files name some policies by the absolute paths they had on the machine that trained them (borrowed
references, `--ref-checkpoints`). In the copies, a path inside SRC is rewritten to the same place inside DST: in a
`manifest.json` relative to the manifest's folder (`../ppo/refs/ref0`: a manifest resolves its members' paths
against its population folder), elsewhere as DST given plus the rest (`config.json`'s `refs_from` is read from the
folder the tools run in: give DST relative to it, e.g. the repository root). `--map OLD=NEW` rewrites another
absolute prefix the same way (e.g. the checkout the sweep ran from, for `sweep.json`'s grid file). A path left
absolute is named in a warning. Running it again copies only what changed: collect as each population finishes.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

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


def rewrite_paths(value: Any, roots: dict[Path, Path], base: Path | None, left: set[str]) -> Any:
    """`value` (parsed JSON) with every absolute path under a key of `roots` moved under its value: relative to `base`
    when given, else as the value plus the rest. Paths left absolute are added to `left`."""
    if isinstance(value, dict):
        return {k: rewrite_paths(v, roots, base, left) for k, v in value.items()}
    if isinstance(value, list):
        return [rewrite_paths(v, roots, base, left) for v in value]
    if not (isinstance(value, str) and value.startswith("/")):
        return value
    path = Path(value)
    for old, new in roots.items():
        if path.is_relative_to(old):
            moved = new / path.relative_to(old)
            return os.path.relpath(moved, base) if base is not None else str(moved)
    left.add(value)
    return value


def collect(src: str | Path, dst: str | Path, extra: dict[str, str] | None = None) -> int:
    """Copy `files_to_copy(src)` into `dst`, absolute paths in the JSON files rewritten (module docstring; `extra`:
    more OLD -> NEW prefixes); returns how many files were new or changed."""
    src, dst = Path(src), Path(dst)
    if not src.is_dir():
        raise SystemExit(f"{src}: no such folder")
    if next(src.rglob("manifest.json"), None) is None:
        raise SystemExit(f"{src}: holds no population run (no manifest.json below it)")
    roots = {src.resolve(): dst, **{Path(old): Path(new) for old, new in (extra or {}).items()}}
    left: set[str] = set()
    changed = 0
    for path in files_to_copy(src):
        target = dst / path.relative_to(src)
        data = path.read_bytes()
        if path.suffix == ".json":
            base = target.parent if path.name == "manifest.json" else None
            doc = rewrite_paths(json.loads(data), roots, base, left)
            data = (json.dumps(doc, indent=2, allow_nan=False) + "\n").encode()
        if not target.exists() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
            changed += 1
    for value in sorted(left):
        print(f"warning: {value} stays absolute in the copy (outside {src}; --map OLD=NEW rewrites it)")
    return changed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", help="a sweep folder or a population run directory")
    p.add_argument("dst", help="where the copy goes (relative to the folder the tools will run from)")
    p.add_argument("--map", action="append", default=[], metavar="OLD=NEW", help="rewrite another absolute prefix")
    args = p.parse_args()
    if any("=" not in m for m in args.map):
        p.error("--map expects OLD=NEW")
    changed = collect(args.src, args.dst, dict(m.split("=", 1) for m in args.map))
    print(f"{changed} file(s) new or changed in {args.dst}")


if __name__ == "__main__":
    main()
