"""Learning benchmark: the paper's Fig. 2 behaviour on the Four Reward Maze -- PPO seeds vs IPD policies.

R PPO policies (seeds 0..R-1) are trained as the references, then for each threshold multiple S a chain of K IPD
policies (seeds 1000..1000+K-1), the k-th against the R references and the k-1 IPD policies before it, with
r0 = S x the mean pairwise distance of the references. Each stage is an `npsco population` run directory (the chains
borrow the references with `--refs-from`), so an interrupted benchmark resumes where it stopped.

For every policy, as `npsco.evaluation.evaluate.evaluate_run` measures it on deterministic episodes from random starts
(seeds from 20000): the goal reached by its deterministic trajectory from Fig. 2's start (`FIG2_START`, (14.5, 8) near
the right edge), the fraction of the episodes that end in each goal, the novelty U = min_j D(policy, ref_j) against
the policies it was trained against (IPD; the `nearest` column of `npsco evaluate`); and the constraint's termination
fraction at the end of training.

Target (issue 3): the R PPO seeds reach at most two distinct goals from the right start, the K IPD policies at least
three, and each IPD policy reaches a goal in >= 90% of random-start episodes.

Results are rewritten after every stage (JSON + Markdown); a later invocation (a variant with --mset and --tag)
adds its stages to the same files. The commands of the committed results are listed in the .md file, e.g.:

    python benchmarks/maze_ipd.py --r0-scale 1 0.5 0.25 0.75 2
    python benchmarks/maze_ipd.py --r0-scale 1 --mset novelty_action=sample --tag sample

`--workers N` trains the references side by side, then every chain side by side (a local process pool; each policy
trains from its seed in its own process, so the results are those of one worker).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from npsco.envs.maze import GOAL_NAMES
from npsco.evaluation.evaluate import evaluate_run
from npsco.evaluation.measure import MeasureCache, Measurement
from npsco.evaluation.rows import EvaluationRow
from npsco.fields import apply_overrides
from npsco.io import atomic_write_json, atomic_write_text
from npsco.logger import read_metrics
from npsco.methods.settings import MethodConfig
from npsco.parallel import LogView, Scheduler, make_executor
from npsco.population import Population, PopulationConfig
from npsco.population_jobs import PRELOAD
from npsco.ppo.config import preset
from npsco.tasks import MAZE_ID

MEASURE_SEED = 20_000
"""Seed of the first random-start episode each policy is measured on (env i seeded MEASURE_SEED + i)."""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--refs", type=int, default=5, help="PPO reference seeds R (default 5)")
    p.add_argument("--novel", type=int, default=5, help="IPD policies K per chain (default 5)")
    p.add_argument(
        "--r0-scale",
        type=float,
        nargs="+",
        default=[1.0],
        help="threshold multiples of the default r0, one IPD chain each, trained in this order",
    )
    p.add_argument("--steps", type=float, default=None, help="steps per policy (default: the maze preset's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="PPO setting override")
    p.add_argument("--mset", action="append", default=[], metavar="KEY=VALUE", help="IPD setting override")
    p.add_argument("--episodes", type=int, default=100, help="random-start deterministic episodes per policy")
    p.add_argument("--runs", default="runs/bench/maze_ipd", help="population run directories")
    p.add_argument("--results", default="benchmarks/results/maze_ipd/maze_ipd", help="results path without extension")
    p.add_argument("--tag", default="", help="suffix of the chains' names, for a variant given with --mset")
    p.add_argument("--stop-when-met", action="store_true", help="stop after the first chain that meets the target")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="policies trained at once (default 1): >1 trains the references side by side, then every "
        "chain side by side (each chain one policy after another) on a local process pool",
    )
    args = p.parse_args()
    if args.workers > 1 and args.stop_when_met:
        p.error("--stop-when-met trains the chains one after another: it cannot be used with --workers")

    ppo = preset(MAZE_ID)
    ppo = apply_overrides(ppo, ([f"total_timesteps={int(args.steps)}"] if args.steps else []) + args.set)
    method = apply_overrides(MethodConfig.of("ipd"), args.mset)
    runs = Path(args.runs)
    command = "python " + " ".join(sys.argv)
    path = Path(args.results).with_suffix(".json")
    # several invocations (the default sweep, then variants with --mset/--tag) add their stages to one results file
    results = json.loads(path.read_text()) if path.exists() else {}
    results.setdefault("commands", [])
    if "command" in results:  # the format of the first version of this script
        results["commands"].insert(0, results.pop("command"))
        results.pop("method_config", None)
    if command not in results["commands"]:
        results["commands"].append(command)
    results.update(
        machine=f"{platform.machine()}, python {platform.python_version()}, 1 process",
        target="PPO seeds reach <= 2 distinct goals from the right start (14.5, 8); IPD policies >= 3; "
        "every IPD policy reaches a goal in >= 90% of random-start episodes",
        ppo_config=ppo.to_dict(),
    )
    environment = {
        k: os.environ[k] for k in ("PYTHONPATH", "NPSCO_CODE_COMMIT", "OPENBLAS_NUM_THREADS") if k in os.environ
    }
    results.setdefault("environment", environment)  # of the first stages; later stages record their own
    results.setdefault("stages", {})

    # the references do not depend on the IPD settings: one refs population for every variant
    refs = Population(
        runs / "refs",
        PopulationConfig(ppo=ppo, method=MethodConfig.of("ipd"), refs=args.refs, novel=0),
        progress=False,
        log=_log,
    )
    executor = make_executor("local", args.workers, preload=PRELOAD) if args.workers > 1 else None
    if executor is not None:
        atexit.register(executor.close)
    members = refs.run(executor)
    cache: MeasureCache = {}  # the references are measured once, for every chain that borrows them
    # the references are trained once: keep the provenance of the invocation that trained them
    first = results["stages"].get("ppo") or {"command": command, "code": code_version(), "environment": environment}
    results["stages"]["ppo"] = {
        "train_seconds": round(sum(m.wall_seconds for m in members), 1),
        **{k: first[k] for k in ("command", "code", "environment") if k in first},
        "policies": describe_all(refs, members, args.episodes, cache),
    }
    write(results, args.results)

    chains = {}
    for scale in args.r0_scale:
        name = f"ipd-r0x{scale:g}" + (f"-{args.tag}" if args.tag else "")
        chains[name] = Population(
            runs / name,
            PopulationConfig(
                ppo=ppo,
                method=method,
                refs=args.refs,
                novel=args.novel,
                r0_scales=(scale,),
                refs_from=str(runs / "refs"),
            ),
            progress=False,
            log=_log,
        )
    if executor is not None:  # every chain side by side; the results are then written in the order of --r0-scale
        Scheduler(executor).run(_Populations(chains.values()), LogView(_log))
    for (name, pop), scale in zip(chains.items(), args.r0_scale, strict=True):
        members = pop.run()  # trains the chain (one worker), or finds it trained
        stage = {
            "r0_scale": scale,
            "r0_default": pop.r0_default,
            "r0": pop.r0_default * scale if method.r0 is None else method.r0,
            "method_settings": changed_settings(method),
            "command": command,
            "code": code_version(),
            "environment": environment,
            "train_seconds": round(sum(m.wall_seconds for m in members if m.role == "novel"), 1),
            "policies": describe_all(pop, [m for m in members if m.role == "novel"], args.episodes, cache),
        }
        results["stages"][name] = stage
        results["verdict"] = verdict(results["stages"])
        write(results, args.results)
        if args.stop_when_met and results["verdict"]["chains"][name]["target_met"]:
            break
    print(json.dumps(results["verdict"], indent=2))


class _Populations:
    """Several populations as one `npsco.parallel.Source`, so that their chains train side by side."""

    def __init__(self, populations):
        self.populations = {str(pop.out.resolve()): pop for pop in populations}
        for pop in self.populations.values():
            pop.open()

    def ready(self, busy: set[str]) -> list:
        return [job for pop in self.populations.values() for job in pop.ready(busy)]

    def started(self, job) -> None:
        self.populations[job.group].started(job)

    def finished(self, job, result) -> str:
        return self.populations[job.group].finished(job, result)


def changed_settings(method: MethodConfig) -> dict:
    """The IPD settings that differ from the defaults (t_start None means the maze default, 3)."""
    default = MethodConfig.of("ipd").to_dict()
    return {k: v for k, v in method.to_dict().items() if default.get(k) != v}


def code_version() -> dict:
    """Where the npsco under test comes from: its source folder and git commit (`NPSCO_CODE_COMMIT` for a snapshot
    made with `git archive`), and whether that source differs from the commit."""
    import npsco

    src = Path(npsco.__file__).resolve().parent
    out = {"npsco": str(src), "commit": os.environ.get("NPSCO_CODE_COMMIT")}
    if out["commit"] is None:
        git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", str(src)], cwd=src, capture_output=True, text=True
        )
        out.update(commit=git.stdout.strip() or None, uncommitted_changes=bool(dirty.stdout.strip()))
    return out


def _log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def describe_all(pop: Population, members: list, episodes: int, cache: MeasureCache) -> list[dict]:
    """`describe` each of `members`, measured with the rest of the population by `evaluate_run`."""
    doc = evaluate_run(pop.out, episodes, MEASURE_SEED, cache, log=lambda line: None)
    rows = {row["name"]: EvaluationRow.from_dict(row) for row in doc["policies"]}
    distances = doc["action_distance_matrix"]
    return [
        describe(pop, m, rows[m.name], cache[(rows[m.name].checkpoint, episodes, MEASURE_SEED)], distances)
        for m in members
    ]


def describe(pop: Population, member, row: EvaluationRow, measured: Measurement, distances: dict) -> dict:
    """Goal from the right start, goal fractions from random starts, novelty and training diagnostics of a member:
    `row` and `measured` are its evaluation and its episodes, `distances` the population's action distance matrix."""
    trajectory = measured.fig2_trajectory
    assert trajectory is not None and row.goal_from_right is not None  # measured on the maze
    fractions = {g: getattr(row, f"goal_{g}") for g in (*GOAL_NAMES, "none")}
    out = {
        "name": member.name,
        "seed": member.seed,
        "role": member.role,
        "right_start_goal": row.goal_from_right,
        "right_start_length": len(trajectory) - 1,  # the trajectory ends with the final observation
        "right_start_trajectory": np.round(trajectory, 3).tolist(),
        "goal_fractions": fractions,
        "dominant_goal": max(fractions, key=fractions.get),
        "reached_goal_frac": 1.0 - fractions["none"],
        "return_mean": row.return_mean,
        "return_std": row.return_std,
        "wall_seconds": member.wall_seconds,
    }
    if member.role == "novel":
        assert row.nearest is not None  # a novel policy had policies to avoid
        own = distances["matrix"][distances["names"].index(member.name)]
        out.update(
            threshold=member.threshold,
            references=member.references,
            novelty=row.nearest,
            nearest=min(member.references, key=lambda ref: own[distances["names"].index(ref)]),
            novelty_over_r0=row.nearest / member.threshold,
        )
        rows = read_metrics(pop.out / member.path / "metrics.jsonl")
        last = rows[-10:]
        out["terminated_frac_last10"] = _mean(r["ipd/terminated_frac"] for r in last)
        out["terminated_frac_first10"] = _mean(r["ipd/terminated_frac"] for r in rows[:10])
        out["episode_novelty_last10"] = _mean(r["novelty/episode_mean"] for r in last)
    return out


