"""Should envpool be the default backend on MuJoCo? Its speed at npsco's default settings, against Gymnasium's.
Also compares any other backend with Gymnasium's `SyncVectorEnv` (`--backend auto`: npsco's `LeanSyncVectorEnv`).

    python benchmarks/envpool_default.py                 # Hopper-v5, default preset (1 env x 2048), 3 repeats
    python benchmarks/envpool_default.py --steps 20480 --repeats 1      # a quick look
    python benchmarks/envpool_default.py --backend auto --out benchmarks/results/throughput/lean_env
    python benchmarks/envpool_default.py --backend auto --set num_envs=8 --set num_steps=256 --out /tmp/lean8
    python benchmarks/envpool_default.py --backend auto --baseline-npsco OLD/.venv/bin/npsco   # against older code

Each repeat trains the same `npsco train` command twice in fresh processes, `--env-backend sync` and
`--env-backend envpool` (or `--backend`; the order alternating), no evaluation; what is compared is each process's
CPU seconds (user + sys, from `os.wait4`), less sensitive to other processes on this shared machine than wall time.
The ratio is the median of the repeats' ratios, with their min and max. A process's start-up (imports, env
construction) is in its CPU time too: it is measured once per backend with `--steps 2048` and subtracted.

`--baseline-npsco CMD` runs the `sync` side with another checkout's `npsco` command (e.g. a `git worktree` of an
older commit with its own .venv): the whole speed-up since that code, not only the backend's.

Writes benchmarks/results/throughput/envpool_default.{md,json} (or `--out`.{md,json}).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks/results/throughput/envpool_default"
NPSCO = [str(Path(sys.executable).parent / "npsco")]


def cpu_seconds(
    env: str, backend: str, steps: int, sets: tuple[str, ...] = (), npsco: list[str] | None = None
) -> float:
    """CPU seconds of one `npsco train` process (no evaluation, no checkpoints but the final one); `npsco`: the
    command to run (default: this checkout's)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [*(npsco or NPSCO), "train", "--env", env, "--steps", str(steps), "--env-backend", backend]
        cmd += ["--no-progress"]
        cmd += ["--set", "eval_every=0", "--out", str(Path(tmp) / "run")]
        for kv in sets:
            cmd += ["--set", kv]
        with open(Path(tmp) / "stderr", "w+b") as err:  # a file, not a pipe: a long stderr cannot block the child
            child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "MUJOCO_GL": "egl"})
            _, status, usage = os.wait4(child.pid, 0)
            if status != 0:
                err.seek(0)
                raise SystemExit(f"{' '.join(cmd)} failed: {err.read().decode()}")
        return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="Hopper-v5")
    ap.add_argument("--steps", type=int, default=61_440, help="training steps per process (whole 2048-step batches)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="envpool", choices=("envpool", "auto", "async"), help="compared with sync")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to npsco train")
    ap.add_argument("--out", type=Path, default=OUT, help="results path without suffix (.md and .json are written)")
    ap.add_argument("--baseline-npsco", type=Path, help="another checkout's npsco command for the sync side")
    args = ap.parse_args(argv)
    other, out, sets = args.backend, args.out, tuple(args.set)
    if args.steps % 2048 or args.steps <= 2048:
        ap.error("--steps must be a multiple of 2048 above 2048 (whole batches; one is the start-up run's)")

    if args.baseline_npsco is not None and not args.baseline_npsco.is_file():
        ap.error(f"--baseline-npsco {args.baseline_npsco}: no such command")
    commands = {"sync": [str(args.baseline_npsco)] if args.baseline_npsco else NPSCO, other: NPSCO}
    load_before = os.getloadavg()[0]
    start = {b: cpu_seconds(args.env, b, 2048, sets, commands[b]) for b in ("sync", other)}
    runs: list[dict[str, float]] = []
    for r in range(args.repeats):
        order = ("sync", other) if r % 2 == 0 else (other, "sync")
        row = {b: cpu_seconds(args.env, b, args.steps, sets, commands[b]) for b in order}
        runs.append(row)
        print(f"repeat {r}: " + ", ".join(f"{b} {row[b]:.1f} CPU s" for b in order), flush=True)
    trained = args.steps - 2048  # the start-up run trained one batch too

    def rate(b: str, row: dict[str, float]) -> float:
        return trained / (row[b] - start[b])

    ratios = [rate(other, row) / rate("sync", row) for row in runs]
    result = {
        "command": "python benchmarks/envpool_default.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "env": args.env,
        "steps": args.steps,
        "set": list(sets),
        "startup_cpu_seconds": start,
        "runs_cpu_seconds": runs,
        "backend": other,
        "baseline_npsco": None if args.baseline_npsco is None else str(args.baseline_npsco),
        "steps_per_cpu_second": {b: statistics.median(rate(b, row) for row in runs) for b in ("sync", other)},
        f"ratio_{other}_to_sync": statistics.median(ratios),
        "ratio_min_max": [min(ratios), max(ratios)],
        "load_average_before_after": [load_before, os.getloadavg()[0]],
    }
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    sps = result["steps_per_cpu_second"]
    baseline = f", run by `{args.baseline_npsco}`" if args.baseline_npsco else ""
    names = {"envpool": "envpool", "auto": "auto (npsco's LeanSyncVectorEnv)", "async": "async (Gymnasium)"}
    out.with_suffix(".md").write_text(
        f"# The {other} backend at npsco's default settings\n\n"
        f"`{result['command']}` on {result['date']} (2 cores; load average "
        f"{load_before:.1f} before, {result['load_average_before_after'][1]:.1f} after).\n\n"
        f"{args.env}, `default` preset (1 env x 2048 steps, minibatch 64, 10 epochs)"
        + (f" with `--set {' --set '.join(sets)}`" if sets else "")
        + ", no evaluation; steps per CPU "
        f"second of training (start-up subtracted), median over {args.repeats} alternating repeats.\n\n"
        "| backend | steps per CPU second |\n|---|---:|\n"
        f"| sync (Gymnasium){baseline} | {sps['sync']:,.0f} |\n| {names[other]} | {sps[other]:,.0f} |\n\n"
        f"{other} / sync: **{statistics.median(ratios):.2f}x** [{min(ratios):.2f}, {max(ratios):.2f}].\n"
    )
    print(out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
