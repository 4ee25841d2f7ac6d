"""IPD at the paper's threshold (r0 = 1x) on MuJoCo: the experiment of benchmarks/results/ipd_threshold/PROTOCOL.md.

Phases (each resumes: finished policies are never retrained; run them from a checkout pinned at one commit):

    python benchmarks/ipd_threshold.py refs --replicate dev              # 3 PPO references per task
    python benchmarks/ipd_threshold.py diagnose --replicate dev          # why 1x fails: feasibility, take-off
    python benchmarks/ipd_threshold.py candidates --replicate dev        # one IPD chain (k0, k1, k2) per candidate
    python benchmarks/ipd_threshold.py confirm --candidate NAME          # references + chain on confirm-a, confirm-b
    python benchmarks/ipd_threshold.py summarize                         # tables of everything finished so far
    python benchmarks/ipd_threshold.py collect                           # copy checkpoints + manifests into results
    python benchmarks/ipd_threshold.py statistics --candidate NAME       # the protocol's statistics (after summarize)

Runs go to runs/ipd_threshold/<replicate>/<task>/ (refs/ref{i}, and one population folder per candidate); results to
benchmarks/results/ipd_threshold/. `--workers` jobs run at once (default 2), each a `npsco` command whose output goes
to runs/ipd_threshold/logs/.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RUNS = Path("runs/ipd_threshold")
RESULTS = Path("benchmarks/results/ipd_threshold")
TASKS = ("Hopper-v5", "Walker2d-v5")
SUMMARY_TASKS = (*TASKS, "HalfCheetah-v5")
"""Tasks the summaries look for (HalfCheetah-v5: not in the protocol, summarised if run)."""
REPLICATES = {"dev": 20000, "confirm-a": 30000, "confirm-b": 40000}
REFS, NOVEL, EPISODES = 3, 3, 10
CANDIDATES: dict[str, list[str]] = {
    "paper": [],
    "sample": ["novelty_action=sample"],
    "w2": ["metric=wasserstein2"],
    "warmup": ["r0_warmup=0.5"],
    "discount": ["novelty_discount=0.98"],
    "profile": ["r0_profile=reference"],
}
"""The protocol's candidates: `npsco population --mset` settings, all at r0 = 1x the default threshold."""


# ------------------------------------------------------------------------------------------------------ running
def ref_dirs(replicate: str, task: str) -> list[Path]:
    return [RUNS / replicate / task / "refs" / f"ref{i}" for i in range(REFS)]


STEPS: list[str] = []
"""Extra `--steps N` for a smoke test (`--steps`); empty for the protocol (the preset's 1M)."""


def ref_commands(replicate: str, tasks: list[str]) -> list[list[str]]:
    seed = REPLICATES[replicate]
    return [
        ["train", "--env", task, "--seed", str(seed + i), "--out", str(d), "--no-progress", "--no-tensorboard", *STEPS]
        for task in tasks
        for i, d in enumerate(ref_dirs(replicate, task))
    ]


def chain_command(replicate: str, task: str, candidate: str) -> list[str]:
    refs = [str(d) for d in ref_dirs(replicate, task)]
    msets = [x for s in CANDIDATES[candidate] for x in ("--mset", s)]
    return [
        "population",
        "--env",
        task,
        "--method",
        "ipd",
        "--ref-checkpoints",
        *refs,
        "--novel",
        str(NOVEL),
        "--seed",
        str(REPLICATES[replicate]),
        "--r0-scale",
        "1",
        *msets,
        "--out",
        str(RUNS / replicate / task / candidate),
        "--no-progress",
        *STEPS,
    ]


