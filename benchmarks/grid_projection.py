"""Projected wall time of a sweep grid on W workers, from measured per-policy times and the grid's dependencies.

    python benchmarks/grid_projection.py benchmarks/paper_campaign/grid.toml --machine here
    python benchmarks/grid_projection.py benchmarks/paper_campaign/grid.toml --machine 16-core
    python benchmarks/grid_projection.py GRID --machine here --steps 100000 --ppo-seconds Hopper-v5=40 ...

The grid is planned as `npsco sweep` plans it (`npsco.grid.plan`): per task R references, then per method a threshold
job (novelty methods without an absolute r0) and its chains of K policies, each policy after the one before it. A
policy's time is its task's PPO policy time (measured wall seconds of one policy, training and evaluation, while the
machine runs as many processes as it has workers) times `steps / reference steps`, divided by its method's speed
relative to PPO (`benchmarks/results/throughput/throughput_methods.json`, measured on Hopper-v5 and applied to every
task). The schedule is simulated as the scheduler runs it: whenever a worker is free, the ready job on the longest
remaining path starts. On a machine whose processes run faster when fewer run (`--alone-speedup`), a job's speed
follows the number running, linearly from the speed-up with one process to 1 with W.

Prints a markdown report (the arithmetic: per-policy times, total work, critical path, simulated wall, utilisation) and
with `--json` writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from npsco.grid import load_grid, plan
from npsco.population_jobs import chains_of
from npsco.tasks import task_name

ROOT = Path(__file__).resolve().parent.parent
METHODS_JSON = ROOT / "benchmarks/results/throughput/throughput_methods.json"
CAMPAIGN = ROOT / "benchmarks/results/paper/sweep"

MACHINES = {
    "here": {
        "workers": 2,
        "alone_speedup": 1.0,  # one policy's CPU time is the same alone or beside another (parallel_refs.md)
        "ppo_seconds": None,  # the paper campaign's references: 2 workers on these 2 cores
        "threshold_seconds": 30.0,
        "note": "2 cores; PPO policy times: median wall seconds of the paper campaign's 5 references per task "
        "(1M steps, 2 workers on 2 cores, benchmarks/results/paper/sweep/*/ppo/manifest.json)",
    },
    "16-core": {
        "workers": 16,
        "alone_speedup": 3700 / 2318,  # PPO Hopper alone 3.7k steps/s, 2318 per process with 16 at once
        "ppo_seconds": {"Hopper-v5": 1e6 / 2318},  # other tasks: scaled as their campaign times here
        "threshold_seconds": 30.0,
        "note": "16 cores (the lent machine); PPO Hopper-v5 2318 steps/s per process with 16 trainings at once and "
        "3.7k alone (measured there, 1M steps, default preset); the other tasks scaled by their time relative to "
        "Hopper in the paper campaign here",
    },
}


@dataclass
class Task:
    """One job of the simulated schedule."""

    name: str
    seconds: float
    """Wall seconds when the machine runs W jobs at once."""
    after: list[str] = field(default_factory=list)
    """Jobs that must end before it starts."""


def campaign_ppo_seconds() -> dict[str, float]:
    """Per task, the median wall seconds of the paper campaign's PPO references (1M steps, 2 workers, 2 cores)."""
    out = {}
    for manifest in sorted(CAMPAIGN.glob("*/ppo/manifest.json")):
        members = json.loads(manifest.read_text())["members"]
        task = manifest.parent.parent.name
        out[task] = statistics.median(m["wall_seconds"] for m in members if m["role"] == "reference")
    return out


def method_ratios(path: Path = METHODS_JSON) -> dict[str, float]:
    """Each method's steps/s over PPO's (paired, Hopper-v5), from `benchmarks/throughput_methods.py`'s JSON."""
    data = json.loads(path.read_text())["methods"]
    return {name: row["ratio_to_ppo"] for name, row in data.items()}


