"""Where `NoveltyTracker.update`'s compiled step stops paying: microseconds per call of the compiled path
(`_kernels.novelty_step`, one call per step) and of the numpy path (`ReferenceSet.distances`: BLAS matmuls, ~10 numpy
calls per step), for M random references of a given architecture at N states, and the work of each configuration
(multiply-adds of the M forward passes at the N states, what `COMPILED_STEP_WORK` bounds).

    python benchmarks/compiled_step.py            # prints a markdown table (design_measurements.md quotes it)

Each timing is the median over 300 calls of one call's wall time, on one thread (BLAS too, as the `npsco` command
runs; the median drops the calls another process interrupted). `hot`: calls back to back, the caches warm; `cold`: a
4 MiB buffer is read before each call (untimed), so that the references' weights and numpy's code and data are evicted
from the caches, as by the simulator's step in a rollout. For each architecture and M, N doubles until the compiled
path is twice as slow as numpy's, hot and cold.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `import npsco` does in the command, before numpy loads

import platform  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from functools import partial  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from npsco.novelty import references  # noqa: E402
from npsco.novelty.references import NoveltyTracker, ReferenceSet  # noqa: E402
from npsco.policy import Policy, space_metadata  # noqa: E402

SHAPES = [(11, 3, (64, 64)), (11, 3, (256, 256)), (376, 17, (256, 256))]
"""(observation dims, action dims, hidden layers): Hopper's policies, a wider network, Humanoid's sizes."""
REFS = (1, 5, 20)
ENVS = (1, 2, 4, 8, 16, 32)
SWEEP = np.ones(4 << 20, np.uint8)


def random_references(m: int, obs_dim: int, act_dim: int, hidden: tuple[int, ...]) -> ReferenceSet:
    """M tanh policies with random weights and normalisers (of a trained policy's scale)."""
    rng = np.random.default_rng(m)
    sizes = [obs_dim, *hidden, act_dim]
    obs_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
    act_space = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
    meta = {"env_id": "Bench-v0", "observation_space": space_metadata(obs_space)}
    meta["action_space"] = space_metadata(act_space)
    policies = [
        Policy(
            weights=[
                (
                    rng.normal(0.0, 1.0 / np.sqrt(sizes[i]), (sizes[i + 1], sizes[i])).astype(np.float32),
                    rng.normal(0.0, 0.1, sizes[i + 1]).astype(np.float32),
                )
                for i in range(len(sizes) - 1)
            ],
            log_std=np.full(act_dim, -0.5, np.float32),
            obs_mean=rng.normal(0.0, 1.0, obs_dim).astype(np.float32),
            obs_var=rng.uniform(0.5, 2.0, obs_dim).astype(np.float32),
            obs_clip=10.0,
            norm_obs=True,
            action_low=act_space.low,
            action_high=act_space.high,
            metadata=meta,
        )
        for _ in range(m)
    ]
    return ReferenceSet(policies)


def seconds_per_call(call: Callable[[], object], cold: bool, calls: int = 300) -> float:
    times = []
    for _ in range(calls):
        if cold:
            SWEEP.sum(dtype=np.uint64)
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def tracker(refs: ReferenceSet, n: int, compiled: bool) -> NoveltyTracker:
    references.COMPILED_STEP_WORK = 1 << 62 if compiled else -1  # force the path
    out = NoveltyTracker(refs, n)
    assert (out._compiled_step is not None) == compiled
    return out


def main() -> None:
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    print(f"{machine}, load average {os.getloadavg()[0]:.1f}\n")
    columns = ["numpy hot", "compiled hot", "numpy cold", "compiled cold"]
    print("| obs, act, hidden | M | N | work | " + " | ".join(f"{c} (us)" for c in columns) + " |")
    print("|---" * (4 + len(columns)) + "|")
    rng = np.random.default_rng(0)
    for obs_dim, act_dim, hidden in SHAPES:
        for m in REFS:
            refs = random_references(m, obs_dim, act_dim, hidden)
            for n in ENVS:
                obs = rng.normal(0.0, 1.0, (n, obs_dim)).astype(np.float32)
                act = rng.uniform(-1.0, 1.0, (n, act_dim)).astype(np.float32)
                times = []
                for cold in (False, True):
                    for compiled in (False, True):
                        t = tracker(refs, n, compiled)
                        t.update(obs, act)  # compile, allocate
                        times.append(seconds_per_call(partial(t.update, obs, act), cold))
                work = n * tracker(refs, n, True)._compiled_step.work  # type: ignore[union-attr]
                cells = " | ".join(f"{1e6 * s:.1f}" for s in times)
                print(f"| {obs_dim}, {act_dim}, {hidden} | {m} | {n} | {work:,} | {cells} |", flush=True)
                if times[1] > 2 * times[0] and times[3] > 2 * times[2]:
                    break


if __name__ == "__main__":
    main()
