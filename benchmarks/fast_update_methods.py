"""The numpy ("fast") updates of TNB, CTNB and CPO against their torch references: what the numpy path changes in
training, and how much faster it trains. npsco trains with the numpy updates only; the torch references are the
tests' oracles (tests/oracles/), which this script imports: the "torch backend" below is a trainer whose learner is
`oracles.torch_learner.TorchLearner`, its method's own steps in torch (`oracles.torch_update.torch_methods`).

    python benchmarks/fast_update_methods.py                                  # maze and Hopper-v5, 2 seeds
    python benchmarks/fast_update_methods.py --steps 10240 --seeds 1 --tasks Hopper-v5   # a quick look

Everything runs in this one process, BLAS and torch on one thread (as the `npsco` command runs). Per task: one PPO
reference (seed 100, `--ref-steps` steps), then three measurements, each method against that reference at the
threshold `--r0` (its value per task: what matters here is that both backends train the same thing):

1. One update: a fresh trainer (seed 0) of the method collects one batch; its update runs from the same state with
   each backend. Reported: the relative difference of the parameter change, ||d_numpy - d_torch|| / ||d_torch|| (all
   parameters: actor and critics), and the largest absolute difference of a parameter after the update.
2. Training: per method and seed (1, 2, ...), a run of `--steps` steps with each backend, back to back, the order
   alternating with the seed; reported: the final policy's mean deterministic return over `--eval-episodes` episodes
   (seeded 12345, run after the training).
3. Speed: the same runs' steps/s = steps / (rollout + update seconds), and steps per CPU second of the training call
   (steadier than wall time on a machine shared with other processes); per pair the numpy / torch ratio; plain PPO
   runs alongside (same seeds, both backends) as the yardstick.

The results (`--out`, .json and .md) are rewritten on every run, except the `## Notes` section at the end of the .md
(the analysis, written by hand).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from npsco.episodes import run_episodes
from npsco.fields import apply_overrides
from npsco.io import atomic_write_json, atomic_write_text
from npsco.methods import make_method
from npsco.methods.base import MethodContext
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import ReferenceSet
from npsco.policy import Policy
from npsco.ppo.config import PPOConfig, preset
from npsco.ppo.train import train
from npsco.ppo.trainer import Trainer
from npsco.tasks import MAZE_ID

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the torch references: tests/oracles/
from oracles.torch_learner import TorchLearner  # noqa: E402
from oracles.torch_update import torch_methods, torch_update  # noqa: E402

METHODS = ("tnb", "ctnb", "cpo")
BACKENDS = ("numpy", "torch")
DEFAULT_R0 = {MAZE_ID: 0.75, "Hopper-v5": 0.6}
EVAL_SEED = 12345


@dataclasses.dataclass
class Settings:
    """What the benchmark runs."""

    tasks: tuple[str, ...] = (MAZE_ID, "Hopper-v5")
    """The tasks, each with its default preset."""
    steps: int = 20480
    """Steps of each training run (rounded down to whole batches)."""
    seeds: int = 2
    """Training seeds per method and backend (1, 2, ...)."""
    ref_steps: int = 20480
    """Steps of the PPO reference of each task."""
    eval_episodes: int = 10
    """Episodes of the final deterministic evaluation of each training run."""
    r0: dict[str, float] = dataclasses.field(default_factory=lambda: dict(DEFAULT_R0))
    """The novelty threshold per task."""
    overrides: tuple[str, ...] = ()
    """`key=value` PPO settings over every task's preset (tests: tiny runs)."""


