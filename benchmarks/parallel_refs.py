"""Wall time of training a population's reference policies with 1 worker and with N workers (local process pool).

    .venv/bin/python benchmarks/parallel_refs.py                    # 4 maze references at 150k steps, 1 vs 2 workers
    .venv/bin/python benchmarks/parallel_refs.py --refs 2 --steps 20000 --workers 1 2

Each configuration trains the same references (seeds 0..R-1) from scratch in a fresh folder, through
`Population.run(executor)`, i.e. the code path of `npsco sweep`; the forkserver is started before the timing. Each job
also reports its worker's CPU seconds: their sum over the wall time is the number of cores the run obtained, which
tells a slow machine (others' jobs take the cores) from a slow pool. The load average is recorded before and after each
run: on a shared machine other jobs compete for the cores. Results: benchmarks/results/throughput/parallel_refs.json
and .md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

from npsco.fields import apply_overrides
from npsco.io import atomic_write_json, atomic_write_text
from npsco.methods.settings import MethodConfig
from npsco.parallel import LocalExecutor
from npsco.population import Population, PopulationConfig
from npsco.population_jobs import PRELOAD
from npsco.ppo.config import preset
from npsco.tasks import MAZE_ID

RESULTS = Path(__file__).resolve().parent / "results" / "throughput"


def cpu_timed(fn, *args):
    """Run a job and return (its result, the CPU seconds of its worker process): each job has a fresh process."""
    result = fn(*args)
    return result, time.process_time()


class TimedPopulation(Population):
    """The population of `npsco sweep`, its jobs wrapped to report their worker's CPU time."""

    cpu_seconds: list[float]

    def ready(self, busy):
        jobs = super().ready(busy)
        for job in jobs:
            job.fn, job.args = cpu_timed, (job.fn, *job.args)
        return jobs

    def finished(self, job, result):
        result, cpu = result
        self.cpu_seconds.append(round(cpu, 1))
        return super().finished(job, result)


def _load_note(runs: list[dict]) -> str:
    """Say whether other jobs competed for the cores: the 1-minute load average before each run against the CPU
    count."""
    worst = max(r["load_before"][0] for r in runs)
    if worst > 0.5 * (os.cpu_count() or 1):
        return f"the machine was shared: 1-minute load average up to {worst} before a run; see the load columns"
    return f"the machine was otherwise idle: 1-minute load average at most {worst} before a run"


def run_once(refs: int, steps: int | None, workers: int, root: Path) -> dict:
    ppo = preset(MAZE_ID)
    if steps:
        ppo = apply_overrides(ppo, [f"total_timesteps={steps}"])
    config = PopulationConfig(ppo=ppo, method=MethodConfig.of("ppo"), refs=refs, novel=0)
    out = root / f"workers{workers}"
    load_before = os.getloadavg()
    with LocalExecutor(workers, PRELOAD) as executor:
        start = time.perf_counter()
        pop = TimedPopulation(out, config, progress=False, log=lambda line: None)
        pop.cpu_seconds = []
        members = pop.run(executor)
        wall = time.perf_counter() - start
    return {
        "workers": workers,
        "wall_seconds": round(wall, 1),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "policy_seconds": [m.wall_seconds for m in members],
        "worker_cpu_seconds": pop.cpu_seconds,
        "cores_obtained": round(sum(pop.cpu_seconds) / wall, 2),
        "final_returns": [m.final_eval["return_mean"] for m in members],
    }


def _autogroup() -> str | None:
    """Linux's per-session CPU fair share: with it on, a session gets one share of the cores however many processes
    it runs, so on a machine busy with other sessions more workers cannot get more CPU."""
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip()
    except OSError:
        return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--refs", type=int, default=4, help="reference policies (default 4)")
    p.add_argument("--steps", type=int, default=None, help="steps per policy (default: the maze preset's 150k)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to time (default 1 2)")
    p.add_argument("--out", default=str(RESULTS / "parallel_refs"), help="results path without suffix")
    args = p.parse_args()

    with LocalExecutor(1, PRELOAD) as warm:  # start the forkserver (it imports torch once) before anything is timed
        warm.submit(os.getpid).result()
    runs = []
    with tempfile.TemporaryDirectory(prefix="npsco-parallel-refs-") as tmp:
        for w in args.workers:
            print(f"{args.refs} references, {w} worker(s) ...", flush=True)
            runs.append(run_once(args.refs, args.steps, w, Path(tmp)))
            print(
                f"  {runs[-1]['wall_seconds']} s (load {runs[-1]['load_before']} -> {runs[-1]['load_after']})",
                flush=True,
            )
    base = next((r for r in runs if r["workers"] == 1), runs[0])["wall_seconds"]
    for r in runs:
        r["speedup_vs_1_worker"] = round(base / r["wall_seconds"], 2)
    import numpy
    import torch

    steps = args.steps or preset(MAZE_ID).total_timesteps
    doc = {
        "benchmark": "parallel_refs",
        "command": "python benchmarks/parallel_refs.py " + shlex.join(sys.argv[1:]),
        "task": MAZE_ID,
        "refs": args.refs,
        "steps_per_policy": steps,
        "runs": runs,
        "same_results": all(r["final_returns"] == runs[0]["final_returns"] for r in runs),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": numpy.__version__,
            "sched_autogroup": _autogroup(),
        },
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "note": _load_note(runs),
    }
    out = Path(args.out)
    atomic_write_json(out.with_suffix(".json"), doc)
    lines = [
        f"# Parallel reference training ({doc['date']})",
        "",
        f"`{doc['command']}` — {args.refs} PPO references on the Four Reward Maze, {steps:,} steps each, local "
        f"process pool (`Population.run(executor)`, the path `npsco sweep` takes).",
        "",
        "| workers | wall (s) | speed-up vs 1 worker | wall s per policy | CPU s per policy | cores obtained "
        "(CPU s / wall s) | load avg before (1/5/15 min) | load avg after |",
        "|---:|---:|---:|---|---|---:|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['workers']} | {r['wall_seconds']} | {r['speedup_vs_1_worker']}x | "
            f"{', '.join(map(str, r['policy_seconds']))} | {', '.join(map(str, r['worker_cpu_seconds']))} | "
            f"{r['cores_obtained']} | "
            f"{' / '.join(map(str, r['load_before']))} | {' / '.join(map(str, r['load_after']))} |"
        )
    lines += [
        "",
        f"Same final returns in every configuration: {doc['same_results']}.",
        "",
        f"Machine: {doc['machine']['cpus']} CPUs, {doc['machine']['platform']}, Python {doc['machine']['python']}, "
        f"torch {doc['machine']['torch']}, numpy {doc['machine']['numpy']}, sched_autogroup_enabled = "
        f"{doc['machine']['sched_autogroup']}. {doc['note']}.",
        "",
    ]
    atomic_write_text(out.with_suffix(".md"), "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
