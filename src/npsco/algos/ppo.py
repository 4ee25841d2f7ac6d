"""PPO for continuous actions, the algorithm every method builds on: `train` one policy, by PPO or PPO plus a novelty
method (IPD, WSR, TNB, CTNB, CPO).

Where each part lives, in the order of the data flow:

    trainer.py       `Trainer`: rollout -> advantages -> update, iteration after iteration; logs, evaluates, saves
    rollout.py       the rollout's typed buffer, the flattened `Batch`, the reward scaler
    maths.py         GAE, the clipped surrogate and value losses, advantage normalisation (pure functions)
    numpy_update.py  the update in numpy (`update_backend = "numpy"`, the default)
    hooks.py         what a method sees and answers (`Method`, `StepInfo`, `StepOutcome`)
    novelty_method.py, ipd.py, wsr.py, tnb.py, cpo.py: the novelty methods; registry.py: their names
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from npsco.algos.hooks import Method
from npsco.algos.trainer import Trainer, TrainResult
from npsco.config import PPOConfig


def train(
    cfg: PPOConfig,
    method: Method | None = None,
    run_dir: str | Path | None = None,
    progress: bool = True,
    tensorboard: bool = True,
    metadata: dict[str, Any] | None = None,
) -> TrainResult:
    """Train one policy (PPO, or PPO + a novelty method) and return its `TrainResult`; with `run_dir`, the run's
    metrics, TensorBoard events and checkpoints are written there (`policy.safetensors` at the end)."""
    return Trainer(cfg, method, run_dir, tensorboard, metadata).train(progress=progress)
