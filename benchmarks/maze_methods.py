"""Learning benchmark: the paper's Fig. 2 comparison on the Four Reward Maze -- PPO seeds vs WSR, TNB, CTNB, CPO, IPD.

R PPO references (seeds 0..R-1) are trained once (`npsco population --method ppo --refs R --novel 0`); then, for each
method, one population of K novel policies (seeds 1000..1000+K-1) borrows them (`--refs-from`), the k-th policy
trained against the R references and the k-1 policies of its method before it, r0 = the references' mean pairwise
distance. Every policy trains with the maze preset (150k steps) and every method with its default knobs.

Per policy: the deterministic return over 100 random-start episodes and the goals they reached (the population's
final evaluation, recorded in its manifest), success (its training evaluation curve reached the median final return of
the references, `npsco.stats.success_flags`), and, measured by `npsco.evaluation.evaluate.evaluate_run` on 100 other
deterministic random-start episodes (seeds from 20000): the goal of the deterministic trajectory from Fig. 2's start
(`FIG2_START`, (14.5, 8) near the right edge) and the novelty U = min_j D(policy, ref_j) against the R PPO references
(on the policy's own visited states; the `novelty` column of `npsco evaluate`). Per method: mean +- std of the returns
over its policies, the distinct goals from the right start, the distinct dominant goals from random starts, the success
rate.

Each stage is an `npsco population` run directory, so an interrupted benchmark resumes where it stopped; the results
are rewritten after every method (JSON + Markdown). The committed results' command is in the .md file:

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/maze_methods.py
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from npsco.evaluation.evaluate import evaluate_run
from npsco.evaluation.measure import MeasureCache
from npsco.evaluation.rows import EvaluationRow
from npsco.fields import apply_overrides
from npsco.io import atomic_write_json, atomic_write_text
from npsco.logger import read_metrics
from npsco.methods.settings import MethodConfig
from npsco.population import Population, PopulationConfig
from npsco.ppo.config import preset
from npsco.stats import mean_std, success_baseline, success_flags
from npsco.tasks import MAZE_ID

MEASURE_EPISODES, MEASURE_SEED = 100, 20_000
"""Deterministic random-start episodes (env i seeded MEASURE_SEED + i): novelty is measured on their states."""
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")  # 1 on a loaded machine: BLAS threads oversubscribe it
METHOD_METRICS = {  # per method: training metrics averaged over all iterations of each policy
    "wsr": ("wsr/bonus_mean",),
    "tnb": ("tnb/cos", "tnb/obtuse_frac"),
    "ctnb": ("ctnb/constraint_active", "tnb/cos"),
    "cpo": ("cpo/cost", "cpo/step_accepted", "cpo/kl"),
    "ipd": ("ipd/terminated_frac",),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--methods", nargs="+", default=["wsr", "tnb", "ctnb", "cpo", "ipd"], help="in this order")
    p.add_argument("--refs", type=int, default=5, help="PPO references R (default 5)")
    p.add_argument("--novel", type=int, default=5, help="novel policies K per method (default 5)")
    p.add_argument("--steps", type=float, default=None, help="steps per policy (default: the maze preset's)")
    p.add_argument(
        "--r0-scale",
        type=float,
        default=None,
        help="every method's threshold as this multiple of the references' mean pairwise distance "
        "(default: each method's own default multiple, as `npsco population`)",
    )
    p.add_argument("--runs", default="runs/bench/maze_methods", help="population run directories")
    p.add_argument(
        "--results", default="benchmarks/results/maze_methods/maze_methods", help="results path without extension"
    )
    args = p.parse_args()

    ppo = apply_overrides(preset(MAZE_ID), [f"total_timesteps={int(args.steps)}"] if args.steps else [])
    runs = Path(args.runs)
    steps = f" --steps {int(args.steps)}" if args.steps else ""
    scale = f" --r0-scale {args.r0_scale:g}" if args.r0_scale else ""
    results = {
        "command": "".join(f"{k}={os.environ[k]} " for k in THREAD_VARS if k in os.environ)
        + "python "
        + " ".join(sys.argv),
        "equivalent_cli": [f"npsco population --method ppo --refs {args.refs} --novel 0{steps} --out {runs}/refs"]
        + [
            f"npsco population --method {m} --refs-from {runs}/refs --novel {args.novel}{steps}{scale} --out {runs}/{m}"
            for m in args.methods
        ],
        "machine": f"{platform.machine()}, python {platform.python_version()}, 1 process, shared with other jobs",
        "ppo_config": ppo.to_dict(),
        "methods": {},
    }

    refs_pop = Population(
        runs / "refs",
        PopulationConfig(ppo=ppo, method=MethodConfig.of("ppo"), refs=args.refs, novel=0),
        progress=False,
        log=_log,
    )
    refs = refs_pop.run()
    ref_returns = [m.final_eval["return_mean"] for m in refs]
    results["success_baseline"] = success_baseline(ref_returns)
    cache: MeasureCache = {}  # the references are measured once, for every method's population that borrows them
    measured = measure(refs_pop, cache)
    rows = [describe(refs_pop, m, measured[m.name], ref_returns) for m in refs]
    results["methods"]["ppo"] = summarise(rows, method_config=None, r0=None, threshold=None)
    write(results, args.results)

    for name in args.methods:
        config = MethodConfig.of(name)
        pop = Population(
            runs / name,
            PopulationConfig(
                ppo=ppo,
                method=config,
                refs=args.refs,
                novel=args.novel,
                refs_from=str(runs / "refs"),
                r0_scales=None if args.r0_scale is None else (args.r0_scale,),
            ),
            progress=False,
            log=_log,
        )
        members = [m for m in pop.run() if m.role == "novel"]
        measured = measure(pop, cache)
        rows = [describe(pop, m, measured[m.name], ref_returns) for m in members]
        results["methods"][name] = summarise(rows, config.to_dict(), pop.r0_default, members[0].threshold)
        write(results, args.results)


def _log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def measure(pop: Population, cache: MeasureCache) -> dict[str, EvaluationRow]:
    """Every trained policy of the population as `npsco evaluate` measures it, on MEASURE_EPISODES episodes, by name:
    its novelty against the population's PPO references (other than itself) and its goal from Fig. 2's start."""
    doc = evaluate_run(pop.out, MEASURE_EPISODES, MEASURE_SEED, cache, log=lambda line: None)
    return {row["name"]: EvaluationRow.from_dict(row) for row in doc["policies"]}


def describe(pop: Population, member, measured: EvaluationRow, ref_returns: list[float]) -> dict:
    """One policy: return, goals, novelty against the PPO references, success, training diagnostics."""
    final = member.final_eval
    assert measured.novelty is not None and measured.goal_from_right is not None  # PPO references, on the maze
    # a reference is scored on its final return (PPO's rate is then ~0.5 "by definition", paper Sec. 4.2)
    curve = [r for _, r in member.eval_curve] if member.role == "novel" else [final["return_mean"]]
    goals = {g: n / final["episodes"] for g, n in final["goals"].items()}
    row = {
        "name": member.name,
        "seed": member.seed,
        "role": member.role,
        "return_mean": final["return_mean"],
        "return_std": final["return_std"],
        "right_start_goal": measured.goal_from_right,
        "goal_fractions": goals,
        "dominant_goal": max(goals, key=goals.get),
        "novelty_vs_ppo": measured.novelty,
        "best_training_eval": max(curve) if curve else None,
        "success": bool(success_flags([curve or [final["return_mean"]]], ref_returns)[0]),
        "wall_seconds": member.wall_seconds,
    }
    if member.role == "novel":
        metrics = read_metrics(pop.out / member.path / "metrics.jsonl")
        row["threshold"] = member.threshold
        row["training"] = {
            k: float(np.nanmean([m[k] if m.get(k) is not None else np.nan for m in metrics]))
            for k in ("novelty/episode_mean", "novelty/below_r0_frac", *METHOD_METRICS[member.method])
            if any(m.get(k) is not None for m in metrics)
        }
    return row


def summarise(rows: list[dict], method_config: dict | None, r0: float | None, threshold: float | None) -> dict:
    """`r0`: the references' mean pairwise distance (r0_default); `threshold`: the one the method used."""
    returns = [r["return_mean"] for r in rows]
    mean, std = mean_std(returns)
    return {
        "r0": r0,
        "threshold": threshold,
        "method_config": method_config,
        "train_seconds": round(sum(r["wall_seconds"] for r in rows), 1),  # as recorded when each policy trained
        "return_mean": mean,
        "return_std": std,
        "right_start_goals": sorted({r["right_start_goal"] for r in rows}),
        "dominant_goals": sorted({r["dominant_goal"] for r in rows}),
        "novelty_vs_ppo_mean": float(np.mean([r["novelty_vs_ppo"] for r in rows])),
        "success_rate": float(np.mean([r["success"] for r in rows])),
        "policies": rows,
    }