def _mean(values) -> float | None:
    """Mean of the logged values that are numbers (NaN is logged as null, e.g. when no episode ended)."""
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def verdict(stages: dict) -> dict:
    """The target per chain, with three diagnostics that the target's letter misses: the goals counted with top and
    bottom as one (the right start (14.5, 8) lies on the map's axis of symmetry, so top vs bottom is a tie-break),
    the right-start goals that no PPO seed reaches, and how many policies meet their own threshold (U >= r0)."""
    ppo_goals = sorted({p["right_start_goal"] for p in stages["ppo"]["policies"]})
    out = {"ppo_right_start_goals": ppo_goals, "ppo_ok": len(ppo_goals) <= 2, "chains": {}}
    for name, stage in stages.items():
        if name == "ppo":
            continue
        goals = sorted({p["right_start_goal"] for p in stage["policies"]} - {"none"})
        reach = [p["reached_goal_frac"] for p in stage["policies"]]
        ok = len(goals) >= 3 and min(reach) >= 0.9
        out["chains"][name] = {
            "r0": stage["r0"],
            "right_start_goals": goals,
            "distinct": len(goals),
            "min_reached_goal_frac": min(reach),
            "target_met": bool(ok and out["ppo_ok"]),
            "distinct_top_bottom_as_one": len({"top/bottom" if g in ("top", "bottom") else g for g in goals}),
            "goals_no_ppo_seed_reaches": sorted(set(goals) - set(ppo_goals)),
            "policies_meeting_r0": sum(p["novelty_over_r0"] >= 1 for p in stage["policies"]),
        }
    return out


