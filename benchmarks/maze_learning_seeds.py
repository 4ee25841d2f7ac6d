"""The maze learning test's setting on several seeds: how often the novel policy reaches a goal, and how far it is from
the references (tests/learning/test_new_methods_maze.py, one case, on other seeds than the test's 0).

    python benchmarks/maze_learning_seeds.py --seeds 1 2 3 4 5 --out benchmarks/results/rowwise/maze_learning_new

Per seed S: a population on the maze preset with seed S (references S, S + 1; the novel policy S + 1000), 2 PPO
references and 1 novel policy of the method at 1 x r0_default, as the test trains it; then 100 deterministic episodes
from random starts (seed 12345): the share that reaches a goal, and the nearest mean-action distance to a reference
over r0. It uses only the API the test uses, so any checkout's Python can run it
(`CHECKOUT/.venv/bin/python benchmarks/maze_learning_seeds.py ...`), and it records the commit of the npsco it ran.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import npsco
from npsco.episodes import run_episodes
from npsco.methods.settings import MethodConfig
from npsco.novelty.metrics import policy_distance
from npsco.population import Population, PopulationConfig
from npsco.ppo.config import preset
from npsco.tasks import MAZE_ID


def one_seed(seed: int, method: str, settings: dict) -> dict:
    """Train the test's population at `seed` in a temporary folder; its novel policy's reach and distance."""
    config = PopulationConfig(
        ppo=dataclasses.replace(preset(MAZE_ID), seed=seed),
        method=MethodConfig.of(method, **settings),
        refs=2,
        novel=1,
    )
    with tempfile.TemporaryDirectory() as tmp:
        pop = Population(Path(tmp) / "pop", config, progress=False, log=lambda line: None)
        members = pop.run()
        refs = [pop.policy(m) for m in members if m.role == "reference"]
        (novel,) = [m for m in members if m.role == "novel"]
        policy = pop.policy(novel)
        episodes = run_episodes(policy, 100, seed=12345, record_states=True)
        states = np.concatenate(episodes.states)
        nearest = min(policy_distance(policy.mean_action(states), r.mean_action(states)) for r in refs)
        return {
            "seed": seed,
            "reached": float(np.mean(episodes.goals >= 0)),
            "return_mean": float(np.mean(episodes.returns)),
            "nearest": float(nearest),
            "r0": float(novel.threshold),
            "nearest_over_r0": float(nearest / novel.threshold),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--method", default="lagrangian")
    ap.add_argument(
        "--mset",
        action="append",
        help="a method setting KEY=VALUE, repeatable (default: lagrangian_constrain=return, return_alpha=0.9)",
    )
    ap.add_argument("--out", type=Path, required=True, help="a JSON file (.json added)")
    args = ap.parse_args(argv)
    settings = {}
    for item in args.mset or ["lagrangian_constrain=return", "return_alpha=0.9"]:
        key, value = item.split("=", 1)
        settings[key] = json.loads(value) if value[:1].isdigit() or value in ("true", "false") else value
    rows = []
    for seed in args.seeds:
        start = time.time()
        rows.append({**one_seed(seed, args.method, settings), "seconds": round(time.time() - start, 1)})
        print(json.dumps(rows[-1]), flush=True)
    checkout = Path(npsco.__file__).resolve().parents[2]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    doc = {
        "commit": head.stdout.strip() or None,
        "method": args.method,
        "settings": settings,
        "rows": rows,
    }
    args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
