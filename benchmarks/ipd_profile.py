"""Where IPD's extra time per rollout step goes, against PPO, on Hopper-v5 with the `default` preset (1 env): CPU
microseconds per step of the rollout, and of each part of it that IPD adds or changes.

    python benchmarks/ipd_profile.py                       # 8 rounds, r0 = 1.46, prints a markdown table
    python benchmarks/ipd_profile.py --r0 1e-9             # IPD cutting no episode

One process holds three trainers of benchmarks/throughput_methods.py's settings (the paper campaign's 5 Hopper-v5
PPO references, seed 0): PPO, IPD, and IPD whose hooks do nothing (`on_step` answers None, no episode bookkeeping:
what the trainer pays to build each step's `StepInfo`). They collect one rollout each in turn, the order alternating,
after an untimed one each. The CPU time of this thread (`time.thread_time`) is summed around each rollout and around
each call of IPD's `on_step` (its `NoveltyTracker.update` inside it), `end_episodes`, and the env's `step` and
`reset`; the timers around the calls add about 0.5 us each to the rollout (IPD's has 4 more per step than the
others).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `import npsco` does in the command, before numpy loads

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from throughput_methods import R0, make_trainer  # noqa: E402


def timed(obj: Any, name: str, into: list[float]) -> None:
    """Replace the method `name` of `obj` by itself plus the thread's CPU seconds of each call, summed in into[0]."""
    call: Callable = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        out = call(*args, **kwargs)
        into[0] += time.thread_time() - t0
        return out

    setattr(obj, name, wrapper)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8, help="timed rollouts per trainer (default 8)")
    p.add_argument("--r0", type=float, default=R0, help=f"IPD's threshold (default {R0})")
    args = p.parse_args(argv)
    import torch  # noqa: PLC0415  (after the BLAS setting)

    torch.set_num_threads(1)
    trainers = {"ppo": make_trainer("ppo", 0), "ipd": make_trainer("ipd", 0, args.r0)}
    trainers["ipd, hooks doing nothing"] = bare = make_trainer("ipd", 0, args.r0)
    bare.hooks.on_step, bare.hooks.end_episodes = lambda step: None, lambda done: None
    ipd = trainers["ipd"]
    parts = {
        "env step (PPO)": (trainers["ppo"].envs, "step"),
        "env step (IPD)": (ipd.envs, "step"),
        "env step (IPD, hooks doing nothing)": (bare.envs, "step"),
        "env reset (IPD: the episodes it cuts)": (ipd.envs, "reset"),
        "IPD's on_step": (ipd.hooks, "on_step"),
        "  of which NoveltyTracker.update": (ipd.hooks.tracker, "update"),
        "IPD's end_episodes": (ipd.hooks, "end_episodes"),
    }
    spent = {part: [0.0] for part in parts}
    for part, (obj, name) in parts.items():
        timed(obj, name, spent[part])
    rollout = {name: [0.0] for name in trainers}
    episodes = dict.fromkeys(trainers, 0)
    for r in range(args.rounds + 1):
        order = list(trainers) if r % 2 else list(trainers)[::-1]
        for name in order:
            t = trainers[name]
            t0 = time.thread_time()
            buf = t.collect_rollout()
            if r:  # the first round is untimed (compilation, first-call allocations)
                rollout[name][0] += time.thread_time() - t0
                episodes[name] += len(buf.summary.returns)
            t.hooks.update(t.learner, t.compute_advantages(buf))
            t.hooks.iteration_metrics(buf.summary)
        if not r:
            for acc in spent.values():
                acc[0] = 0.0
    steps = args.rounds * ipd.cfg.batch_size
    print(
        f"Hopper-v5, r0 = {args.r0:g}, {args.rounds} rollouts of {ipd.cfg.batch_size} steps per trainer; load average "
        f"{os.getloadavg()[0]:.1f}\n"
    )
    print("| CPU us per rollout step | |\n|---|---|")
    for name in trainers:
        label = f"rollout: {name} ({episodes[name] / args.rounds:g} episodes per rollout)"
        print(f"| {label} | {rollout[name][0] / steps * 1e6:.1f} |")
    for part in parts:
        print(f"| {part} | {spent[part][0] / steps * 1e6:.1f} |")


if __name__ == "__main__":
    main()
