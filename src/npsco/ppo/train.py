"""PPO for continuous actions, the algorithm every method builds on: `train` one policy, by PPO or PPO plus the
hooks of a method (`npsco.methods`).

Where each part of `npsco.ppo` lives, in the order of the data flow:

    config.py        `PPOConfig` (a docstring per setting) and the presets per task
    agent.py         `ActorCritic`, the torch network, and its observation normaliser
    trainer.py       `Trainer`: rollout -> advantages -> update, iteration after iteration; logs, evaluates, saves
    rollout.py       the rollout's typed buffer, the flattened `Batch`, the reward scaler
    maths.py         GAE and explained variance (pure functions)
    learner.py       `Learner`: the agent, its optimiser and PPO's minibatch epochs (the update rules' one loop)
    fast_update.py   the learner's epochs in numpy, `NumpyLearner` (the one update; torch autograd: tests/oracles/)
    numpy_nets.py    the networks' passes and PPO's losses with their gradients, in numpy (for fast_update.py)
    hooks.py         what a method sees and answers (`Hooks`, `StepInfo`, `StepOutcome`, `RolloutShaping`)
    state.py         the resumable training state, `checkpoints/state.safetensors`
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from npsco.logger import Tracking
from npsco.ppo.config import PPOConfig
from npsco.ppo.hooks import Hooks
from npsco.ppo.trainer import Trainer, TrainResult


def train(
    cfg: PPOConfig,
    hooks: Hooks | None = None,
    run_dir: str | Path | None = None,
    progress: bool = True,
    tensorboard: bool = True,
    metadata: dict[str, Any] | None = None,
    resume: bool = False,
    tracking: Tracking | None = None,
) -> TrainResult:
    """Train one policy (PPO, or PPO + a method's `hooks`) and return its `TrainResult`; with `run_dir`, the run's
    metrics, TensorBoard events and checkpoints are written there (`policy.safetensors` at the end); with `resume`,
    training continues from the state saved there, if any (`npsco.ppo.state`); with `tracking`, the metrics also go
    to Weights & Biases."""
    return Trainer(cfg, hooks, run_dir, tensorboard, metadata, resume, tracking).train(progress=progress)