def _shown(path: Path) -> str:
    """`path` relative to the checkout where it lies in it."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def grid_jobs(
    grid_file: str,
    ppo_seconds: dict[str, float],
    ratios: dict[str, float],
    steps: int | None,
    threshold_seconds: float,
    reference_steps: int,
    saved: dict[str, float] | None = None,
) -> list[Task]:
    """The grid's jobs with their times and dependencies. `saved`: per task, the share of a PPO policy's time that a
    later speed-up of the env step removes from every policy, whatever its method (`policy_seconds`)."""
    saved = saved or {}
    grid = load_grid(grid_file)
    if steps is not None:
        grid.options.steps = steps
    jobs: list[Task] = []
    for spec in plan(grid):
        task = task_name(spec.task)
        scale = spec.config.ppo.policy_steps / reference_steps
        refs = [f"{task}/ppo/ref{i}" for i in range(spec.config.refs)]
        if spec.refs_of is None:
            jobs += [Task(name, policy_seconds(ppo_seconds[task] * scale, 1.0, saved.get(task, 0.0))) for name in refs]
            continue
        method = spec.config.method.method
        key = "lagrangian-state" if method == "lagrangian" and spec.config.method.metric == "state" else method
        start = refs
        if method != "ppo" and spec.config.method.r0 is None:
            jobs.append(Task(f"{spec.path}/threshold", threshold_seconds, refs))
            start = [f"{spec.path}/threshold"]
        for chain in chains_of(spec.config):
            before = start
            for k in range(spec.config.novel):
                name = f"{spec.path}/{chain.name}/k{k}"
                seconds = policy_seconds(ppo_seconds[task] * scale, ratios[key], saved.get(task, 0.0))
                jobs.append(Task(name, seconds, before))
                before = [name]
    return jobs


def policy_seconds(ppo: float, ratio: float, saved: float = 0.0) -> float:
    """A policy's seconds: its task's PPO policy time `ppo` over its method's speed relative to PPO, less the time
    a faster env step saves, `saved` x `ppo` (the same env steps in every method, so the same seconds saved)."""
    return ppo / ratio - saved * ppo


def longest_paths(jobs: list[Task]) -> dict[str, float]:
    """Per job, the seconds of the longest sequence of jobs that starts with it."""
    children: dict[str, list[str]] = {job.name: [] for job in jobs}
    for job in jobs:
        for parent in job.after:
            children[parent].append(job.name)
    by_name = {job.name: job for job in jobs}
    path: dict[str, float] = {}
    for job in reversed(jobs):  # jobs are listed after their parents
        path[job.name] = by_name[job.name].seconds + max((path[c] for c in children[job.name]), default=0.0)
    return path


def simulate(jobs: list[Task], workers: int, alone_speedup: float) -> tuple[float, float]:
    """(wall seconds, busy worker-seconds) of the longest-path-first schedule on `workers`."""
    path = longest_paths(jobs)
    left = {job.name: job.seconds for job in jobs}
    waiting = {job.name: set(job.after) for job in jobs}
    done: set[str] = set()
    running: set[str] = set()
    now = busy = 0.0

    def speed(n: int) -> float:
        if workers == 1:
            return alone_speedup
        return alone_speedup + (1.0 - alone_speedup) * (n - 1) / (workers - 1)

    while len(done) < len(jobs):
        ready = [name for name, deps in waiting.items() if not deps and name not in running and name not in done]
        for name in sorted(ready, key=lambda n: -path[n])[: workers - len(running)]:
            running.add(name)
        rate = speed(len(running))
        step = min(left[name] for name in running) / rate
        now += step
        busy += step * len(running)
        for name in list(running):
            left[name] -= step * rate
            if left[name] <= 1e-9:
                running.remove(name)
                done.add(name)
                for deps in waiting.values():
                    deps.discard(name)
    return now, busy


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("grid")
    ap.add_argument("--machine", choices=sorted(MACHINES), default="here")
    ap.add_argument("--steps", type=int, help="steps per policy instead of the grid's")
    ap.add_argument(
        "--ppo-seconds",
        action="append",
        default=[],
        metavar="TASK=SECONDS",
        help="a task's PPO policy wall seconds at --reference-steps (default: the machine's)",
    )
    ap.add_argument("--reference-steps", type=int, default=1_000_000, help="the steps the PPO times were measured at")
    ap.add_argument("--threshold-seconds", type=float, help="a threshold job's seconds (default: the machine's)")
    ap.add_argument("--workers", type=int, help="default: the machine's cores")
    ap.add_argument(
        "--speedup",
        action="append",
        default=[],
        metavar="X|TASK=X",
        help="PPO X times faster than the PPO times say, on every task or on TASK (a speed-up of the env step "
        "measured after them; not for PPO times measured with it): every policy saves the same seconds, "
        "(1 - 1/X) x its task's PPO time, so a method slower than PPO gains less",
    )
    ap.add_argument(
        "--methods-json",
        type=Path,
        default=METHODS_JSON,
        help="the methods' speed relative to PPO (benchmarks/throughput_methods.py's JSON; default: today's)",
    )
    ap.add_argument("--json", type=Path, help="write the numbers here")
    args = ap.parse_args(argv)

    machine = MACHINES[args.machine]
    here = campaign_ppo_seconds()
    ppo = dict(here)
    if machine["ppo_seconds"]:  # Hopper measured there; the other tasks scaled as here
        hopper = machine["ppo_seconds"]["Hopper-v5"]
        ppo = {task: hopper * seconds / here["Hopper-v5"] for task, seconds in here.items()}
    for item in args.ppo_seconds:
        task, _, seconds = item.partition("=")
        ppo[task] = float(seconds)
    speedup = dict.fromkeys(ppo, 1.0)
    # a bare X sets every task first, then TASK=X sets its own task, whatever the order they are given in
    for item in sorted(args.speedup, key=lambda item: "=" in item):
        task, _, value = item.rpartition("=")
        if task and task not in ppo:
            ap.error(f"--speedup {item}: no PPO time for {task} (tasks: {', '.join(sorted(ppo))})")
        try:
            x = float(value)
        except ValueError:
            ap.error(f"--speedup {item}: {value!r} is not a number")
        for name in [task] if task else list(ppo):
            speedup[name] = x
    if any(x <= 0 for x in speedup.values()):
        ap.error("--speedup must be > 0")
    saved = {task: 1.0 - 1.0 / x for task, x in speedup.items()}
    ratios = method_ratios(args.methods_json)
    workers = args.workers or machine["workers"]
    threshold = args.threshold_seconds if args.threshold_seconds is not None else machine["threshold_seconds"]
    jobs = grid_jobs(args.grid, ppo, ratios, args.steps, threshold, args.reference_steps, saved)
    wall, busy = simulate(jobs, workers, machine["alone_speedup"])
    path = longest_paths(jobs)
    critical = max(path.values())
    work = sum(job.seconds for job in jobs)
    policies = sum(not job.name.endswith("threshold") for job in jobs)

    lines = [
        f"# Projected wall time: `{args.grid}` on {workers} workers ({args.machine})",
        "",
        f"`python benchmarks/grid_projection.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
        "",
        f"Machine model: {machine['note']}"
        + (f"; PPO policy times given here instead: {', '.join(args.ppo_seconds)}" if args.ppo_seconds else "")
        + f". Methods' speed relative to PPO: {_shown(args.methods_json)}. "
        f"Threshold job: {threshold:g} s. Policies: {policies}, steps per policy: {args.steps or 'the grid'}'s."
        + (
            " PPO faster than these times by "
            + ", ".join(f"{x:g}x on {task}" for task, x in sorted(speedup.items()))
            + ": every policy saves that share of its task's PPO time ("
            + ", ".join(f"{saved[task]:.1%}" for task in sorted(speedup))
            + ")."
            if any(x != 1.0 for x in speedup.values())
            else ""
        ),
        "",
        "| task | PPO policy (s) | " + " | ".join(sorted(ratios)) + " |",
        "|---|---:|" + "---:|" * len(ratios),
    ]
    scale = (args.steps or load_grid(args.grid).options.steps or args.reference_steps) / args.reference_steps
    for task, seconds in sorted(ppo.items()):
        cut = saved[task]
        cells = " | ".join(f"{policy_seconds(seconds * scale, ratios[m], cut):.0f}" for m in sorted(ratios))
        lines.append(f"| {task} | {policy_seconds(seconds * scale, 1.0, cut):.0f} | {cells} |")
    lines += [
        "",
        f"- total work: {work:,.0f} worker-seconds at full load = {work / workers / 3600:.2f} h on {workers} workers "
        "if "
        "every worker were always busy",
        f"- critical path (a reference, the threshold, the longest chain; at full-load speed): {critical:,.0f} s = "
        f"{critical / 3600:.2f} h; alone on the machine {critical / machine['alone_speedup'] / 3600:.2f} h",
        f"- simulated longest-path-first schedule: **{wall:,.0f} s = {wall / 3600:.2f} h**, utilisation "
        f"{busy / (workers * wall):.0%}",
    ]
    print("\n".join(lines))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "grid": args.grid,
                    "machine": args.machine,
                    "workers": workers,
                    "steps": args.steps,
                    "ppo_seconds": {task: seconds / speedup[task] for task, seconds in ppo.items()},
                    "speedup": speedup,
                    "ratios": ratios,
                    "threshold_seconds": threshold,
                    "work_seconds": work,
                    "critical_path_seconds": critical,
                    "wall_seconds": wall,
                    "utilisation": busy / (workers * wall),
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
