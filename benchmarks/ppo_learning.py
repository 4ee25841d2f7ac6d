"""Learning quality of npsco PPO from `npsco train` run directories (or the PPO references of population runs,
RUN/refs/refI), as a table that can stand beside CleanRL's.

    python benchmarks/ppo_learning.py runs/learn/Hopper-v5-seed{0..4} runs/learn/Walker2d-v5-seed{0..4} \
        --out benchmarks/results/ppo_learning

For each task among the runs (one file pair per task, OUT_TASK.md and OUT_TASK.json, each written atomically), over
the runs' seeds:

- **deterministic final return**: the final policy (`policy.safetensors`) evaluated as `npsco evaluate` does (10
  deterministic episodes, env seeds 0..9 by default): our headline number;
- **training return, CleanRL's figure**: the mean stochastic episodic return of the last 100 training episodes, from
  each run's `metrics.jsonl` (`charts/episodic_return`, the mean of the episodes that ended in an iteration, and
  `charts/episodes`, how many ended). Only per-iteration means are logged: the oldest iteration counted may
  contribute part of its episodes, at its mean. This is what CleanRL's benchmark reports, so the two are like with like;

each as mean +- std over seeds (population std, as the paper) and IQM with a 95% percentile-bootstrap CI
(`npsco.stats`, 2000 resamples, seed 0), plus the per-seed values and the commands that made the runs and the file.
Seeds are whatever runs are given: fix them before training (e.g. 0..4), never pick runs after seeing them.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from npsco.episodes import run_episodes
from npsco.errors import NpscoError
from npsco.evaluation.scoring import metric_summary
from npsco.io import atomic_write_json, atomic_write_text, read_json
from npsco.logger import read_metrics
from npsco.options import closest_preset, setting_text
from npsco.policy import Policy, load_policy
from npsco.ppo.config import PPOConfig
from npsco.report.provenance import population_command

LAST_EPISODES = 100
"""CleanRL's figure: the mean return of this many last training episodes."""


@dataclass
class RunScore:
    """One `npsco train` run: its seed, final deterministic return and last training episodes' return."""

    run: str
    seed: int
    steps: int
    final_return: float
    """Mean deterministic return of the final policy over the evaluation episodes."""
    final_return_std: float
    """Std of that return over the episodes."""
    training_return: float | None
    """Mean stochastic return of the last `LAST_EPISODES` training episodes (None: no episode ended)."""
    training_episodes: int
    """How many training episodes that mean covers (fewer than LAST_EPISODES when fewer ended)."""
    command: str
    """The `npsco train` command that made the run."""


@dataclass
class Summary:
    """Statistics over seeds of one per-seed value."""

    n: int
    mean: float
    std: float
    iqm: float
    iqm_ci_low: float
    iqm_ci_high: float
    per_seed: list[float]


def last_episodes_return(rows: list[dict], last: int = LAST_EPISODES) -> tuple[float | None, int]:
    """Mean return of the last `last` training episodes from per-iteration rows (`charts/episodic_return`: the mean of
    the `charts/episodes` episodes that ended in that iteration), newest first; the oldest iteration counted may give
    part of its episodes, at its mean. Returns (mean, episodes counted); (None, 0) when none ended."""
    total, count = 0.0, 0
    for row in reversed(rows):
        n, mean = int(row.get("charts/episodes") or 0), row.get("charts/episodic_return")
        if n <= 0 or mean is None:
            continue
        take = min(n, last - count)
        total, count = total + take * float(mean), count + take
        if count == last:
            break
    return (total / count, count) if count else (None, 0)


def summarize(values: list[float]) -> Summary:
    """The seeds' values and their statistics as the report computes them (`metric_summary`: mean +- std, population
    std, and IQM with its 95% percentile-bootstrap CI, 2000 resamples, seed 0)."""
    if not values or not all(math.isfinite(v) for v in values):
        raise NpscoError(f"every seed's value must be a finite number, got {values}")  # none is left out silently
    stats = metric_summary(values)
    assert stats is not None and stats["n"] == len(values)
    return Summary(**stats, per_seed=[float(v) for v in values])


