"""How much an evaluation saves by not stepping episodes that are over (`LeanSyncVectorEnv.step_some`, the `auto`
backend) against stepping every env to the end of the longest episode (Gymnasium's `SyncVectorEnv`, `sync`).

    python benchmarks/eval_steps.py                        # the paper campaign's 40 Hopper-v5 novel policies
    python benchmarks/eval_steps.py --episodes 10 --repeats 3 --out benchmarks/results/throughput/eval_steps

For every novel policy of the paper campaign's Hopper-v5 sweep (`benchmarks/results/paper/sweep/Hopper-v5`), the
deterministic evaluation `npsco evaluate` runs (`--episodes` episodes from seed 0) on both backends, in turn, in this
process: the returns must be equal bit for bit; reported are the env steps and the CPU seconds of each (the median of
`--repeats`), per policy and in all.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `import npsco` does in the command, before numpy loads

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import npsco.episodes as episodes  # noqa: E402
from npsco.envs.make import make_vector_env  # noqa: E402
from npsco.io import atomic_write_json, atomic_write_text  # noqa: E402
from npsco.policy import load_policy  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "benchmarks/results/paper/sweep/Hopper-v5"


def evaluate(policy_path: Path, backend: str, n: int) -> tuple[np.ndarray, int, float]:
    """(returns, env steps, CPU seconds) of `n` deterministic episodes of the policy on `backend`."""
    policy = load_policy(policy_path)

    def make(env_id: str, num_envs: int, max_episode_steps: int | None = None):
        return make_vector_env(env_id, num_envs, backend, max_episode_steps)

    episodes.make_vector_env = make  # run_episodes makes its envs through this name
    try:
        start = time.process_time()
        out = episodes.run_episodes(policy, n, seed=0)
        seconds = time.process_time() - start
    finally:
        episodes.make_vector_env = make_vector_env
    steps = int(out.lengths.sum()) if backend == "auto" else n * int(out.lengths.max())
    return out.returns, steps, seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/throughput/eval_steps")
    args = ap.parse_args(argv)
    policies = sorted(SWEEP.glob("*/novel/*/k*/policy.safetensors"))
    rows = []
    for path in policies:
        seconds: dict[str, list[float]] = {"auto": [], "sync": []}
        steps = {}
        for r in range(args.repeats):
            for backend in ("auto", "sync") if r % 2 == 0 else ("sync", "auto"):
                returns, steps[backend], cpu = evaluate(path, backend, args.episodes)
                seconds[backend].append(cpu)
                if backend == "auto":
                    auto_returns = returns
                else:
                    sync_returns = returns
            assert np.array_equal(auto_returns, sync_returns), f"{path}: the returns differ between the backends"
        rows.append(
            {
                "policy": str(path.parent.relative_to(SWEEP)),
                "steps": steps,
                "cpu_seconds": {b: statistics.median(v) for b, v in seconds.items()},
            }
        )
        print(f"{rows[-1]['policy']}: {steps['auto']} / {steps['sync']} steps", flush=True)
    total = {b: sum(r["cpu_seconds"][b] for r in rows) for b in ("auto", "sync")}
    steps_total = {b: sum(r["steps"][b] for r in rows) for b in ("auto", "sync")}
    command = ("python benchmarks/eval_steps.py " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    result = {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "episodes": args.episodes,
        "repeats": args.repeats,
        "rows": rows,
        "cpu_seconds": total,
        "steps": steps_total,
    }
    atomic_write_json(args.out.with_suffix(".json"), result)
    lines = [
        "# Evaluation: episodes that are over are no longer stepped",
        "",
        f"`{command}` on {result['date']} (2 cores, shared with other work). Every novel policy of the paper "
        f"campaign's Hopper-v5 sweep ({len(rows)}), {args.episodes} deterministic episodes from seed 0 on each backend "
        "in turn; the returns are equal bit for bit on both (checked). CPU seconds: the median of "
        f"{args.repeats} repeats.",
        "",
        "| | env steps | CPU seconds |",
        "|---|---:|---:|",
        f"| `auto` (only running episodes stepped) | {steps_total['auto']:,} | {total['auto']:.1f} |",
        f"| `sync` (every env to the longest episode's end) | {steps_total['sync']:,} | {total['sync']:.1f} |",
        "",
        f"`auto` / `sync`: {steps_total['auto'] / steps_total['sync']:.2f} of the env steps, "
        f"{total['auto'] / total['sync']:.2f} of the CPU time (the lean step's own saving included).",
        "",
        "| policy | env steps (auto / sync) | CPU s (auto / sync) |",
        "|---|---:|---:|",
    ]
    lines += [
        f"| {r['policy']} | {r['steps']['auto']:,} / {r['steps']['sync']:,} "
        f"| {r['cpu_seconds']['auto']:.2f} / {r['cpu_seconds']['sync']:.2f} |"
        for r in rows
    ]
    atomic_write_text(args.out.with_suffix(".md"), "\n".join(lines) + "\n")
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
