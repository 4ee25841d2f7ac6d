"""The 16-core inputs of the grid projection and the scaled grid, measured in one call on a many-core machine.

    python benchmarks/device_grid_check.py --out DIR --probe-steps 4096 --grid SMALL.toml   # a small look here
    python benchmarks/device_grid_check.py --out DIR --workers 16 --deadline 480

On the lent 16-core machine (see the throughput README for the wheels), from the repository root there:

    SITE=$(mktemp -d) RES=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE .whl/*.whl
    export PYTHONPATH=$SITE:$PWD/src OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 MUJOCO_GL=disable
    python3 benchmarks/device_grid_check.py --out $RES/check --workers 16 --deadline 480
    tar czf $OUT/device_grid_check.tgz -C $RES check

Three parts, each written to DIR as soon as it ends:
1. `probe.json`: PPO on Hopper-v5 (default preset, no evaluation) for `--probe-steps` steps in one process alone, then
   in `--workers` processes at once: each process's wall seconds and steps/s (start-up included), the projection's
   `alone_speedup` and per-process full-load rate on that machine.
2. `sweep/`: `npsco sweep GRID --workers W` (default the paper grid scaled to 100k steps per policy), stopped at
   `--deadline` seconds after this script started if still running; its `sweep.json` holds the wall time and the
   utilisation, and its log is `sweep.log`.
3. `summary.json`: the parts' numbers, the machine's CPU count and the software versions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
GRID = "benchmarks/paper_campaign/grid_100k.toml"
NPSCO = [sys.executable, "-m", "npsco.cli"]


def wall_times(commands: list[list[str]], logs: list[Path]) -> list[float]:
    """Start `commands` at once (output to `logs`) and return each one's wall seconds, taken when *it* ends: the
    children are polled, so one that ends before an earlier-started one is not timed at that one's end."""
    start = time.perf_counter()
    files = [open(log, "w") for log in logs]  # noqa: SIM115  (closed below)
    children = [
        subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT) for cmd, f in zip(commands, files, strict=True)
    ]
    ends: dict[int, float] = {}
    try:
        while len(ends) < len(children):
            for i, child in enumerate(children):
                if i not in ends and child.poll() is not None:
                    ends[i] = time.perf_counter() - start
                    if child.returncode != 0:
                        raise SystemExit(f"a probe training failed: see {logs[i]}")
            time.sleep(0.02)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
        for f in files:
            f.close()
    return [ends[i] for i in range(len(children))]


def train_processes(count: int, steps: int, work: Path) -> list[dict[str, float]]:
    """`count` PPO Hopper-v5 trainings of `steps` steps started at once: each one's wall seconds and steps/s."""
    commands = [
        [
            *NPSCO,
            "train",
            "--env",
            "Hopper-v5",
            "--steps",
            str(steps),
            "--seed",
            str(i),
            "--no-progress",
            "--set",
            "eval_every=0",
            "--out",
            str(work / f"p{count}_{i}"),
        ]
        for i in range(count)
    ]
    walls = wall_times(commands, [work / f"p{count}_{i}.log" for i in range(count)])
    return [{"wall_seconds": round(w, 2), "steps_per_s": round(steps / w, 1)} for w in walls]


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="folder for the results (created)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--probe-steps", type=int, default=200_000, help="steps of each probe training (0: no probe)")
    ap.add_argument("--grid", default=GRID, help="the sweep grid (empty: no sweep)")
    ap.add_argument("--deadline", type=float, default=480.0, help="seconds after the start to stop the sweep")
    args = ap.parse_args(argv)
    if args.workers < 1 or args.probe_steps < 0 or args.deadline <= 0:
        ap.error("--workers must be >= 1, --probe-steps >= 0 and --deadline > 0")
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict = {
        "cpus": os.cpu_count(),
        "workers": args.workers,
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
    }

    if args.probe_steps:
        with tempfile.TemporaryDirectory() as tmp:
            alone = train_processes(1, args.probe_steps, Path(tmp))
            loaded = train_processes(args.workers, args.probe_steps, Path(tmp))
        alone_rate, loaded_rate = alone[0]["steps_per_s"], median([p["steps_per_s"] for p in loaded])
        probe = {
            "steps": args.probe_steps,
            "alone": alone,
            "at_once": loaded,
            "alone_steps_per_s": alone_rate,
            "at_once_median_steps_per_s": loaded_rate,
            "alone_speedup": round(alone_rate / loaded_rate, 3),
        }
        (args.out / "probe.json").write_text(json.dumps(probe, indent=2) + "\n")
        summary["probe"] = {k: v for k, v in probe.items() if k not in ("alone", "at_once")}
        print(f"probe: alone {alone_rate:,.0f} steps/s, {args.workers} at once {loaded_rate:,.0f} each", flush=True)

    if args.grid:
        sweep = args.out / "sweep"
        cmd = [*NPSCO, "sweep", args.grid, "--workers", str(args.workers), "--out", str(sweep)]
        with open(args.out / "sweep.log", "w") as log:
            child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            try:
                child.wait(timeout=max(1.0, args.deadline - (time.perf_counter() - t0)))
                summary["sweep_finished"] = child.returncode == 0
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGINT)  # the sweep stops its workers and writes its manifest
                child.wait()
                summary["sweep_finished"] = False
        record = sweep / "sweep.json"
        if record.is_file():
            data = json.loads(record.read_text())
            summary["sweep"] = {"status": data["status"], "wall_seconds": data["wall_seconds"]}
            summary["sweep"]["utilisation"] = data["utilisation"]
        print(f"sweep: {summary.get('sweep', 'no record')}", flush=True)

    summary["seconds"] = round(time.perf_counter() - t0, 1)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
