"""CPU seconds of one method's training iterations on one task: what `chain_ab.py` runs in each checkout.

    python benchmarks/method_iterations.py --env Walker2d-v5 --method ctnb --r0 1.10 --out /tmp/ctnb.json
    python benchmarks/method_iterations.py --env Hopper-v5 --method ppo --iterations 3 --out /tmp/ppo.json

One trainer (the `default` preset, no evaluation, `--seed`), one unmeasured iteration (first-call allocations and
compilation), then `--iterations` iterations of 2048 steps, each timed in CPU seconds of this process
(`time.process_time`): the rollout, the advantages, the method's update and its per-iteration metrics, as
`throughput_methods.py` times them (not the training loop's logging, policy snapshots and periodic evaluation). The
record names where npsco was imported from and the libraries' versions. A method avoids `--refs` policies of the paper
campaign (`benchmarks/results/paper/sweep/TASK/`): its 5 PPO references, then its chain's novel policies of the same
method in order (the 1x-threshold chain where there are several). PPO avoids none.

It uses only the API that npsco has had since the paper campaign (cfa4614: `preset`, `Trainer`, `make_method`,
`MethodConfig.of`, `MethodContext`, `ReferenceSet`, `load_policy`), so that it runs in an older checkout too: run it
with that checkout's Python, from that checkout's root.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `import npsco` does in the command, before numpy loads

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

SWEEP = Path("benchmarks/results/paper/sweep")
METHODS = ("ppo", "ipd", "wsr", "tnb", "ctnb", "cpo")
REFERENCES = 5
"""The paper campaign's PPO references per task."""
CHAIN = 5
"""Its novel policies per chain."""


def reference_paths(task: str, method: str, count: int) -> list[Path]:
    """The first `count` policies a novel policy of `method` on `task` avoids: the PPO references, then the chain's."""
    if not 0 <= count <= REFERENCES + CHAIN:
        raise ValueError(f"--refs must be 0 to {REFERENCES + CHAIN}, not {count}")
    paths = [SWEEP / task / "ppo/refs" / f"ref{i}" / "policy.safetensors" for i in range(REFERENCES)]
    novel = SWEEP / task / method / "novel"
    chain = novel / method if (novel / method).is_dir() else novel / f"{method}-r0x1"
    paths += [chain / f"k{k}" / "policy.safetensors" for k in range(CHAIN)]
    missing = [str(p) for p in paths[:count] if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"no policy at {', '.join(missing)} (run from a checkout's root)")
    return paths[:count]


def make_trainer(task: str, method: str, refs: int, r0: float, seed: int):  # noqa: ANN201  (an older checkout's type)
    """The trainer of `method` on `task`, avoiding `refs` policies at threshold `r0` (PPO: a plain trainer)."""
    from npsco.methods import make_method  # noqa: PLC0415  (after the BLAS setting)
    from npsco.methods.base import MethodContext  # noqa: PLC0415
    from npsco.methods.settings import MethodConfig  # noqa: PLC0415
    from npsco.novelty.references import ReferenceSet  # noqa: PLC0415
    from npsco.policy import load_policy  # noqa: PLC0415
    from npsco.ppo.config import preset  # noqa: PLC0415
    from npsco.ppo.trainer import Trainer  # noqa: PLC0415

    cfg = dataclasses.replace(preset(task), seed=seed, eval_every=0)
    if method == "ppo":
        return Trainer(cfg, tensorboard=False)
    paths = reference_paths(task, method, refs)
    references = ReferenceSet([load_policy(p) for p in paths], [p.parent.name for p in paths])
    hooks = make_method(MethodConfig.of(method), MethodContext(task, references, r0, states=None))
    return Trainer(cfg, hooks, tensorboard=False)


def iteration_seconds(trainer, iterations: int) -> list[float]:  # noqa: ANN001
    """CPU seconds of each of `iterations` training iterations, after one unmeasured: the rollout, the advantages, the
    method's update and its metrics (not the training loop's logging, snapshots and periodic evaluation)."""
    times = []
    for i in range(iterations + 1):
        start = time.process_time()
        trainer.iteration = i + 1  # as `Trainer.train` counts them, for a method that reads the iteration
        trainer.hooks.begin_iteration(i + 1)
        buf = trainer.collect_rollout()
        trainer.hooks.update(trainer.learner, trainer.compute_advantages(buf))
        trainer.hooks.iteration_metrics(buf.summary)
        if i:
            times.append(time.process_time() - start)
    return times


def software() -> dict[str, str]:
    """Where npsco was imported from and the versions of the libraries the step runs on: two checkouts compared
    should differ only in npsco."""
    from importlib.metadata import version  # noqa: PLC0415

    import npsco  # noqa: PLC0415

    libraries = {name: version(name) for name in ("gymnasium", "mujoco", "numpy", "torch", "numba")}
    return {"npsco": str(Path(npsco.__file__).resolve().parent), **libraries}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", required=True, help="the task, e.g. Walker2d-v5")
    ap.add_argument("--method", required=True, choices=METHODS)
    ap.add_argument("--refs", type=int, default=7, help="policies avoided (default 7: a chain's mean)")
    ap.add_argument("--r0", type=float, default=1.0, help="the method's threshold (default 1.0)")
    ap.add_argument("--iterations", type=int, default=10, help="measured iterations (default 10)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True, help="the JSON file written")
    args = ap.parse_args(argv)
    if args.iterations < 1:
        ap.error("--iterations must be >= 1")
    import torch  # noqa: PLC0415  (after the BLAS setting)

    torch.set_num_threads(1)
    trainer = make_trainer(args.env, args.method, args.refs, args.r0, args.seed)
    seconds = iteration_seconds(trainer, args.iterations)
    trainer.envs.close()
    record = {"env": args.env, "method": args.method, "refs": args.refs if args.method != "ppo" else 0}
    record |= {"r0": args.r0, "seed": args.seed, "steps_per_iteration": trainer.cfg.batch_size}
    record |= {"iteration_seconds": seconds, "median": statistics.median(seconds), "software": software()}
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
