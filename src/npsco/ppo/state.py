"""The resumable state of a training run, saved between two iterations: everything the next iteration depends on, so
that a run resumed from it continues as the uninterrupted run would.

One file, `RUN/checkpoints/state.safetensors`, written atomically: the tensors (the agent's parameters, Adam's
moments and step counts, the observation normaliser, the reward scaler's returns, the rollout's current observations
and episode counters, the method's arrays, the minibatch generator) and, in the safetensors header, one JSON object
with the rest (the step and iteration counters, the numpy generator, the environments' state, the evaluation curve,
how many rows of metrics.jsonl the state has seen, the method's numbers, and the configuration it belongs to). No
pickle: a state is read like a checkpoint.

Bitwise: a resumed run equals the uninterrupted one where the environments' state can be captured
(`npsco.envs.state`: the maze, MuJoCo tasks on the `sync` backend, `auto` included). Elsewhere the episodes in progress
at the save restart on resume, and the run continues from the same networks, optimiser and counters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from safetensors.numpy import load as load_safetensors
from safetensors.numpy import save as save_safetensors

from npsco.envs import state as env_state
from npsco.errors import NpscoError
from npsco.io import atomic_write_bytes, read_bytes
from npsco.layout import CHECKPOINTS_FOLDER, STATE_FILE
from npsco.limits import MAX_CHECKPOINT_BYTES

if TYPE_CHECKING:  # annotations only: the trainer imports this module
    from npsco.ppo.trainer import Trainer

FORMAT = "npsco-training-state"
VERSION = 1


def state_path(run_dir: str | Path) -> Path:
    """Where a run directory keeps its resumable state."""
    return Path(run_dir) / CHECKPOINTS_FOLDER / STATE_FILE


def save_state(trainer: Trainer, path: str | Path) -> None:
    """Write the trainer's state between two iterations to `path` (atomically)."""
    agent, learner = trainer.agent, trainer.learner
    tensors: dict[str, np.ndarray] = {f"agent.{k}": v.detach().numpy().copy() for k, v in agent.state_dict().items()}
    params = dict(agent.named_parameters())
    steps: dict[str, float] = {}
    for name, p in params.items():
        adam = learner.optimizer.state.get(p)
        if adam:
            tensors[f"adam.exp_avg.{name}"] = adam["exp_avg"].numpy().copy()
            tensors[f"adam.exp_avg_sq.{name}"] = adam["exp_avg_sq"].numpy().copy()
            steps[name] = float(adam["step"])
    tensors["obs_rms.mean"], tensors["obs_rms.var"] = agent.obs_rms.mean, agent.obs_rms.var
    tensors["reward_scaler.returns"] = trainer.reward_scaler.returns
    tensors["rollout.next_obs"] = trainer.next_obs
    tensors["rollout.episode_return"] = trainer.episode_return
    tensors["rollout.episode_step"] = trainer.episode_step
    tensors["learner.torch_rng"] = learner.torch_rng.get_state().numpy()
    hooks_numbers: dict[str, Any] = {}
    for key, value in trainer.hooks.state().items():
        if isinstance(value, np.ndarray):
            tensors[f"hooks.{key}"] = value
        else:
            hooks_numbers[key] = value
    scaler = trainer.reward_scaler
    meta = {
        "format": FORMAT,
        "format_version": VERSION,
        "config": trainer.cfg.to_dict(),
        "method": trainer.hooks.name,
        "global_step": trainer.global_step,
        "iteration": trainer.iteration,
        "rng": trainer.rng.bit_generator.state,
        "adam_steps": steps,
        "obs_rms_count": agent.obs_rms.count,
        "reward_scaler": [scaler.mean, scaler.var, scaler.count],
        "envs": env_state.capture(trainer.envs),
        "eval_curve": trainer.eval_curve,
        "metrics_rows": len(trainer.logger.rows),
        "hooks": hooks_numbers,
    }
    arrays = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    atomic_write_bytes(path, save_safetensors(arrays, metadata={"npsco": json.dumps(meta)}))


def read_state(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The JSON part and the tensors of a saved state; an NpscoError naming the file if it is not one."""
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
    return meta, tensors


def _same_run(config: dict[str, Any]) -> dict[str, Any]:
    """A configuration without the settings that do not change what is computed (how often the state is saved)."""
    return {k: v for k, v in config.items() if k != "state_every"}


def load_state(trainer: Trainer, path: str | Path) -> None:
    """Put a freshly built trainer (same configuration and method) in the state saved at `path`."""
    meta, tensors = read_state(path)
    if _same_run(meta["config"]) != _same_run(trainer.cfg.to_dict()) or meta["method"] != trainer.hooks.name:
        raise NpscoError(f"{path}: the saved state belongs to another configuration; delete it to start over")
    agent, learner = trainer.agent, trainer.learner
    with torch.no_grad():
        agent.load_state_dict(
            {k[len("agent.") :]: torch.from_numpy(v) for k, v in tensors.items() if k.startswith("agent.")}
        )
    for name, p in agent.named_parameters():
        if name in meta["adam_steps"]:
            learner.optimizer.state[p] = {
                "step": torch.tensor(meta["adam_steps"][name], dtype=torch.float32),
                "exp_avg": torch.from_numpy(tensors[f"adam.exp_avg.{name}"].copy()),
                "exp_avg_sq": torch.from_numpy(tensors[f"adam.exp_avg_sq.{name}"].copy()),
            }
    agent.obs_rms.mean, agent.obs_rms.var = tensors["obs_rms.mean"].copy(), tensors["obs_rms.var"].copy()
    agent.obs_rms.count = meta["obs_rms_count"]
    scaler = trainer.reward_scaler
    scaler.returns = tensors["reward_scaler.returns"].copy()
    scaler.mean, scaler.var, scaler.count = meta["reward_scaler"]
    learner.torch_rng.set_state(torch.from_numpy(tensors["learner.torch_rng"].copy()))
    trainer.rng.bit_generator.state = meta["rng"]
    trainer.global_step, trainer.iteration = meta["global_step"], meta["iteration"]
    trainer.eval_curve = list(meta["eval_curve"])
    hooks = {k[len("hooks.") :]: v.copy() for k, v in tensors.items() if k.startswith("hooks.")}
    trainer.hooks.load_state({**meta["hooks"], **hooks})
    if meta["envs"] is not None:
        env_state.restore(trainer.envs, meta["envs"])
        trainer.next_obs = tensors["rollout.next_obs"].copy()
        trainer.episode_return = tensors["rollout.episode_return"].copy()
        trainer.episode_step = tensors["rollout.episode_step"].copy()
    else:  # the freshly reset envs' episodes start (not bitwise: see the module docstring)
        trainer.hooks.end_episodes(np.ones(trainer.cfg.num_envs, bool))
    trainer.resumed_rows = meta["metrics_rows"]
