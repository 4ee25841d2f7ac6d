"""Two pieces of npsco's env step in a warm loop: the direct step's outcome (observation, reward, health check after
the simulator steps), compiled against its numpy version, and a masked reset of one env, the lean vector env's against
Gymnasium's `SyncVectorEnv`.

    python benchmarks/env_step_parts.py --out benchmarks/results/throughput/env_step_parts

Per task (Hopper-v5, Walker2d-v5, HalfCheetah-v5): microseconds per call, the best of `--repeats` timings of
`--calls` calls each, the two versions timed in turn in each repeat. A warm loop: the same state and action every
call; in a rollout, after MuJoCo's step, the caches are cold and each call costs more. The outcome is timed at the
state a few random steps after a reset, with a float32 action; the masked reset on a vector env of one Hopper-v5
env, after a full reset.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import timeit
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `import npsco` does in the command, before numpy loads

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

from npsco.envs.direct_step import _numpy_outcome, _outcome  # noqa: E402
from npsco.envs.lean import LeanSyncVectorEnv  # noqa: E402
from npsco.envs.make import make_env  # noqa: E402

TASKS = ("Hopper-v5", "Walker2d-v5", "HalfCheetah-v5")


def paired_us(calls: int, repeats: int, **variants) -> dict[str, float]:
    """Per variant (name -> a call), microseconds per call: the best of `repeats` timings of `calls` calls, the
    variants timed in turn within each repeat (so a drift of the machine falls on all of them)."""
    for call in variants.values():
        call()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, call in variants.items():
            times[name].append(timeit.timeit(call, number=calls) / calls * 1e6)
    return {name: min(t) for name, t in times.items()}


def outcome_us(env_id: str, calls: int, repeats: int) -> dict[str, float]:
    """The direct step's outcome of `env_id` per call: numpy's and the compiled one's."""
    env = make_env(env_id)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
    task = env.unwrapped
    action = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
    x_before = np.float64(task.data.qpos[0] - 0.01)  # type: ignore[attr-defined]
    numpy, compiled = _numpy_outcome(task), _outcome(task)  # type: ignore[arg-type]
    return paired_us(calls, repeats, numpy=lambda: numpy(x_before, action), compiled=lambda: compiled(x_before, action))


def masked_reset_us(calls: int, repeats: int) -> dict[str, float]:
    """A masked reset of one Hopper-v5 env per call: Gymnasium's `SyncVectorEnv` and the lean vector env."""
    fns = [lambda: make_env("Hopper-v5")]
    sync = gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    lean = LeanSyncVectorEnv(fns)
    mask = np.ones(1, bool)
    for envs in (sync, lean):
        envs.reset(seed=0)
    return paired_us(
        calls,
        repeats,
        gymnasium=lambda: sync.reset(options={"reset_mask": mask}),
        lean=lambda: lean.reset(options={"reset_mask": mask}),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20_000, help="calls per timing (default 20000)")
    ap.add_argument("--repeats", type=int, default=11, help="timings per piece; the best is kept (default 11)")
    ap.add_argument("--out", type=Path, required=True, help="results path without suffix (.md and .json)")
    args = ap.parse_args(argv)
    if args.calls < 1 or args.repeats < 1:
        ap.error("--calls and --repeats must be >= 1")
    outcome = {task: outcome_us(task, args.calls, args.repeats) for task in TASKS}
    reset = masked_reset_us(max(1, args.calls // 10), args.repeats)
    command = " ".join(["python benchmarks/env_step_parts.py", *(argv if argv is not None else sys.argv[1:])])
    lines = [
        "# Two pieces of the env step: the direct step's outcome, a masked reset",
        "",
        f"`{command}`",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.1f}. Microseconds "
        f"per call, the best of {args.repeats} timings, in a warm loop.",
        "",
        "| task | outcome, numpy | outcome, compiled |",
        "|---|---:|---:|",
        *(f"| {t} | {r['numpy']:.2f} | {r['compiled']:.2f} |" for t, r in outcome.items()),
        "",
        "| masked reset of one Hopper-v5 env | Gymnasium's `SyncVectorEnv` | lean vector env |",
        "|---|---:|---:|",
        f"| us per reset | {reset['gymnasium']:.1f} | {reset['lean']:.1f} |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(text)
    record = {"calls": args.calls, "repeats": args.repeats, "outcome_us": outcome, "masked_reset_us": reset}
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
