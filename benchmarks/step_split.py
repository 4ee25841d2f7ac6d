"""Where one PPO training step's CPU time goes: the env step, the rest of the rollout, the advantages, the update.

    python benchmarks/step_split.py                              # Hopper-v5, Walker2d-v5, HalfCheetah-v5
    python benchmarks/step_split.py --env Hopper-v5 --iterations 10

One process per task, the default preset (1 env x 2048 steps, 10 epochs of minibatch 64), no evaluation. CPU time of
this thread (`time.thread_time`) per env step, summed over the iterations after the first `--warmup` ones; the env
step is timed around the vector env's `step` as the rollout calls it (the timer's own cost, well under 1 us, falls in
it). Early training: the episodes are short, so resets (in the env step) weigh more than later on. Left out of the
parts, as small: the learning-rate anneal, the per-iteration hooks, the policy snapshot and the metrics of a training
iteration (`Trainer.train`), so `total` is a little under a real iteration's time per step.

Writes benchmarks/results/throughput/step_split.{md,json} (or `--out`.{md,json}).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `import npsco` does in the command, before numpy loads

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks/results/throughput/step_split"
PARTS = ("env step", "rollout, less the env step", "advantages", "update")


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
    ap.add_argument("--out", type=Path, default=OUT, help="results path without suffix (.md and .json are written)")
    args = ap.parse_args(argv)
    if args.iterations < 1 or args.warmup < 0:
        ap.error("--iterations must be >= 1 and --warmup >= 0")
    tasks = args.env or ["Hopper-v5", "Walker2d-v5", "HalfCheetah-v5"]
    rows = {task: split(task, args.iterations, args.warmup) for task in tasks}
    load = os.getloadavg()[0]
    lines = [
        "# Where a PPO step's CPU time goes",
        "",
        f"`{' '.join(['python benchmarks/step_split.py', *(argv if argv is not None else sys.argv[1:])])}`",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load:.1f} at the end. Default preset, "
        f"{args.iterations} iterations of 2048 steps after {args.warmup} unmeasured; CPU microseconds per env step.",
        "",
        "| task | " + " | ".join(PARTS) + " | total |",
        "|---|" + "---:|" * (len(PARTS) + 1),
    ]
    for task, row in rows.items():
        lines.append(f"| {task} | " + " | ".join(f"{row[p]:.1f}" for p in (*PARTS, "total")) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.with_suffix(".md").write_text(text)
    record = {"iterations": args.iterations, "warmup": args.warmup, "load_average": load, "us_per_step": rows}
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