def run_all(commands: list[list[str]], workers: int) -> None:
    """Run `npsco` commands, `workers` at a time; each one's output goes to its own log file."""
    logs = RUNS / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def one(cmd: list[str]) -> int:
        name = Path(cmd[cmd.index("--out") + 1]).relative_to(RUNS).as_posix().replace("/", "_")
        print(f"start: npsco {' '.join(cmd)}", flush=True)
        with open(logs / f"{name}.log", "a") as log:
            code = subprocess.call([sys.executable, "-m", "npsco.cli", *cmd], stdout=log, stderr=subprocess.STDOUT)
        print(f"{'done' if code == 0 else f'FAILED ({code})'}: {name}", flush=True)
        return code

    with ThreadPoolExecutor(workers) as pool:
        codes = list(pool.map(one, commands))
    if any(codes):
        sys.exit(f"{sum(c != 0 for c in codes)} command(s) failed; see {logs}")


# ---------------------------------------------------------------------------------------------------- diagnosis
def diagnose(replicate: str, tasks: list[str]) -> None:
    """Feasibility of the constraint for a fresh policy, and the references' own running distance along the episode."""
    from npsco.episodes import run_episodes
    from npsco.io import atomic_write_json
    from npsco.novelty.metrics import per_state_distance, running_novelty
    from npsco.novelty.threshold import default_threshold, policy_actions
    from npsco.policy import load_policy
    from npsco.ppo.config import preset
    from npsco.ppo.trainer import Trainer

    t_check = 21  # t_S + 1: the first step the instant rule checks
    out = {"replicate": replicate, "t_check": t_check, "tasks": {}}
    for task in tasks:
        refs = [load_policy(d / "policy.safetensors") for d in ref_dirs(replicate, task)]
        th = {m: default_threshold(refs, episodes=5, seed=0, metric=m) for m in ("deterministic", "wasserstein2")}
        # 1. a fresh policy (the chain's seeds, untrained) in stochastic episodes: its running novelty at t_check
        fresh = []
        for k in range(NOVEL):
            cfg = preset(task)
            cfg.seed = REPLICATES[replicate] + 1000 + k
            trainer = Trainer(cfg, tensorboard=False)
            policy = trainer.policy()
            trainer.envs.close()
            eps = run_episodes(policy, 5, seed=cfg.seed, deterministic=False, record_states=True)
            rng = np.random.default_rng(cfg.seed)
            for states in eps.states:
                mean = policy.mean_action(states)
                sample = np.clip(
                    mean + policy.action_std * rng.standard_normal(mean.shape), policy.action_low, policy.action_high
                )
                row = {"length": len(states)}
                for name, own, metric in (
                    ("mean", mean, "deterministic"),
                    ("sample", sample, "deterministic"),
                    ("w2", (mean, np.broadcast_to(policy.action_std, mean.shape)), "wasserstein2"),
                ):
                    d = np.stack([per_state_distance(own, policy_actions(r, metric)(states), metric) for r in refs], 1)
                    u = running_novelty(d)
                    row[name] = float(u[t_check - 1] / th[metric].r0) if len(states) >= t_check else None
                fresh.append(row)
        # 2. the references against each other: running novelty along their own deterministic episodes
        take_off, cut = {}, 0
        ref_eps = [run_episodes(r, 5, seed=0, record_states=True).states for r in refs]
        for i, r in enumerate(refs):
            others = [o for j, o in enumerate(refs) if j != i]
            for states in ref_eps[i]:
                d = np.stack([per_state_distance(r.mean_action(states), o.mean_action(states)) for o in others], 1)
                u = running_novelty(d)
                cut += bool(np.any(u[t_check - 1 :] < th["deterministic"].r0))
        profile = th["deterministic"].profile
        for t in (t_check, 50, 100, 200, 500, 1000):
            take_off[t] = float(profile[min(t, profile.size) - 1])
        reached = [r for r in fresh if r["mean"] is not None]
        out["tasks"][task] = {
            "r0": th["deterministic"].r0,
            "r0_w2": th["wasserstein2"].r0,
            "fresh_episodes": len(fresh),
            "fresh_reaching_t_check": len(reached),
            "fresh_u_over_r0_at_t_check": {k: [r[k] for r in reached] for k in ("mean", "sample", "w2")},
            "fresh_cut_at_t_check": {k: sum(r[k] < 1 for r in reached) for k in ("mean", "sample", "w2")},
            "reference_profile_rho": take_off,
            "reference_episodes": REFS * 5,
            "reference_episodes_cut_at_1x": cut,
        }
        print(json.dumps({task: out["tasks"][task]}, indent=1), flush=True)
    atomic_write_json(RESULTS / f"diagnosis_{replicate}.json", out)
    write_diagnosis_md(out)


