"""Steps per second of every method against plain PPO, paired: in each process, one trainer per method (PPO, IPD, WSR,
TNB, CTNB, CPO, RSPO, the Lagrangian, and the Lagrangian on states) trains an iteration in turn, the order rotating
every round, so that the machine's drift and the process's own speed hit every method alike. A method's ratio is its
steps per CPU second over PPO's in the same process; the medians over rounds and processes are reported.

    python benchmarks/throughput_methods.py                                   # Hopper-v5, 3 processes x 6 rounds
    python benchmarks/throughput_methods.py --processes 2 --rounds 4 --out /tmp/t   # a quick look
    python benchmarks/throughput_methods.py --methods ipd --processes 6 --out /tmp/ipd  # IPD against PPO only
    python benchmarks/throughput_methods.py --methods ipd --r0 1e-9 --out /tmp/ipd-uncut  # IPD cutting no episode

Settings: the `default` preset (1 env x 2048 steps, minibatch 64, 10 epochs), the paper campaign's 5 Hopper-v5 PPO
references (`benchmarks/results/paper/sweep/Hopper-v5/ppo`) as the policies to avoid, r0 = 1.46 (their default
threshold), every update on its default (numpy) path. BLAS and torch on one thread, as the `npsco` command runs.
Each process reports, per method, the CPU seconds of each iteration (rollout + update + the method's per-iteration
work; steps/s = 2048 / that) and its episodes: at r0 = 1.46 IPD ends nearly every episode of these first iterations
at its first checked step (t_S + 1 = 21), so its rollouts also pay about 4x PPO's env resets; `--r0 1e-9` cuts none.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `import npsco` does in the command, before numpy loads

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from npsco.io import atomic_write_json, atomic_write_text  # noqa: E402
from npsco.methods import make_method  # noqa: E402
from npsco.methods.base import MethodContext  # noqa: E402
from npsco.methods.settings import MethodConfig  # noqa: E402
from npsco.novelty.references import ReferenceSet  # noqa: E402
from npsco.novelty.states import StateDistance  # noqa: E402
from npsco.novelty.threshold import visited_states  # noqa: E402
from npsco.policy import load_policy  # noqa: E402
from npsco.ppo.config import preset  # noqa: E402
from npsco.ppo.trainer import Trainer  # noqa: E402

ENV = "Hopper-v5"
REFS = Path("benchmarks/results/paper/sweep/Hopper-v5/ppo/refs")
R0 = 1.46
METHODS = ("ppo", "ipd", "wsr", "tnb", "ctnb", "cpo", "rspo", "lagrangian", "lagrangian-state")


def make_trainer(name: str, seed: int, r0: float = R0) -> Trainer:
    cfg = dataclasses.replace(preset(ENV), seed=seed, eval_every=0)
    if name == "ppo":
        return Trainer(cfg, tensorboard=False)
    policies = [load_policy(REFS / f"ref{i}" / "policy.safetensors") for i in range(5)]
    refs = ReferenceSet(policies, [f"ref{i}" for i in range(5)])
    method, states = name, None
    settings: dict = {}
    if name == "lagrangian-state":
        method, settings = "lagrangian", {"metric": "state"}
        states = StateDistance.fit([visited_states(p, 2, 0) for p in policies])
        r0 = float(np.mean(states.pairwise()[~np.eye(5, dtype=bool)]))
    hooks = make_method(MethodConfig.of(method, **settings), MethodContext(ENV, refs, r0, states=states))
    return Trainer(cfg, hooks, tensorboard=False)


def worker(args: tuple[int, int, tuple[str, ...], float]) -> dict[str, dict[str, list[float]]]:
    """One process: the trainer of each of `methods`, `rounds` rounds of one iteration each; per method the CPU
    seconds (`cpu`) and the episodes (`episodes`) of each iteration."""
    seed, rounds, methods, r0 = args
    import torch  # noqa: PLC0415  (in the worker, after the BLAS setting)

    torch.set_num_threads(1)
    trainers = {m: make_trainer(m, seed, r0) for m in methods}
    for t in trainers.values():  # an untimed warm-up iteration each (first-call allocations, compilation)
        buf = t.collect_rollout()
        t.hooks.update(t.learner, t.compute_advantages(buf))
        t.hooks.iteration_metrics(buf.summary)
    cpu: dict[str, list[float]] = {m: [] for m in methods}
    episodes: dict[str, list[float]] = {m: [] for m in methods}
    order = list(methods)
    for r in range(rounds):
        for m in order[r % len(order) :] + order[: r % len(order)]:
            t = trainers[m]
            c0 = time.process_time()
            buf = t.collect_rollout()
            t.hooks.update(t.learner, t.compute_advantages(buf))
            t.hooks.iteration_metrics(buf.summary)
            cpu[m].append(time.process_time() - c0)
            episodes[m].append(len(buf.summary.returns))
    return {"cpu": cpu, "episodes": episodes}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=3, help="independent processes (default 3)")
    p.add_argument("--parallel", type=int, default=1, help="processes running at once (default 1)")
    p.add_argument("--rounds", type=int, default=6, help="rounds of one iteration per method (default 6)")
    p.add_argument("--methods", nargs="+", choices=METHODS[1:], default=METHODS[1:], help="methods besides PPO (all)")
    p.add_argument("--r0", type=float, default=R0, help=f"the novelty methods' threshold (default {R0})")
    p.add_argument("--out", default="benchmarks/results/throughput/throughput_methods", help="results path, no suffix")
    args = p.parse_args(argv)
    command = "python benchmarks/throughput_methods.py " + " ".join(argv if argv is not None else sys.argv[1:])
    methods = ("ppo", *dict.fromkeys(args.methods))
    start = time.time()
    load_before = os.getloadavg()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.parallel) as pool:
        results = pool.map(worker, [(s, args.rounds, methods, args.r0) for s in range(args.processes)])
    load_after = os.getloadavg()
    batch = preset(ENV).batch_size
    rows = {}
    for m in methods:
        per_process = [statistics.median(r["cpu"][m]) for r in results]
        ratios = [statistics.median(np.array(r["cpu"]["ppo"]) / np.array(r["cpu"][m])) for r in results]
        rows[m] = {
            "cpu_seconds_per_iteration": per_process,
            "episodes_per_iteration": statistics.median(e for r in results for e in r["episodes"][m]),
            "steps_per_cpu_second": batch / statistics.median(per_process),
            "ratio_to_ppo": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
        }
    doc = {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start)),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "settings": {
            "env": ENV,
            "preset": "default",
            "batch": batch,
            "r0": args.r0,
            "processes": args.processes,
            "rounds": args.rounds,
            "methods": list(methods),
            "parallel": args.parallel,
        },
        "methods": rows,
    }
    atomic_write_json(f"{args.out}.json", doc)
    lines = [
        "# Steps per second of every method against PPO, paired",
        "",
        f"Made by `{command}` on {doc['date']} ({doc['machine']}; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after). Hopper-v5, `default` preset, the paper campaign's 5 PPO references as the "
        f"policies to avoid, r0 = {args.r0:g}; every method's trainer in each of {args.processes} processes trains one "
        f"iteration ({batch} steps) in turn, {args.rounds} rounds, the order rotating. Steps per CPU second: median "
        "over the processes of each one's median iteration; ratio: median over processes of the median, over rounds, "
        "of PPO's CPU time over the method's in the same round; episodes: the median per iteration.",
        "",
        "| method | steps per CPU second | / PPO (median) | [min, max] over processes | episodes per iteration |",
        "|---|---|---|---|---|",
    ]
    for m, row in rows.items():
        lines.append(
            f"| {m} | {row['steps_per_cpu_second']:,.0f} | {row['ratio_to_ppo']:.2f} | "
            f"[{row['ratio_min']:.2f}, {row['ratio_max']:.2f}] | {row['episodes_per_iteration']:g} |"
        )
    atomic_write_text(f"{args.out}.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    print(json.dumps({m: round(r["ratio_to_ppo"], 3) for m, r in rows.items()}))


if __name__ == "__main__":
    main()