def config(settings: Settings, task: str, steps: int, seed: int) -> PPOConfig:
    cfg = apply_overrides(preset(task), settings.overrides)
    iterations = max(1, steps // cfg.batch_size)
    return dataclasses.replace(
        cfg,
        seed=seed,
        total_timesteps=iterations * cfg.batch_size,
        eval_every=0,  # (the benchmark evaluates the final policy itself, outside the timed training)
        checkpoint_every=0,
    )


def method(name: str, task: str, reference: Policy, r0: float):
    return make_method(MethodConfig.of(name), MethodContext(task, ReferenceSet([reference], ["ref"]), r0))


def one_update(settings: Settings, task: str, name: str, reference: Policy) -> dict[str, Any]:
    """One update of a fresh trainer's first batch with each backend, from the same state."""
    trainer = Trainer(config(settings, task, 1, 0), method(name, task, reference, settings.r0[task]), tensorboard=False)
    batch = trainer.compute_advantages(trainer.collect_rollout())
    trainer.envs.close()
    agent, learner = trainer.agent, trainer.learner
    start = (
        {k: v.clone() for k, v in agent.state_dict().items()},
        learner.optimizer.state_dict(),
        learner.torch_rng.get_state(),
        dict(vars(trainer.hooks)),  # what the rollout collected (the update replaces, not mutates, it)
    )
    before = torch.cat([p.detach().reshape(-1) for p in agent.parameters()]).numpy().copy()
    after, metrics = {}, {}
    for backend in BACKENDS:
        agent.load_state_dict(start[0])
        learner.optimizer.load_state_dict(start[1])
        learner.torch_rng.set_state(start[2])
        vars(trainer.hooks).update(start[3])
        if backend == "torch":
            metrics[backend] = torch_update(trainer.hooks, learner, batch)
        else:
            metrics[backend] = trainer.hooks.update(learner, batch)
        after[backend] = torch.cat([p.detach().reshape(-1) for p in agent.parameters()]).numpy().copy()
    change = after["torch"] - before
    out = {
        "task": task,
        "method": name,
        "relative_difference": float(np.linalg.norm(after["numpy"] - after["torch"]) / np.linalg.norm(change)),
        "max_abs_difference": float(np.abs(after["numpy"] - after["torch"]).max()),
        "change_norm": float(np.linalg.norm(change)),
    }
    if name == "cpo":
        out["cpo"] = {b: {k: metrics[b][k] for k in ("cpo/case", "cpo/lambda", "cpo/nu")} for b in BACKENDS}
    return out


def training_run(
    settings: Settings, task: str, name: str, seed: int, backend: str, reference: Policy
) -> dict[str, Any]:
    """A training run of `name` (a method, or plain PPO); its final evaluation's return and its speed (evaluation
    excluded)."""
    cfg = config(settings, task, settings.steps, seed)
    hooks = None if name == "ppo" else method(name, task, reference, settings.r0[task])
    trainer = Trainer(cfg, hooks, tensorboard=False)
    in_torch = backend == "torch"
    if in_torch:
        trainer.learner = TorchLearner(trainer.learner)  # type: ignore[assignment]
    cpu = time.process_time()
    with torch_methods() if in_torch else contextlib.nullcontext():
        result = trainer.train(progress=False)
    cpu = time.process_time() - cpu
    seconds = sum(r["charts/rollout_seconds"] + r["charts/update_seconds"] for r in result.metrics)
    steps = cfg.num_iterations * cfg.batch_size
    episodes = run_episodes(result.policy, settings.eval_episodes, seed=EVAL_SEED)
    return {
        "task": task,
        "method": name,
        "seed": seed,
        "backend": backend,
        "steps": steps,
        "return": float(episodes.returns.mean()),
        "steps_per_s": steps / seconds,
        "steps_per_cpu_s": steps / cpu,
        "update_s_per_batch": sum(r["charts/update_seconds"] for r in result.metrics) / cfg.num_iterations,
        "rollout_s_per_batch": sum(r["charts/rollout_seconds"] for r in result.metrics) / cfg.num_iterations,
    }


def run(settings: Settings, log=print) -> dict[str, Any]:
    out: dict[str, Any] = {"one_update": [], "runs": [], "load": [os.getloadavg()[0]]}
    for task in settings.tasks:
        reference = train(config(settings, task, settings.ref_steps, 100), progress=False, tensorboard=False).policy
        for name in METHODS:
            out["one_update"].append(one_update(settings, task, name, reference))
            log(out["one_update"][-1])
        for name in ("ppo", *METHODS):
            for seed in range(1, settings.seeds + 1):
                for backend in BACKENDS if seed % 2 else BACKENDS[::-1]:
                    out["runs"].append(training_run(settings, task, name, seed, backend, reference))
                    log(out["runs"][-1])
        out["load"].append(os.getloadavg()[0])
    return out


# ------------------------------------------------------------------------------------------------------ report
def _ratio(values: list[float]) -> str:
    return f"**{statistics.median(values):.2f}x** [{min(values):.2f}, {max(values):.2f}] ({len(values)})"


NOTES = "## Notes"
"""The heading of the hand-written analysis at the end of the results file, which a rerun keeps."""


def with_notes(text: str, path: Path) -> str:
    """`text`, then the `## Notes` section of the file at `path` if it has one (written by hand: a rerun keeps it)."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    at = old.find(NOTES)
    return text if at < 0 else text + "\n" + old[at:]


def render(settings: Settings, results: dict[str, Any], command: str, minutes: float) -> str:
    runs = results["runs"]

    def find(task: str, name: str, seed: int, backend: str) -> dict[str, Any]:
        return next(r for r in runs if (r["task"], r["method"], r["seed"], r["backend"]) == (task, name, seed, backend))

    lines = [
        "# Fast (numpy) updates of TNB, CTNB and CPO vs their torch references",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}  ",
        f"Date: {time.strftime('%Y-%m-%d %H:%M')}; total {minutes:.1f} min; 1-minute load average "
        + " / ".join(f"{x:.1f}" for x in results["load"])
        + " (at the start and after each task; this machine's 2 cores are shared with other jobs).",
        "",
        f"Each method against one PPO reference of its task (seed 100, {settings.ref_steps} steps), r0 "
        + ", ".join(f"{t} {settings.r0[t]}" for t in settings.tasks)
        + "; every other setting the task's default preset. BLAS and torch on one thread.",
        "",
        "## One update from the same state",
        "",
        "The first batch of a fresh trainer (seed 0); its update with each backend from the same parameters, Adam "
        "state and minibatches. Relative difference: ||d_numpy - d_torch|| / ||d_torch|| of the parameter change "
        "(actor and critics).",
        "",
        "| task | method | relative difference | largest parameter difference | CPO case, lambda, nu (numpy / torch) |",
        "|---|---|---|---|---|",
    ]
    for row in results["one_update"]:
        cpo = ""
        if "cpo" in row:
            n, t = row["cpo"]["numpy"], row["cpo"]["torch"]
            cpo = " / ".join(f"{int(d['cpo/case'])}, {d['cpo/lambda']:.4g}, {d['cpo/nu']:.4g}" for d in (n, t))
        lines.append(
            f"| {row['task']} | {row['method']} | {row['relative_difference']:.1e} | "
            f"{row['max_abs_difference']:.1e} | {cpo} |"
        )
    seeds = range(1, settings.seeds + 1)
    lines += [
        "",
        f"## Training: final returns ({settings.steps} steps per run)",
        "",
        f"The final policy's mean deterministic return over {settings.eval_episodes} episodes (seeded {EVAL_SEED}); "
        "the same training seed with each backend.",
        "",
        "| task | method | " + " | ".join(f"seed {s} numpy / torch" for s in seeds) + " |",
        "|---|---|" + "---|" * settings.seeds,
    ]
    for task in settings.tasks:
        for name in ("ppo", *METHODS):
            cells = [
                f"{find(task, name, s, 'numpy')['return']:.2f} / {find(task, name, s, 'torch')['return']:.2f}"
                for s in seeds
            ]
            lines.append(f"| {task} | {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Speed",
        "",
        "Steps/s = steps / (rollout + update seconds) of each run, median over the seeds; steps per CPU-s = steps / "
        "CPU seconds of the training call. A ratio is the median of the pairs' numpy / torch ratios [smallest, "
        "largest] (number of pairs; the two runs of a pair ran back to back). vs PPO: the method's steps per CPU-s "
        "over PPO's, both with the numpy backend.",
        "",
        "| task | method | numpy steps/s | torch steps/s | numpy / torch | numpy / torch (CPU time) "
        "| update s per batch numpy / torch | rollout s per batch numpy | vs PPO (numpy, CPU time) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task in settings.tasks:
        ppo = statistics.median(find(task, "ppo", s, "numpy")["steps_per_cpu_s"] for s in seeds)
        for name in ("ppo", *METHODS):
            sps = {b: statistics.median(find(task, name, s, b)["steps_per_s"] for s in seeds) for b in BACKENDS}
            upd = {b: statistics.median(find(task, name, s, b)["update_s_per_batch"] for s in seeds) for b in BACKENDS}
            rollout = statistics.median(find(task, name, s, "numpy")["rollout_s_per_batch"] for s in seeds)
            ratio, cpu_ratio = (
                [find(task, name, s, "numpy")[key] / find(task, name, s, "torch")[key] for s in seeds]
                for key in ("steps_per_s", "steps_per_cpu_s")
            )
            cpu = statistics.median(find(task, name, s, "numpy")["steps_per_cpu_s"] for s in seeds)
            lines.append(
                f"| {task} | {name} | {sps['numpy']:.0f} | {sps['torch']:.0f} | {_ratio(ratio)} | {_ratio(cpu_ratio)} "
                f"| {upd['numpy']:.3f} / {upd['torch']:.3f} | {rollout:.3f} | {cpu / ppo:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = Settings()
    p.add_argument("--tasks", nargs="+", default=list(defaults.tasks))
    p.add_argument("--steps", type=int, default=defaults.steps, help="steps per training run")
    p.add_argument("--seeds", type=int, default=defaults.seeds, help="training seeds per method and backend")
    p.add_argument("--ref-steps", type=int, default=defaults.ref_steps, help="steps of each task's PPO reference")
    p.add_argument("--eval-episodes", type=int, default=defaults.eval_episodes)
    p.add_argument("--set", action="append", default=[], help="KEY=VALUE PPO setting over every task's preset")
    p.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/throughput/fast_update_methods"), help="(.json, .md)"
    )
    a = p.parse_args()
    unknown = [t for t in a.tasks if t not in DEFAULT_R0]
    if unknown:
        p.error(f"no r0 for {unknown}; tasks: {', '.join(DEFAULT_R0)}")
    settings = Settings(tuple(a.tasks), a.steps, a.seeds, a.ref_steps, a.eval_episodes, overrides=tuple(a.set))
    command = "python benchmarks/fast_update_methods.py " + " ".join(sys.argv[1:])
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    with threadpool_limits(1, user_api="blas"):
        results = run(settings)
    minutes = (time.perf_counter() - t0) / 60
    atomic_write_json(a.out.with_suffix(".json"), {"command": command, **results})
    md = a.out.with_suffix(".md")
    atomic_write_text(md, with_notes(render(settings, results, command.strip(), minutes), md))
    print(f"wrote {a.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
