"""Where one PPO training step's CPU time goes: the env step, the rest of the rollout, the advantages, the update.

    python benchmarks/step_split.py                              # Hopper-v5, Walker2d-v5, HalfCheetah-v5
    python benchmarks/step_split.py --env Hopper-v5 --iterations 10
    python benchmarks/step_split.py --repeats 5                  # each task 5 times, interleaved: medians and CIs

One trainer per task, the default preset (1 env x 2048 steps, 10 epochs of minibatch 64), no evaluation. CPU time
of this thread (`time.thread_time`) per env step, summed over the iterations after the first `--warmup` ones; the env
step is timed around the vector env's `step` as the rollout calls it (the timer's own cost, two `thread_time` calls of
~0.6 us each per step, falls partly in the env step, partly in the rest of the rollout). Early training: the episodes
are short, so resets (in the env step) weigh more than later on. Left out of the parts, as small: the learning-rate
anneal, the per-iteration hooks, the policy snapshot and the metrics of a training iteration (`Trainer.train`), so
`total` is a little under a real iteration's time per step. With `--repeats N` the tasks are measured N times in turn
(a new trainer each time), each part is its median over the repeats, and npsco's own cost (the rollout less the env
step, plus the advantages, plus the update) gets a 95% bootstrap CI of its median: this shared machine's speed drifts
by tens of percent within an hour. The column `own / env step` (the median over repeats) divides npsco's own cost by
the env step of the same run, which slows down with it on a slower hour: it compares runs of the same env-step code
made at different speeds of the machine (not across a change of the env step itself, which the env step includes:
npsco's lean vector step and direct step around MuJoCo's simulator). The parts are each a median, so they need not
add up to the total's and the own cost's medians.

Writes benchmarks/results/throughput/step_split.{md,json} (or `--out`.{md,json}).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `import npsco` does in the command, before numpy loads

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks/results/throughput/step_split"
PARTS = ("env step", "rollout, less the env step", "advantages", "update")
OWN = PARTS[1:]
"""The parts that are npsco's own code (the env step is MuJoCo's and Gymnasium's)."""


def own_cost(row: dict[str, float]) -> float:
    """npsco's own microseconds per env step of one row."""
    return sum(row[part] for part in OWN)


def own_per_env_step(row: dict[str, float]) -> float:
    """npsco's own cost over the env step of one row: between runs of the same code, a measure the machine's speed
    moves less than either time (the env step slows down with npsco's own code on a slower hour)."""
    return own_cost(row) / row["env step"]


def bootstrap_median_ci(values: list[float], draws: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap CI of the median of `values`."""
    import numpy as np  # noqa: PLC0415  (after the BLAS setting above)

    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(np.asarray(values), size=(draws, len(values)), replace=True), axis=1)
    return float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def split(env_id: str, iterations: int, warmup: int, seed: int = 1) -> dict[str, float]:
    """CPU microseconds per env step of each part of PPO's iteration (`PARTS`), and their `total`."""
    from npsco.ppo.config import preset
    from npsco.ppo.trainer import Trainer

    cfg = dataclasses.replace(preset(env_id), seed=seed, eval_every=0)
    trainer = Trainer(cfg, tensorboard=False)
    clock, env_seconds = time.thread_time, [0.0]
    step = trainer.envs.step

    def timed_step(actions):  # the rollout's env step, timed
        start = clock()
        out = step(actions)
        env_seconds[0] += clock() - start
        return out

    trainer.envs.step = timed_step  # type: ignore[method-assign]
    seconds = dict.fromkeys(("rollout", "advantages", "update"), 0.0)
    for i in range(warmup + iterations):
        if i == warmup:
            env_seconds[0] = 0.0
        t0 = clock()
        buf = trainer.collect_rollout()
        t1 = clock()
        batch = trainer.compute_advantages(buf)
        t2 = clock()
        trainer.hooks.update(trainer.learner, batch)
        t3 = clock()
        if i >= warmup:
            seconds["rollout"] += t1 - t0
            seconds["advantages"] += t2 - t1
            seconds["update"] += t3 - t2
    trainer.envs.close()
    steps = iterations * cfg.num_steps * cfg.num_envs
    us = {
        "env step": env_seconds[0],
        "rollout, less the env step": seconds["rollout"] - env_seconds[0],
        "advantages": seconds["advantages"],
        "update": seconds["update"],
    }
    out = {part: value / steps * 1e6 for part, value in us.items()}
    out["total"] = sum(out[part] for part in PARTS)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", action="append", help="a task (repeatable; default: the paper's three)")
    ap.add_argument("--iterations", type=int, default=25, help="measured iterations of 2048 steps per task")
    ap.add_argument("--warmup", type=int, default=5, help="iterations run first and not measured")
    ap.add_argument("--repeats", type=int, default=1, help="rounds over the tasks; parts are medians over them")
    ap.add_argument("--out", type=Path, default=OUT, help="results path without suffix (.md and .json are written)")
    args = ap.parse_args(argv)
    if args.iterations < 1 or args.warmup < 0 or args.repeats < 1:
        ap.error("--iterations and --repeats must be >= 1 and --warmup >= 0")
    tasks = args.env or ["Hopper-v5", "Walker2d-v5", "HalfCheetah-v5"]
    load_start = os.getloadavg()[0]
    runs: dict[str, list[dict[str, float]]] = {task: [] for task in tasks}
    for r in range(args.repeats):
        for task in tasks:
            runs[task].append(split(task, args.iterations, args.warmup))
            if args.repeats > 1:
                print(f"repeat {r + 1}/{args.repeats} {task}: own {own_cost(runs[task][-1]):.1f} us", flush=True)
    rows = {task: {p: statistics.median(run[p] for run in rs) for p in (*PARTS, "total")} for task, rs in runs.items()}
    load = os.getloadavg()[0]
    lines = [
        "# Where a PPO step's CPU time goes",
        "",
        f"`{' '.join(['python benchmarks/step_split.py', *(argv if argv is not None else sys.argv[1:])])}`",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load_start:.1f} at the start, "
        f"{load:.1f} at the end. Default preset, {args.iterations} iterations of 2048 steps after {args.warmup} "
        "unmeasured; CPU microseconds per env step"
        + (f", the median of {args.repeats} repeats." if args.repeats > 1 else "."),
        "",
        "| task | "
        + " | ".join(PARTS)
        + " | total | own cost | own / env step |"
        + (" own, 95% CI | own, each repeat |" if args.repeats > 1 else ""),
        "|---|" + "---:|" * (len(PARTS) + 3) + ("---|---|" if args.repeats > 1 else ""),
    ]
    for task, row in rows.items():
        own = [own_cost(run) for run in runs[task]]
        per_env_step = statistics.median(own_per_env_step(run) for run in runs[task])
        line = (
            f"| {task} | "
            + " | ".join(f"{row[p]:.1f}" for p in (*PARTS, "total"))
            + f" | {statistics.median(own):.1f} | {per_env_step:.2f} |"
        )
        if args.repeats > 1:
            lo, hi = bootstrap_median_ci(own)
            line += f" [{lo:.1f}, {hi:.1f}] | " + ", ".join(f"{x:.1f}" for x in own) + " |"
        lines.append(line)
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.with_suffix(".md").write_text(text)
    record = {
        "iterations": args.iterations,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "load_average": load,
        "load_average_start": load_start,
        "us_per_step": rows,
        "runs": runs,
    }
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