def train_command(run: Path, config: dict) -> str:
    """The `npsco train` command equivalent to a run's config.json: the preset that needs the fewest overrides, the
    seed, the steps, and a --set for every other setting that differs from the preset."""
    ppo = config["ppo"]
    chosen, extra = closest_preset(ppo)
    args = ["npsco", "train", "--env", ppo["env_id"]] + (["--preset", chosen] if chosen != "default" else [])
    args += ["--seed", str(ppo["seed"]), "--steps", str(ppo["total_timesteps"])]
    settings = {k: v for k, v in extra.items() if k not in ("seed", "total_timesteps")}
    args += [a for k, v in settings.items() for a in ("--set", f"{k}={setting_text(v)}")]
    return " ".join(shlex.quote(a) for a in [*args, "--out", str(run)])


def run_settings(run: Path) -> tuple[dict, str, Policy]:
    """(PPO settings, the command that made it, the final policy) of a finished `npsco train` run directory, or of a
    trained reference of a population run (RUN/refs/refI, its settings read from its checkpoint); NpscoError for
    anything else."""
    population = run.parent.parent
    own = read_json(run / "config.json") if (run / "config.json").exists() else None  # (a population's since 11-27)
    in_population = own is None or own.get("command") == "population"
    if in_population and run.parent.name == "refs" and (population / "manifest.json").exists():
        if not (run / "policy.safetensors").exists():
            raise NpscoError(f"{run}: this reference of {population} is not trained")
        policy = load_policy(run / "policy.safetensors")
        made_by = population_command(population, read_json(population / "config.json"))
        return policy.metadata["config"], f"{made_by}   # its reference {run.name}", policy
    if not (run / "config.json").exists() or not (run / "policy.safetensors").exists():
        raise NpscoError(f"{run}: not a finished `npsco train` run (config.json and policy.safetensors)")
    config = read_json(run / "config.json")
    if config.get("command") != "train":
        raise NpscoError(f"{run}: not an `npsco train` run directory")
    policy = load_policy(run / "policy.safetensors")
    if policy.metadata.get("config") != config["ppo"]:
        raise NpscoError(f"{run}: policy.safetensors was not trained with this folder's config.json")
    return config["ppo"], train_command(run, config), policy


def score_run(run: Path, episodes: int, seed: int) -> tuple[str, RunScore]:
    """(env id, score) of one run (`run_settings`); NpscoError if it is not a finished one."""
    settings, command, policy = run_settings(run)
    cfg = PPOConfig.from_dict(settings)
    final = run_episodes(policy, episodes, seed=seed, max_episode_steps=cfg.max_episode_steps)
    rows = read_metrics(run / "metrics.jsonl") if (run / "metrics.jsonl").exists() else []
    training, counted = last_episodes_return(rows)
    return cfg.env_id, RunScore(
        run=str(run),
        seed=cfg.seed,
        steps=cfg.total_timesteps,
        final_return=float(final.returns.mean()),
        final_return_std=float(final.returns.std()),
        training_return=training,
        training_episodes=counted,
        command=command,
    )


def task_results(env_id: str, scores: list[RunScore], episodes: int, seed: int, command: str) -> dict:
    scores = sorted(scores, key=lambda s: s.seed)
    seeds = [s.seed for s in scores]
    if len(set(seeds)) != len(seeds):
        raise NpscoError(f"{env_id}: two runs with the same seed ({seeds})")
    training = [s.training_return for s in scores if s.training_return is not None]
    if training and len(training) < len(scores):
        missing = [s.run for s in scores if s.training_return is None]
        raise NpscoError(f"{env_id}: no training episode ended in {missing}: the training row would leave them out")
    return {
        "env_id": env_id,
        "seeds": seeds,
        "steps": sorted({s.steps for s in scores}),
        "final_deterministic": asdict(summarize([s.final_return for s in scores])),
        "training_last_episodes": asdict(summarize(training)) if training else None,
        "last_episodes": LAST_EPISODES,
        "evaluation": {"episodes": episodes, "seed": seed},
        "runs": [asdict(s) for s in scores],
        "commands": {
            "train": [s.command for s in scores],
            "evaluate": [
                f"npsco evaluate {shlex.quote(str(Path(s.run) / 'policy.safetensors'))} "
                f"--episodes {episodes} --seed {seed}"
                for s in scores
            ],
            "this_file": command,
        },
    }


