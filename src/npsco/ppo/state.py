"""The resumable state of a training run on disk: `TrainingState` (what `Trainer.state_dict()` returns and
`Trainer.load_state_dict()` takes) written to and read from one file. This module reads and writes files; what goes in
a state, and back into a trainer, is the trainer's (`npsco.ppo.trainer`).

One file, `RUN/checkpoints/state.safetensors`, written atomically: the arrays (the agent's parameters, Adam's
moments, the observation normaliser, the reward scaler's returns, the rollout's current observations and episode
counters, the method's arrays, the minibatch generator) as tensors, and, in the safetensors header, one JSON object
with the rest (the step and iteration counters, the numpy generator, Adam's step counts, the environments' state, the
evaluation curve, how many rows of metrics.jsonl the state has seen, the method's numbers, and the configuration it
belongs to). No pickle: a state is read like a checkpoint.

Bitwise: a resumed run equals the uninterrupted one where the environments' state can be captured
(`npsco.envs.state`: the maze, MuJoCo tasks on the `sync` backend, `auto` included). Elsewhere the episodes in progress
at the save restart on resume, and the run continues from the same networks, optimiser and counters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load as load_safetensors
from safetensors.numpy import save as save_safetensors

from npsco.errors import NpscoError
from npsco.io import atomic_write_bytes, read_bytes
from npsco.layout import CHECKPOINTS_FOLDER, STATE_FILE
from npsco.limits import MAX_CHECKPOINT_BYTES

FORMAT = "npsco-training-state"
VERSION = 1


@dataclass
class AdamMoments:
    """Adam's state for one parameter."""

    step: float
    """The steps Adam has taken on it."""
    exp_avg: np.ndarray
    """The running mean of its gradients."""
    exp_avg_sq: np.ndarray
    """The running mean of its squared gradients."""


@dataclass
class TrainingState:
    """Everything the next iteration of a trainer depends on, saved between two iterations."""

    config: dict[str, Any]
    """The trainer's `PPOConfig.to_dict()`: a state resumes only a trainer of the same configuration."""
    method: str
    """The name of the trainer's hooks (its method)."""
    global_step: int
    """Environment steps trained so far."""
    iteration: int
    """Iterations done so far."""
    rng: dict[str, Any]
    """The state of the numpy generator of the rollout's action noise (`bit_generator.state`)."""
    agent: dict[str, np.ndarray]
    """The agent's parameters and buffers (its `state_dict()`), by name."""
    adam: dict[str, AdamMoments]
    """Adam's state per parameter name, for the parameters it has stepped."""
    torch_rng: np.ndarray
    """The state of the learner's torch generator (the minibatch permutations)."""
    obs_rms_mean: np.ndarray
    """The observation normaliser's running mean."""
    obs_rms_var: np.ndarray
    """The observation normaliser's running variance."""
    obs_rms_count: float
    """The observation normaliser's count."""
    reward_returns: np.ndarray
    """The reward scaler's discounted return per env."""
    reward_stats: list[float]
    """The reward scaler's running mean, variance and count of those returns."""
    next_obs: np.ndarray
    """The observation each env is at (the next step acts on it)."""
    episode_return: np.ndarray
    """The return so far of each env's episode in progress."""
    episode_step: np.ndarray
    """The steps so far of each env's episode in progress."""
    envs: dict[str, Any] | None
    """The environments' state (`npsco.envs.state.capture`); None where it cannot be captured."""
    eval_curve: list[dict[str, float]]
    """The periodic evaluations so far."""
    metrics_rows: int
    """How many rows of metrics.jsonl the state has seen."""
    hooks: dict[str, Any]
    """What the hooks carry from one iteration to the next (`Hooks.state()`: numpy arrays and JSON numbers)."""


def state_path(run_dir: str | Path) -> Path:
    """Where a run directory keeps its resumable state."""
    return Path(run_dir) / CHECKPOINTS_FOLDER / STATE_FILE


def write_state(state: TrainingState, path: str | Path) -> None:
    """Write `state` to `path` (atomically)."""
    tensors: dict[str, np.ndarray] = {f"agent.{k}": v for k, v in state.agent.items()}
    for name, moments in state.adam.items():
        tensors[f"adam.exp_avg.{name}"] = moments.exp_avg
        tensors[f"adam.exp_avg_sq.{name}"] = moments.exp_avg_sq
    tensors["obs_rms.mean"], tensors["obs_rms.var"] = state.obs_rms_mean, state.obs_rms_var
    tensors["reward_scaler.returns"] = state.reward_returns
    tensors["rollout.next_obs"] = state.next_obs
    tensors["rollout.episode_return"] = state.episode_return
    tensors["rollout.episode_step"] = state.episode_step
    tensors["learner.torch_rng"] = state.torch_rng
    hooks_numbers: dict[str, Any] = {}
    for key, value in state.hooks.items():
        if isinstance(value, np.ndarray):
            tensors[f"hooks.{key}"] = value
        else:
            hooks_numbers[key] = value
    meta = {
        "format": FORMAT,
        "format_version": VERSION,
        "config": state.config,
        "method": state.method,
        "global_step": state.global_step,
        "iteration": state.iteration,
        "rng": state.rng,
        "adam_steps": {name: moments.step for name, moments in state.adam.items()},
        "obs_rms_count": state.obs_rms_count,
        "reward_scaler": state.reward_stats,
        "envs": state.envs,
        "eval_curve": state.eval_curve,
        "metrics_rows": state.metrics_rows,
        "hooks": hooks_numbers,
    }
    arrays = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    atomic_write_bytes(path, save_safetensors(arrays, metadata={"npsco": json.dumps(meta)}))


def read_state(path: str | Path) -> TrainingState:
    """The state saved at `path`; an NpscoError naming the file if it is not one."""
    path = Path(path)
    try:
        raw = read_bytes(path, MAX_CHECKPOINT_BYTES)
        tensors = load_safetensors(raw)
        header_len = int.from_bytes(raw[:8], "little")
        meta = json.loads(json.loads(raw[8 : 8 + header_len])["__metadata__"]["npsco"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NpscoError(f"{path}: not a readable npsco training state ({type(e).__name__})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("format_version") != VERSION:
        raise NpscoError(f"{path}: not an npsco training state of format version {VERSION}")
    try:
        return TrainingState(
            config=meta["config"],
            method=meta["method"],
            global_step=meta["global_step"],
            iteration=meta["iteration"],
            rng=meta["rng"],
            agent=_prefixed(tensors, "agent."),
            adam={
                name: AdamMoments(step, tensors[f"adam.exp_avg.{name}"], tensors[f"adam.exp_avg_sq.{name}"])
                for name, step in meta["adam_steps"].items()
            },
            torch_rng=tensors["learner.torch_rng"],
            obs_rms_mean=tensors["obs_rms.mean"],
            obs_rms_var=tensors["obs_rms.var"],
            obs_rms_count=meta["obs_rms_count"],
            reward_returns=tensors["reward_scaler.returns"],
            reward_stats=list(meta["reward_scaler"]),
            next_obs=tensors["rollout.next_obs"],
            episode_return=tensors["rollout.episode_return"],
            episode_step=tensors["rollout.episode_step"],
            envs=meta["envs"],
            eval_curve=list(meta["eval_curve"]),
            metrics_rows=meta["metrics_rows"],
            hooks={**meta["hooks"], **_prefixed(tensors, "hooks.")},
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise NpscoError(f"{path}: an incomplete npsco training state ({type(e).__name__}: {e})") from None


def _prefixed(tensors: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The tensors whose name starts with `prefix`, by the rest of their name."""
    return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
