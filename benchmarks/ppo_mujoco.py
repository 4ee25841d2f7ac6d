"""Learning benchmark: npsco PPO (`default` preset) on MuJoCo tasks, final deterministic return per seed.

Bar (issue 2): CleanRL's published PPO at 1M steps (v4): Hopper 2052 +- 314, Walker2d 2891 +- 231,
HalfCheetah 2906 +- 1129.
Each finished run is merged into the JSON results file at once, so an interrupted benchmark keeps what it measured.
Several processes can share the work (e.g. `--envs HalfCheetah-v5 --seeds 2` next to a process running every seed): a
process trains a (task, seed) only while it holds that run's lock (`RUN_DIR.lock`, an flock that dies with its
process) and the run is not in the results file yet, and it merges its row under the results file's lock
(`RESULTS.lock`), so no run is trained twice at once and no row is lost.

    python benchmarks/ppo_mujoco.py --envs Hopper-v5 --seeds 0 1 2 --steps 1000000
"""

from __future__ import annotations

import argparse
import fcntl
import json
import platform
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from npsco.episodes import run_episodes
from npsco.fields import apply_overrides
from npsco.io import atomic_write_json, fresh_dir
from npsco.ppo.config import preset
from npsco.ppo.train import train

CLEANRL_1M = {"Hopper": (2052, 314), "Walker2d": (2891, 231), "HalfCheetah": (2906, 1129)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", nargs="+", default=["Hopper-v5", "Walker2d-v5", "HalfCheetah-v5"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--steps", type=float, default=1_000_000)
    p.add_argument("--preset", default="default")
    p.add_argument("--episodes", type=int, default=10, help="final deterministic evaluation episodes")
    p.add_argument("--results", default="benchmarks/results/ppo_learning/ppo_mujoco_1M.json")
    p.add_argument("--runs", default="runs/bench/ppo_mujoco", help="run directories (policies, metrics)")
    args = p.parse_args(argv)

    results_path = Path(args.results)
    command = " ".join(["python", "benchmarks/ppo_mujoco.py", *(sys.argv[1:] if argv is None else argv)])
    machine = f"{platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}"

    def read() -> dict:
        return json.loads(results_path.read_text()) if results_path.exists() else {"runs": []}

    for env_id in args.envs:
        for seed in args.seeds:
            run_dir = Path(args.runs) / f"{env_id}-seed{seed}"
            with locked(run_dir.with_name(run_dir.name + ".lock"), wait=False) as mine:
                if not mine:
                    print(f"{env_id} seed {seed}: another process is training it; skipped", flush=True)
                    continue
                if any((r["env_id"], r["seed"]) == (env_id, seed) for r in read()["runs"]):
                    continue  # done, by this process earlier or by another one
                cfg = apply_overrides(
                    preset(env_id, args.preset), [f"seed={seed}", f"total_timesteps={int(args.steps)}"]
                )
                t0 = time.time()
                res = train(cfg, run_dir=fresh_dir(run_dir), progress=False, tensorboard=False)
                final = run_episodes(res.policy, args.episodes, seed=10_000)
                row = {
                    "env_id": env_id,
                    "seed": seed,
                    "steps": cfg.total_timesteps,
                    "preset": args.preset,
                    "final_return_mean": float(final.returns.mean()),
                    "final_return_std": float(final.returns.std()),
                    "eval_curve": [[e["global_step"], e["eval/return_mean"]] for e in res.eval_curve],
                    "wall_seconds": round(time.time() - t0, 1),
                    "command": command,
                    "machine": machine,
                }
                with locked(results_path.with_name(results_path.name + ".lock")):  # read-modify-write, one at a time
                    data = read()
                    data["runs"] = [r for r in data["runs"] if (r["env_id"], r["seed"]) != (env_id, seed)] + [row]
                    data["commands"] = sorted(set(data.get("commands", [])) | {command})
                    data["summary"] = summarize(data["runs"])
                    atomic_write_json(results_path, data)
                print(json.dumps({k: v for k, v in row.items() if k != "eval_curve"}), flush=True)
    print(json.dumps(read().get("summary", {}), indent=2))


@contextmanager
def locked(path: Path, wait: bool = True):
    """Hold an exclusive lock on `path` (created if needed) for the block; yields False at once if another process
    holds it and `wait` is False. The lock is the kernel's (flock): it goes with its process, even a killed one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def summarize(runs: list[dict]) -> dict:
    out = {}
    for env_id in sorted({r["env_id"] for r in runs}):
        finals = np.array([r["final_return_mean"] for r in runs if r["env_id"] == env_id])
        task = env_id.split("-")[0]
        out[env_id] = {
            "seeds": int(finals.size),
            "mean": float(finals.mean()),
            "std": float(finals.std()),
            "per_seed": finals.round(1).tolist(),
            "cleanrl_1M_v4": CLEANRL_1M.get(task),
        }
    return out


if __name__ == "__main__":
    main()