def write_diagnosis_md(doc: dict) -> None:
    from npsco.io import atomic_write_text

    lines = [
        f"# Diagnosis on the `{doc['replicate']}` references (3 per task)",
        "",
        f"`python benchmarks/ipd_threshold.py diagnose --replicate {doc['replicate']}`; raw numbers in "
        f"`diagnosis_{doc['replicate']}.json`. t = {doc['t_check']} is the first step the instant rule checks.",
        "",
    ]
    lines += [
        "## 1. A fresh policy against the references",
        "",
        "The chain's three seeds, untrained, 5 stochastic episodes each: the running novelty at t = 21 as a "
        "multiple of r0 (in the matching metric), and how many of the episodes that reach t = 21 the instant "
        "rule at 1x would end there.",
        "",
        "| task | r0 | r0 (W2) | episodes reaching t = 21 | mean action: u / r0 (min-max), ended "
        "| sampled action | W2 |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, t in doc["tasks"].items():
        cells = []
        for k in ("mean", "sample", "w2"):
            v = t["fresh_u_over_r0_at_t_check"][k]
            cells.append(
                f"{np.median(v):.2f} ({min(v):.2f}-{max(v):.2f}), {t['fresh_cut_at_t_check'][k]} ended" if v else "-"
            )
        lines.append(
            f"| {task} | {t['r0']:.3f} | {t['r0_w2']:.3f} | {t['fresh_reaching_t_check']} of "
            f"{t['fresh_episodes']} | " + " | ".join(cells) + " |"
        )
    lines += [
        "",
        "## 2. The references against each other",
        "",
        "rho(t): the references' mean pairwise running distance at episode step t over their whole-episode "
        "mean (r0). Below 1, a new policy exactly as far from the references as they are from each other would "
        "be ended at that step. Last column: reference episodes (ref i against the other two) that the "
        "instant rule at 1x would end at some t > 20.",
        "",
        "| task | "
        + " | ".join(f"rho({t})" for t in next(iter(doc["tasks"].values()))["reference_profile_rho"])
        + " | reference episodes ended at 1x |",
        "|---|" + "---|" * (len(next(iter(doc["tasks"].values()))["reference_profile_rho"]) + 1),
    ]
    for task, t in doc["tasks"].items():
        lines.append(
            f"| {task} | "
            + " | ".join(f"{v:.2f}" for v in t["reference_profile_rho"].values())
            + f" | {t['reference_episodes_cut_at_1x']} of {t['reference_episodes']} |"
        )
    atomic_write_text(RESULTS / f"diagnosis_{doc['replicate']}.md", "\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------------- summaries
@dataclass
class PolicyRow:
    """One IPD policy of a chain, measured as the protocol says."""

    replicate: str
    task: str
    candidate: str
    name: str
    ret: float
    ret_std: float
    ref_median: float
    nearest: str
    nearest_over_r0: float
    nearest_over_r0_deterministic: float
    late_ends: float | None
    first_check_early: float | None
    first_check_late: float | None

    @property
    def meets(self) -> bool:
        """The paper's criteria (`npsco evaluate`'s `meets`): return >= RETURN_RATIO x the references' median,
        nearest >= r0."""
        from npsco.selection import meets_criteria

        return meets_criteria(self.ret, self.ref_median, self.nearest_over_r0, threshold=1.0)


def late_training(metrics_path: Path) -> tuple[float | None, float | None, float | None]:
    """Share of training episodes ended by the constraint over the last 10% of iterations; share of constraint ends
    at the first checked step over the first and the last 10% of iterations (None where none was ended)."""
    from npsco.logger import read_metrics

    if not metrics_path.exists():  # collected results keep no metrics
        return None, None, None
    rows = [r for r in read_metrics(metrics_path) if r.get("charts/episodes") is not None]
    tenth = max(1, len(rows) // 10)

    def shares(part):
        ended = sum(r.get("ipd/terminated", 0.0) for r in part)
        episodes = sum(r["charts/episodes"] for r in part)
        first = sum(r.get("ipd/first_check_frac", 0.0) * r.get("ipd/terminated", 0.0) for r in part)
        return ended / episodes if episodes else 0.0, (first / ended if ended else None)

    late, first_late = shares(rows[-tenth:])
    _, first_early = shares(rows[:tenth])
    return late, first_early, first_late


def measure_chain(replicate: str, task: str, candidate: str) -> list[PolicyRow]:
    """Deterministic episodes (seeds 0..9) of the references and of every finished IPD policy of the chain."""
    from npsco.episodes import run_episodes
    from npsco.io import read_json
    from npsco.novelty.metrics import policy_distance
    from npsco.novelty.threshold import policy_actions
    from npsco.policy import load_policy

    run = RUNS / replicate / task / candidate
    manifest = read_json(run / "manifest.json")
    members = manifest["members"]
    refs = [m for m in members if m["role"] == "reference"]
    novel = [m for m in members if m["role"] == "novel" and m["status"] == "done"]

    def where(member: dict) -> Path:  # a borrowed reference: absolute, or relative to the repository (`collect`)
        p = Path(member["path"])
        if p.parts[:2] == ("runs", "ipd_threshold"):
            return RUNS.joinpath(*p.parts[2:])
        return p if p.is_absolute() else run / p

    path = {m["name"]: where(m) / "policy.safetensors" for m in members}
    policies = {m["name"]: load_policy(path[m["name"]]) for m in refs + novel}
    returns = {n: run_episodes(p, EPISODES, seed=0, record_states=True) for n, p in policies.items()}
    ref_median = float(np.median([returns[m["name"]].returns.mean() for m in refs]))
    threshold = read_json(run / "threshold.json")
    metric = threshold.get("metric", "deterministic")
    r0, r0_det = threshold["r0_default"], None
    if metric != "deterministic":
        from npsco.novelty.threshold import default_threshold

        r0_det = default_threshold([policies[m["name"]] for m in refs], episodes=5, seed=0).r0
    rows = []
    for m in novel:
        states = np.concatenate(returns[m["name"]].states)
        me = policies[m["name"]]
        dist = {
            a: policy_distance(policy_actions(me, metric)(states), policy_actions(policies[a], metric)(states), metric)
            for a in m["references"]
        }
        det = {a: policy_distance(me.mean_action(states), policies[a].mean_action(states)) for a in m["references"]}
        nearest = min(dist, key=dist.get)
        late, first_early, first_late = late_training(run / m["path"] / "metrics.jsonl")
        rows.append(
            PolicyRow(
                replicate,
                task,
                candidate,
                m["name"].split("/")[-1],
                float(returns[m["name"]].returns.mean()),
                float(returns[m["name"]].returns.std()),
                ref_median,
                nearest,
                dist[nearest] / r0,
                min(det.values()) / (r0_det or r0),
                late,
                first_early,
                first_late,
            )
        )
    return rows


def summarize(out_name: str = "results") -> None:
    from npsco.evaluation.scoring import metric_summary
    from npsco.io import atomic_write_json, atomic_write_text
    from npsco.selection import RETURN_RATIO

    rows: list[PolicyRow] = []
    for replicate in REPLICATES:
        for task in SUMMARY_TASKS:
            for candidate in CANDIDATES:
                if (RUNS / replicate / task / candidate / "manifest.json").exists():
                    rows += measure_chain(replicate, task, candidate)
    lines = [
        "# IPD at the paper's threshold (r0 = 1x): results",
        "",
        "Protocol: `PROTOCOL.md` (written before these runs). Made with "
        "`python benchmarks/ipd_threshold.py summarize` from the runs of the commands there; commit: see "
        "`COMMIT`. Per IPD policy: deterministic return over 10 episodes (seeds 0-9); the references' median "
        "return (same episodes); the distance to the nearest policy it had to avoid, on its own deterministic "
        "states, over the r0 it trained against (in its metric; `det.` = the deterministic metric against the "
        "deterministic r0); training episodes ended by the constraint over the last 10% of iterations; of the "
        "constraint's ends, the share at the first checked step (t = 21) in the first / last 10% of iterations. "
        f"**meets** = return >= {RETURN_RATIO} x ref median and nearest / r0 >= 1.",
        "",
    ]
    header = (
        "| policy | return | ref median | return / ref median | nearest | nearest / r0 | det. | late ends "
        "| ends at t = 21 (early / late) | meets |"
    )
    groups: dict[tuple[str, str, str], list[PolicyRow]] = {}
    for r in rows:
        groups.setdefault((r.replicate, r.task, r.candidate), []).append(r)
    for (replicate, task, candidate), group in groups.items():
        passed = len(group) == NOVEL and all(r.meets for r in group)
        lines += [
            f"## {replicate}, {task}, `{candidate}` ({' '.join(CANDIDATES[candidate]) or 'paper settings'}): "
            f"{'passes' if passed else 'does not pass'} ({sum(r.meets for r in group)} of {len(group)} meet"
            f"{'' if len(group) == NOVEL else f'; {NOVEL - len(group)} not trained yet'})",
            "",
            header,
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in group:
            fc = " / ".join("-" if v is None else f"{v:.2f}" for v in (r.first_check_early, r.first_check_late))
            lines.append(
                f"| {r.name} | {r.ret:.0f} +- {r.ret_std:.0f} | {r.ref_median:.0f} | {r.ret / r.ref_median:.2f} "
                f"| {r.nearest} | {r.nearest_over_r0:.2f} | {r.nearest_over_r0_deterministic:.2f} "
                f"| {'-' if r.late_ends is None else f'{r.late_ends:.2f}'} | {fc} | {'yes' if r.meets else 'no'} |"
            )
        lines.append("")
    # aggregate per candidate and task over every replicate (the protocol's statistics of the confirmed setting,
    # with the replicates as bootstrap strata: the `statistics` phase)
    lines += [
        "## Per candidate and task, over every finished replicate",
        "",
        "| candidate | task | policies | meet | return / ref median: mean +- std, IQM [95% CI, replicates pooled] "
        "| nearest / r0: mean +- std, IQM [95% CI, replicates pooled] |",
        "|---|---|---|---|---|---|",
    ]
    for candidate in CANDIDATES:
        for task in SUMMARY_TASKS:
            group = [r for r in rows if r.candidate == candidate and r.task == task]
            if not group:
                continue
            cells = []
            for values in ([r.ret / r.ref_median for r in group], [r.nearest_over_r0 for r in group]):
                s = metric_summary(values)
                cells.append(
                    f"{s['mean']:.2f} +- {s['std']:.2f}, {s['iqm']:.2f} [{s['iqm_ci_low']:.2f}, {s['iqm_ci_high']:.2f}]"
                )
            lines.append(
                f"| {candidate} | {task} | {len(group)} | {sum(r.meets for r in group)} | {cells[0]} | {cells[1]} |"
            )
    atomic_write_text(RESULTS / f"{out_name}.md", "\n".join(lines) + "\n")
    atomic_write_json(RESULTS / f"{out_name}.json", [{**r.__dict__, "meets": r.meets} for r in rows])
    print("\n".join(lines))


def confirmation_statistics(rows: list[dict], candidate: str) -> list[str]:
    """The protocol's statistics of `candidate` (rows of results.json): per task over every replicate, return / ref
    median and nearest / r0 as mean +- std and IQM with a 95% stratified-bootstrap CI, the replicates as strata."""
    from npsco.stats import iqm, mean_std, stratified_bootstrap_ci

    lines = [
        f"# IPD at 1x, `{candidate}` ({' '.join(CANDIDATES[candidate]) or 'paper settings'}): "
        "the protocol's statistics",
        "",
        f"Made with `python benchmarks/ipd_threshold.py statistics --candidate {candidate}` from `results.json`. Per "
        "task, over the policies of every replicate: mean +- std (population std) and IQM with a 95% "
        "stratified-bootstrap CI (the replicates are the strata; 2000 resamples, seed 0).",
        "",
        "| task | replicates | policies | meet | return / ref median | nearest / r0 |",
        "|---|---|---|---|---|---|",
    ]
    for task in SUMMARY_TASKS:
        group = [r for r in rows if r["candidate"] == candidate and r["task"] == task]
        if not group:
            continue
        reps = sorted({r["replicate"] for r in group}, key=list(REPLICATES).index)
        cells = []
        for value in (lambda r: r["ret"] / r["ref_median"], lambda r: r["nearest_over_r0"]):
            strata = {rep: [value(r) for r in group if r["replicate"] == rep] for rep in reps}
            pooled = [v for vs in strata.values() for v in vs]
            mean, std = mean_std(pooled)
            ci = stratified_bootstrap_ci(strata, iqm, seed=0)
            cells.append(f"{mean:.2f} +- {std:.2f}, IQM {ci.point:.2f} [{ci.low:.2f}, {ci.high:.2f}]")
        meets = sum(bool(r["meets"]) for r in group)
        lines.append(f"| {task} | {', '.join(reps)} | {len(group)} | {meets} | {cells[0]} | {cells[1]} |")
    return lines


def collect() -> None:
    """Copy every finished policy's checkpoint, and the runs' manifests, configs and thresholds, into RESULTS/runs/
    (RUNS' layout; no metrics or TensorBoard files; absolute paths rewritten: `benchmarks/collect_runs.py`)."""
    from collect_runs import collect as copy_runs  # lazy: a sibling script, on sys.path when this one runs

    print(f"{copy_runs(RUNS, RESULTS / 'runs')} file(s) copied into {RESULTS / 'runs'}")


def main() -> None:
    global RUNS, RESULTS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("phase", choices=("refs", "diagnose", "candidates", "confirm", "summarize", "collect", "statistics"))
    p.add_argument("--replicate", default="dev", choices=tuple(REPLICATES))
    p.add_argument(
        "--candidate",
        default=None,
        choices=tuple(CANDIDATES),
        help="confirm, statistics (after summarize): the chosen setting",
    )
    p.add_argument(
        "--candidates",
        nargs="+",
        default=list(CANDIDATES),
        choices=tuple(CANDIDATES),
        help="candidates: which ones (default all, in the protocol's order)",
    )
    p.add_argument("--tasks", nargs="+", default=list(TASKS))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=None, help="smoke test only: steps per policy (default: the preset's)")
    p.add_argument("--runs", default=str(RUNS), help=f"runs folder (default {RUNS})")
    p.add_argument("--results", default=str(RESULTS), help=f"results folder (default {RESULTS})")
    args = p.parse_args()
    RUNS, RESULTS = Path(args.runs), Path(args.results)
    STEPS[:] = ["--steps", str(args.steps)] if args.steps else []
    if args.phase == "refs":
        run_all(ref_commands(args.replicate, args.tasks), args.workers)
    elif args.phase == "diagnose":
        diagnose(args.replicate, args.tasks)
    elif args.phase == "candidates":
        run_all([chain_command(args.replicate, t, c) for c in args.candidates for t in args.tasks], args.workers)
    elif args.phase == "confirm":
        if args.candidate is None:
            p.error("confirm needs --candidate")
        replicates = ("confirm-a", "confirm-b")
        run_all([c for r in replicates for c in ref_commands(r, args.tasks)], args.workers)
        run_all([chain_command(r, t, args.candidate) for r in replicates for t in args.tasks], args.workers)
    elif args.phase == "collect":
        collect()
    elif args.phase == "statistics":
        if args.candidate is None:
            p.error("statistics needs --candidate")
        from npsco.io import atomic_write_text

        lines = confirmation_statistics(json.loads((RESULTS / "results.json").read_text()), args.candidate)
        atomic_write_text(RESULTS / f"statistics_{args.candidate}.md", "\n".join(lines) + "\n")
        print("\n".join(lines))
    else:
        summarize()


if __name__ == "__main__":
    main()
