"""npsco's own cost per env step, two checkouts against each other: `step_split.py` run in each, alternating.

    python benchmarks/step_split_ab.py BEFORE AFTER --repeats 5 --out benchmarks/results/throughput/step_split_ab

BEFORE and AFTER are checkouts (each with its `.venv`, e.g. `git worktree add ../before REV && bash scripts/setup.sh`).
Each repeat runs `step_split.py` in BEFORE, then in AFTER (the order alternating from one repeat to the next, so a drift
of the machine falls on both), on the paper's three tasks. npsco's own cost is the rollout less the env step, plus the
advantages, plus the update (CPU microseconds per env step). Reported per task: each checkout's median over repeats,
and the ratio AFTER / BEFORE of the repeats' pairs, its median and a 95% bootstrap CI of the median, for the own cost
and for the whole step (the env step included: a change to npsco's env step moves that one); the env step's median
before and after. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from step_split import OWN, bootstrap_median_ci, own_cost  # noqa: E402  (the sibling script that is measured)

TASKS = ("Hopper-v5", "Walker2d-v5", "HalfCheetah-v5")


def run_split(checkout: Path, out: Path, iterations: int, tasks: list[str]) -> dict[str, dict[str, float]]:
    """`step_split.py` of `checkout` on `tasks`, run by that checkout's own Python; its per-task rows."""
    python = checkout / ".venv/bin/python"
    command = [str(python), "benchmarks/step_split.py", "--iterations", str(iterations), "--out", str(out)]
    command += [a for task in tasks for a in ("--env", task)]
    subprocess.run(command, cwd=checkout, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.with_suffix(".json").read_text())["us_per_step"]


def revision(checkout: Path) -> str:
    """The short commit hash a checkout is at."""
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout.strip()


def check_checkouts(ap: argparse.ArgumentParser, *checkouts: Path) -> None:
    """Refuse (as a usage error) a checkout without its own `.venv`."""
    for checkout in checkouts:
        if not (checkout / ".venv/bin/python").exists():
            ap.error(f"{checkout} has no .venv: run scripts/setup.sh there first")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path, help="the checkout measured as the base")
    ap.add_argument("after", type=Path, help="the checkout measured against it")
    ap.add_argument("--repeats", type=int, default=5, help="pairs of runs (default 5)")
    ap.add_argument("--iterations", type=int, default=25, help="measured iterations per task and run (default 25)")
    ap.add_argument("--env", action="append", help="a task (repeatable; default: the paper's three)")
    ap.add_argument("--out", type=Path, required=True, help="results path without suffix (.md and .json)")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    tasks = args.env or list(TASKS)
    check_checkouts(ap, args.before, args.after)
    revs = {"before": revision(args.before), "after": revision(args.after)}
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for name in order:
                checkout = args.before if name == "before" else args.after
                runs[name].append(run_split(checkout.resolve(), Path(tmp) / f"{name}{r}", args.iterations, tasks))
                print(
                    f"repeat {r + 1}/{args.repeats} {name}: "
                    + ", ".join(f"{t} {own_cost(runs[name][-1][t]):.1f}" for t in tasks),
                    flush=True,
                )
    load_end = os.getloadavg()[0]
    rows = {}
    for task in tasks:
        before = np.array([own_cost(run[task]) for run in runs["before"]])
        after = np.array([own_cost(run[task]) for run in runs["after"]])
        ratio = after / before
        total_ratio = np.array(
            [a[task]["total"] / b[task]["total"] for a, b in zip(runs["after"], runs["before"], strict=True)]
        )
        parts = {
            name: {p: float(np.median([run[task][p] for run in runs[name]])) for p in (*OWN, "env step", "total")}
            for name in runs
        }
        rows[task] = {
            "before_us": before.tolist(),
            "after_us": after.tolist(),
            "ratio": ratio.tolist(),
            "ratio_median": float(np.median(ratio)),
            "ratio_ci95": bootstrap_median_ci(ratio),
            "total_ratio": total_ratio.tolist(),
            "total_ratio_median": float(np.median(total_ratio)),
            "total_ratio_ci95": bootstrap_median_ci(total_ratio),
            "parts_median_us": parts,
        }
    lines = [
        "# npsco's own cost per env step, before and after",
        "",
        f"`python benchmarks/step_split_ab.py BEFORE AFTER --repeats {args.repeats} --iterations {args.iterations}`"
        f" with BEFORE at {revs['before']}, AFTER at {revs['after']}",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {load_start:.1f} before, "
        f"{load_end:.1f} after. Own cost: the rollout less the env step, plus the advantages, plus the update (CPU "
        "microseconds per env step, `step_split.py`); the median over repeats, and the ratio of each repeat's pair "
        "(median, 95% bootstrap CI of the median). Total: the whole step, the env step included.",
        "",
        "| task | own cost before | own cost after | after / before | 95% CI | rollout less env (after) "
        "| update (after) | env step (before) | env step (after) | total after / before | 95% CI |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for task, row in rows.items():
        before_parts, after_parts = row["parts_median_us"]["before"], row["parts_median_us"]["after"]
        lo, hi = row["ratio_ci95"]
        total_lo, total_hi = row["total_ratio_ci95"]
        lines.append(
            f"| {task} | {np.median(row['before_us']):.1f} | {np.median(row['after_us']):.1f} | "
            f"{row['ratio_median']:.2f} | [{lo:.2f}, {hi:.2f}] | {after_parts['rollout, less the env step']:.1f} | "
            f"{after_parts['update']:.1f} | {before_parts['env step']:.1f} | {after_parts['env step']:.1f} | "
            f"{row['total_ratio_median']:.3f} | [{total_lo:.3f}, {total_hi:.3f}] |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(text)
    record = {
        "revisions": revs,
        "repeats": args.repeats,
        "iterations": args.iterations,
        "tasks": rows,
        "load_average": [load_start, load_end],
    }
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