def _chain_policies(results: dict, name: str) -> list:
    return results["stages"][name]["policies"]


def write(results: dict, base: str) -> None:
    if len(results["stages"]) > 1:
        results["verdict"] = verdict(results["stages"])
    atomic_write_json(Path(f"{base}.json"), results)  # (not with_suffix: a base may contain a dot)
    atomic_write_text(Path(f"{base}.md"), markdown(results))


def markdown(results: dict) -> str:
    lines = [
        "# Four Reward Maze: PPO seeds vs IPD (paper Fig. 2)",
        "",
        "Commands (each adds its stages; the references are trained once):",
        "",
        *[f"    {c}" for c in results["commands"]],
        "",
        *(
            [
                f"Environment of the first stages (later ones name theirs): "
                f"`{' '.join(f'{k}={v}' for k, v in results['environment'].items())}`"
                + (
                    " (PYTHONPATH: the npsco source of that commit, as a `git archive` snapshot)."
                    if "PYTHONPATH" in results["environment"]
                    else "."
                ),
                "",
            ]
            if results.get("environment")
            else []
        ),
        f"Machine: {results['machine']}; "
        + results.get(
            "machine_note", "wall times are inflated several-fold by the other jobs that shared its 2 cores."
        ),
        "",
        f"Target: {results['target']}.",
        "",
        "Goal fractions are over deterministic episodes from random starts; `right start` is the goal of the "
        "deterministic trajectory from (14.5, 8). `U/r0`: novelty against the policy's own references (min over "
        "them of the mean action distance on its visited states) over its threshold. `term.`: fraction of "
        "training episodes ended by the constraint, first / last 10 iterations.",
        "",
    ]
    for name, stage in results["stages"].items():
        title = "PPO references" if name == "ppo" else f"IPD chain `{name}` (r0 = {stage['r0']:.4f})"
        settings = ", ".join(f"`{k}={v}`" for k, v in stage.get("method_settings", {}).items())
        code = stage.get("code", {})
        env = stage.get("environment")
        env = (
            f"; environment `{' '.join(f'{k}={v}' for k, v in env.items())}`"
            if env and env != results.get("environment")
            else ""
        )
        lines += [
            f"## {title}",
            "",
            f"Training time {stage.get('train_seconds', 0):.0f} s (sum over the policies); npsco commit "
            f"{str(code.get('commit'))[:10]}" + (f"; IPD settings {settings}" if settings else "") + env + ".",
            "",
            "| policy | seed | right start | top | bottom | left | right | none | return | U/r0 | term. |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for p in stage["policies"]:
            f = p["goal_fractions"]
            u = f"{p['novelty_over_r0']:.2f}" if "novelty_over_r0" in p else ""
            term = (
                f"{p['terminated_frac_first10']:.2f} / {p['terminated_frac_last10']:.2f}"
                if "terminated_frac_last10" in p
                else ""
            )
            lines.append(
                f"| {p['name']} | {p['seed']} | {p['right_start_goal']} | "
                + " | ".join(f"{f[g]:.2f}" for g in ("top", "bottom", "left", "right", "none"))
                + f" | {p['return_mean']:.2f} | {u} | {term} |"
            )
        lines.append("")
    if "verdict" in results:
        v = results["verdict"]
        lines += [
            "## Verdict",
            "",
            f"PPO right-start goals: {', '.join(v['ppo_right_start_goals'])} "
            f"({'<= 2: ok' if v['ppo_ok'] else 'more than 2'}).",
            "",
        ]
        for name, c in v["chains"].items():
            lines.append(
                f"- `{name}` (r0 {c['r0']:.4f}): {c['distinct']} distinct goals "
                f"({', '.join(c['right_start_goals'])}), worst goal-reaching fraction "
                f"{c['min_reached_goal_frac']:.2f}: target {'met' if c['target_met'] else 'NOT met'}. "
                f"Top and bottom as one: {c['distinct_top_bottom_as_one']}; goals no PPO seed reaches from "
                f"the right start: {', '.join(c['goals_no_ppo_seed_reaches']) or 'none'}; policies with "
                f"U >= r0: {c['policies_meeting_r0']}/{len(_chain_policies(results, name))}."
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