def num(v: float) -> str:
    """A return as the tables show it: whole numbers for MuJoCo's, two decimals for the maze's small ones."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}"


def cell(s: dict | None) -> tuple[str, str]:
    """`mean +- std` and `IQM [low, high]` of a Summary dict."""
    if s is None:
        return "-", "-"
    return f"{num(s['mean'])} +- {num(s['std'])}", f"{num(s['iqm'])} [{num(s['iqm_ci_low'])}, {num(s['iqm_ci_high'])}]"


def markdown(data: dict) -> str:
    det, train = data["final_deterministic"], data["training_last_episodes"]
    steps = ", ".join(f"{s:,}" for s in data["steps"])
    lines = [
        f"# npsco PPO on {data['env_id']}: learning quality over {len(data['seeds'])} seeds",
        "",
        f"Seeds {', '.join(map(str, data['seeds']))}; {steps} steps per run. Made by:",
        "",
        f"    {data['commands']['this_file']}",
        "",
        "| measure | mean +- std over seeds | IQM [95% bootstrap CI] | per seed |",
        "|---|---|---|---|",
        f"| final policy, deterministic ({data['evaluation']['episodes']} episodes, env seeds "
        f"{data['evaluation']['seed']}..) | {cell(det)[0]} | {cell(det)[1]} | "
        f"{', '.join(num(v) for v in det['per_seed'])} |",
        f"| training, stochastic: last {data['last_episodes']} episodes (CleanRL's figure) | {cell(train)[0]} | "
        f"{cell(train)[1]} | {', '.join(num(v) for v in train['per_seed']) if train else '-'} |",
        "",
        "Compare CleanRL's published PPO numbers with the *training* row: they are the mean stochastic episodic return "
        "of the last training episodes (and on `-v4` tasks, not `-v5`). The deterministic row is what `npsco "
        "evaluate` gives for the final policy. std: population std over seeds; IQM: mean of the middle 50% of the "
        "seeds (nothing is cut below 4 seeds); CI: 2000 percentile-bootstrap resamples, seed 0.",
        "",
        "Training commands:",
        "",
        *[f"    {c}" for c in data["commands"]["train"]],
        "",
        "Evaluation commands (the same numbers as the deterministic row):",
        "",
        *[f"    {c}" for c in data["commands"]["evaluate"]],
        "",
    ]
    short = [r for r in data["runs"] if r["training_episodes"] < data["last_episodes"]]
    if short:
        lines += [
            f"Fewer than {data['last_episodes']} training episodes ended in: "
            + ", ".join(f"seed {r['seed']} ({r['training_episodes']})" for r in short)
            + ".",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "runs",
        nargs="+",
        help="`npsco train` run directories or population references RUN/refs/refI (any tasks; grouped by task)",
    )
    p.add_argument(
        "--out",
        default="benchmarks/results/ppo_learning",
        help="writes OUT_TASK.md and OUT_TASK.json per task (TASK: the env id without its namespace)",
    )
    p.add_argument("--episodes", type=int, default=10, help="deterministic episodes per final policy (default 10)")
    p.add_argument("--seed", type=int, default=0, help="evaluation episode i runs on an env seeded seed + i")
    args = p.parse_args(argv)
    command = " ".join(
        shlex.quote(a) for a in ["python", "benchmarks/ppo_learning.py", *(argv if argv is not None else sys.argv[1:])]
    )
    try:
        per_task: dict[str, list[RunScore]] = {}
        for i, run in enumerate(args.runs, 1):
            env_id, score = score_run(Path(run), args.episodes, args.seed)
            per_task.setdefault(env_id, []).append(score)
            print(
                f"[{i}/{len(args.runs)}] {run}: {env_id} seed {score.seed}, deterministic {score.final_return:.1f}, "
                f"training (last {score.training_episodes} episodes) "
                + (f"{score.training_return:.1f}" if score.training_return is not None else "-"),
                flush=True,
            )
        for env_id, scores in per_task.items():
            data = task_results(env_id, scores, args.episodes, args.seed, command)
            out = Path(f"{args.out}_{env_id.split('/')[-1]}")
            atomic_write_json(out.with_suffix(".json"), data)
            atomic_write_text(out.with_suffix(".md"), markdown(data))
            print(
                f"{env_id}: deterministic {' / '.join(cell(data['final_deterministic']))}; training "
                f"{' / '.join(cell(data['training_last_episodes']))}; written: {out}.md, {out}.json"
            )
    except NpscoError as e:
        print(f"ppo_learning.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