def write(results: dict, base: str) -> None:
    atomic_write_json(Path(f"{base}.json"), results)  # (not with_suffix: a base may contain a dot, e.g. _r0x0.5)
    atomic_write_text(Path(f"{base}.md"), markdown(results))


def markdown(results: dict) -> str:
    lines = [
        "# Four Reward Maze: PPO seeds vs WSR, TNB, CTNB, CPO, IPD (paper Fig. 2)",
        "",
        f"Command: `{results['command']}`  ",
        f"Machine: {results['machine']}",
        "",
        "Equivalent CLI:",
        "",
        "```",
        *results["equivalent_cli"],
        "```",
        "",
        "Return: deterministic, 100 random-start episodes per policy; mean +- std over the policies. "
        "`right start`: goals of the deterministic trajectories from (14.5, 8). `dominant`: each policy's most "
        "frequent outcome over random starts. `U`: novelty min_j D(policy, PPO ref j) on the policy's visited "
        "states (for PPO: against the other references). Success: the training evaluation curve reached the "
        f"median final return of the PPO references ({results.get('success_baseline', float('nan')):.3f}). "
        "`train s`: training wall seconds of the method's policies, summed (the machine was shared).",
        "",
        "`threshold`: the method's r0, and its multiple of r0_default (the references' mean pairwise distance).",
        "",
        "| method | threshold | return | right start goals | dominant goals | mean U | success | train s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, m in results["methods"].items():
        threshold = m.get("threshold", m["r0"])  # results written before "threshold" was recorded used r0 itself
        r0 = f"{threshold:.3f} ({threshold / m['r0']:g}x)" if m["r0"] is not None else ""
        lines.append(
            f"| {name} | {r0} | {m['return_mean']:.2f} +- {m['return_std']:.2f} | "
            f"{len(m['right_start_goals'])}: {', '.join(m['right_start_goals'])} | "
            f"{len(m['dominant_goals'])}: {', '.join(m['dominant_goals'])} | {m['novelty_vs_ppo_mean']:.3f} | "
            f"{m['success_rate']:.1f} | {m['train_seconds']:.0f} |"
        )
    lines.append("")
    for name, m in results["methods"].items():
        lines += [
            f"## {name}",
            "",
            "| policy | return | right start | top | bottom | left | right | none | U | "
            "success | training (mean over iterations) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for p in m["policies"]:
            f = p["goal_fractions"]
            training = ", ".join(f"{k} {v:.3f}" for k, v in p.get("training", {}).items())
            lines.append(
                f"| {p['name']} | {p['return_mean']:.2f} | {p['right_start_goal']} | "
                + " | ".join(f"{f[g]:.2f}" for g in ("top", "bottom", "left", "right", "none"))
                + f" | {p['novelty_vs_ppo']:.3f} | {'yes' if p['success'] else 'no'} | {training} |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
