"""The compiled forward pass (`npsco.forward`) against numpy's (BLAS matrix products, numpy's tanh): how far apart their
actions are on the states real policies visit, and what a call costs.

    python benchmarks/forward_pass.py --out benchmarks/results/rowwise/forward_pass

The policies: the paper campaign's 15 PPO references (`benchmarks/results/paper/sweep/*/ppo`), each on the states of
its own 3 deterministic episodes (seed 0). Difference: the largest |a_compiled - a_numpy| over every action dimension
and state, and the share of actions that differ at all. Cost: microseconds per call of `Policy.mean_action` and of the
numpy path for 1, 10 and 1,000 observations (the median of 7 repeats of 0.2 s each); run it on an idle machine.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from npsco.episodes import run_episodes
from npsco.io import atomic_write_json, atomic_write_text
from npsco.policy import Policy, load_policy, mlp_forward

ROOT = Path(__file__).resolve().parent.parent
REFS = sorted((ROOT / "benchmarks/results/paper/sweep").glob("*/ppo/refs/ref*/policy.safetensors"))


def numpy_actions(policy: Policy, obs: np.ndarray) -> np.ndarray:
    """The former path: the normaliser, BLAS products and numpy's tanh, the clip."""
    mean = mlp_forward(policy.weights, policy.normalize(obs), policy.activation).astype(np.float32)
    return np.clip(mean, policy.action_low, policy.action_high)


def per_call(fn, obs: np.ndarray) -> float:
    """Median over 7 repeats of the microseconds per call of fn(obs)."""
    fn(obs)
    times = []
    for _ in range(7):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < 0.2:
            fn(obs)
            calls += 1
        times.append((time.perf_counter() - start) / calls * 1e6)
    return float(np.median(times))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="results path without suffix (.md and .json)")
    args = ap.parse_args(argv)
    rows = []
    for path in REFS:
        policy = load_policy(path)
        states = np.concatenate(run_episodes(policy, 3, seed=0, record_states=True).states).astype(np.float64)
        diff = np.abs(policy.mean_action(states) - numpy_actions(policy, states))
        rows.append(
            {
                "policy": str(path.parent.relative_to(ROOT)),
                "states": len(states),
                "max_abs_difference": float(diff.max()),
                "share_different": float((diff > 0).mean()),
            }
        )
    policy = load_policy(REFS[0])
    obs = np.random.default_rng(0).normal(size=(1000, policy.obs_dim))
    cost = [
        {
            "observations": n,
            "compiled_us": per_call(policy.mean_action, obs[:n]),
            "numpy_us": per_call(lambda o: numpy_actions(policy, o), obs[:n]),
        }
        for n in (1, 10, 1000)
    ]
    lines = [
        "# The compiled forward pass against numpy's",
        "",
        f"`python benchmarks/forward_pass.py --out {args.out}` ({platform.processor() or platform.machine()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        "Actions of the paper campaign's 15 PPO references on the states of their own 3 deterministic episodes "
        "(seed 0): the compiled pass (`npsco.forward`, each observation alone) against numpy's (BLAS products over "
        "the batch, numpy's tanh).",
        "",
        "| policy | states | largest difference | share of actions that differ |",
        "|---|---:|---:|---:|",
        *[
            f"| {r['policy']} | {r['states']} | {r['max_abs_difference']:.2e} | {r['share_different']:.1%} |"
            for r in rows
        ],
        "",
        f"Largest difference over all: {max(r['max_abs_difference'] for r in rows):.2e} (actions lie in [-1, 1]).",
        "",
        f"Cost of one call, {REFS[0].parent.relative_to(ROOT)} (microseconds, median of 7 repeats):",
        "",
        "| observations | compiled | numpy |",
        "|---:|---:|---:|",
        *[f"| {c['observations']} | {c['compiled_us']:.1f} | {c['numpy_us']:.1f} |" for c in cost],
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out.with_suffix(".md"), "\n".join(lines))
    atomic_write_json(args.out.with_suffix(".json"), {"policies": rows, "cost": cost})
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
