"""The optional `envpool` backend: envpool's C++ MuJoCo tasks behind npsco's vector-env protocol.

`EnvPoolVectorEnv` wraps `envpool.make(task, env_type="gymnasium")` for Hopper, Walker2d and HalfCheetah (-v4/-v5) and
gives exactly the protocol of the other backends (`npsco.envs.make`):

- **same-step autoreset**: envpool resets a finished sub-env on the *next* step call (ignoring that call's action);
  here the finished sub-envs are reset at once with `reset(env_ids)`, so the returned observation is already the next
  start and the last observation of the finished episode is in `infos["final_obs"]`, masked by `infos["_final_obs"]`;
- **time limit done here**: envpool runs with `max_episode_steps + 1`, so it never truncates itself, and this class
  truncates at `max_episode_steps` (1000 by default). envpool reports a step that is both unhealthy and at the limit
  as truncated only; here it is terminated *and* truncated, as Gymnasium's `TimeLimit` reports it;
- **seeding**: envpool fixes its seeds when the pool is created, so `reset(seed=s)` builds a new pool whose sub-env i
  is seeded s + i (envpool's own generator: the initial states differ from Gymnasium's for the same seed);
- **`reset(options={"reset_mask": m})`** resets only the masked sub-envs;
- spaces are the Gymnasium env's (`Box` float64 observations, `Box` float32 actions); observations are float64 and
  rewards float64 (envpool computes them in double precision and returns float32).

The task options (reward weights, healthy ranges, reset noise, frame skip, model file) are read from the Gymnasium env
of the same id and passed to envpool, so both run the same task: from the same state and actions Hopper and Walker2d
follow Gymnasium's trajectory up to rounding (~1e-15 per step, which a contact can amplify to ~1e-8 for a few steps),
with the same episode ends (tests/integration/test_envpool_backend.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from npsco.envs.protocol import checked_reset_mask, per_env_seeds
from npsco.errors import NpscoError
from npsco.tasks import MUJOCO_TASKS

ENVPOOL_TASKS = tuple(f"{task}-{v}" for task in MUJOCO_TASKS for v in ("v4", "v5"))
ENVPOOL_VERSION = "1.2.5"  # the version pinned by the `envpool` extra of pyproject.toml
INSTALL_HINT = f'pip install "npsco[envpool]" (or pip install envpool=={ENVPOOL_VERSION})'
_MAX_SEED = 2**31 - 1  # envpool seeds are int32


def check_envpool_task(env_id: str) -> None:
    """Refuse an environment the envpool backend does not run, naming the backends that do."""
    if env_id not in ENVPOOL_TASKS:
        raise NpscoError(
            f"env_backend envpool runs only {', '.join(ENVPOOL_TASKS)}; "
            f"for {env_id} use env_backend auto, sync or async"
        )


def import_envpool() -> Any:
    """The envpool module, or an NpscoError that says how to install it."""
    try:
        import envpool  # an optional dependency (npsco[envpool]), imported when the backend is used
    except ImportError as exc:
        raise NpscoError(
            f"env_backend envpool needs the envpool package, which is not installed: {INSTALL_HINT}"
        ) from exc
    return envpool


def _task_options(task: str, env: gym.Env, spec_config: dict[str, Any]) -> dict[str, Any]:
    """envpool options equal to the settings of the Gymnasium env `env` of `task` (refused where envpool cannot
    express them)."""
    u: Any = env.unwrapped  # a MuJoCo env: its settings are attributes that Gymnasium's types do not name
    xml = os.path.basename(u.fullpath)
    if spec_config.get("xml_file") != xml:
        raise NpscoError(f"envpool's {spec_config.get('xml_file')} is not Gymnasium's model file {xml}")
    options: dict[str, Any] = {
        "frame_skip": int(u.frame_skip),
        "forward_reward_weight": float(u._forward_reward_weight),
        "ctrl_cost_weight": float(u._ctrl_cost_weight),
        "reset_noise_scale": float(u._reset_noise_scale),
        "exclude_current_positions_from_observation": bool(u._exclude_current_positions_from_observation),
    }
    if hasattr(u, "_healthy_reward"):  # Hopper, Walker2d
        options["healthy_reward"] = float(u._healthy_reward)
        options["terminate_when_unhealthy"] = bool(u._terminate_when_unhealthy)
        options["healthy_angle_min"], options["healthy_angle_max"] = map(float, u._healthy_angle_range)
        z_min, z_max = map(float, u._healthy_z_range)
        options["healthy_z_min"] = z_min
        if "healthy_z_max" in spec_config:
            options["healthy_z_max"] = z_max
        elif z_max != np.inf:
            raise NpscoError(f"envpool has no healthy_z_max for {task}; Gymnasium's is {z_max}")
        if hasattr(u, "_healthy_state_range"):  # Hopper
            options["healthy_state_min"], options["healthy_state_max"] = map(float, u._healthy_state_range)
    unknown = sorted(set(options) - set(spec_config))
    if unknown:
        raise NpscoError(f"envpool's {task} has no option(s) {', '.join(unknown)}")
    return options


class EnvPoolVectorEnv(VectorEnv):
    """`num_envs` copies of a MuJoCo task stepped by envpool, with npsco's vector-env protocol (module docstring)."""

    def __init__(self, env_id: str, num_envs: int, max_episode_steps: int | None = None, num_threads: int = 1) -> None:
        """Args: env_id: one of ENVPOOL_TASKS; num_envs: sub-envs; max_episode_steps: time limit (None: the task's
        own, 1000); num_threads: envpool's worker threads (1 by default: docs/environments.md)."""
        check_envpool_task(env_id)
        self._envpool = import_envpool()
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        gym_env = gym.make(env_id)
        try:
            self.max_episode_steps = int(max_episode_steps or getattr(gym_env.spec, "max_episode_steps", None) or 0)
            if self.max_episode_steps < 1:
                raise ValueError(f"max_episode_steps must be >= 1, got {self.max_episode_steps}")
            spec_config = dict(self._envpool.make_spec(env_id).config._asdict())
            self._make_kwargs = {
                "env_type": "gymnasium",
                "num_envs": num_envs,
                "batch_size": num_envs,
                "num_threads": num_threads,
                "max_episode_steps": self.max_episode_steps + 1,  # the time limit is this class's (docstring)
                **_task_options(env_id, gym_env, spec_config),
            }
            if not isinstance(gym_env.observation_space, Box) or not isinstance(gym_env.action_space, Box):
                raise NpscoError(f"{env_id}: envpool's tasks have Box spaces, Gymnasium's here do not")
            self.single_observation_space: Box = gym_env.observation_space
            self.single_action_space: Box = gym_env.action_space
        finally:
            gym_env.close()
        self.env_id = env_id
        self.num_envs = num_envs
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.SAME_STEP}
        self.render_mode = None
        self._pool: Any = None
        self._ids = np.arange(num_envs, dtype=np.int32)
        self._obs = np.zeros((num_envs, *self.single_observation_space.shape), np.float64)
        self._elapsed = np.zeros(num_envs, np.int64)

    # ------------------------------------------------------------------------------------------------------- reset
    def reset(
        self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset all sub-envs, or those of `options["reset_mask"]`; `seed` (int s: sub-env i gets s + i, or one seed
        per sub-env) re-creates the pool, so it resets all sub-envs and cannot go with a partial mask."""
        options = dict(options or {})
        mask = self._checked_reset_mask(options.pop("reset_mask", None))
        if options:
            raise ValueError(f"unsupported reset options {sorted(options)}; only reset_mask")
        if seed is not None:
            if not mask.all():
                raise ValueError("envpool seeds the sub-envs when the pool is created: reset(seed=...) resets them all")
            self._new_pool(self._per_env_seeds(seed))
        elif self._pool is None:
            self._new_pool(self._per_env_seeds(int(np.random.SeedSequence().generate_state(1)[0]) % (_MAX_SEED // 2)))
        self._reset_ids(np.flatnonzero(mask).astype(np.int32))
        return self._obs.copy(), {}

    def _new_pool(self, seeds: list[int]) -> None:
        if self._pool is not None:
            self._pool.close()
        self._pool = self._envpool.make(self.env_id, env_seed=seeds, **self._make_kwargs)

    def _reset_ids(self, ids: np.ndarray) -> None:
        obs, info = self._pool.reset(ids)
        self._obs[np.asarray(info["env_id"])] = obs
        self._elapsed[ids] = 0

    def _per_env_seeds(self, seed: int | Sequence[int]) -> list[int]:
        given = per_env_seeds(seed, self.num_envs)
        seeds = [s for s in given if s is not None]
        if len(seeds) != len(given):
            raise ValueError("envpool needs a seed for every sub-env, not None")
        if min(seeds) < 0 or max(seeds) > _MAX_SEED:
            raise ValueError(f"envpool seeds must lie in [0, {_MAX_SEED}] (int32); got {min(seeds)}..{max(seeds)}")
        return seeds

    def _checked_reset_mask(self, reset_mask: Any) -> np.ndarray:
        mask = checked_reset_mask(reset_mask, self.num_envs)
        if reset_mask is not None and self._pool is None:
            raise RuntimeError("call reset() without reset_mask first: the environments were never reset")
        return mask

    # -------------------------------------------------------------------------------------------------------- step
    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-env; finished episodes restart at once (module docstring)."""
        if self._pool is None:
            raise RuntimeError("call reset() before step()")
        actions = np.asarray(actions, dtype=np.float64)
        if actions.shape != self.action_space.shape:
            raise ValueError(f"actions must have shape {self.action_space.shape}, got {actions.shape}")
        obs, reward, terminated, truncated, info = self._pool.step(actions, self._ids)
        order = np.asarray(info["env_id"])
        self._obs[order] = obs
        rewards = np.zeros(self.num_envs, np.float64)
        rewards[order] = reward
        terminations = np.zeros(self.num_envs, bool)
        terminations[order] = terminated
        self._elapsed += 1
        truncations = self._elapsed >= self.max_episode_steps
        truncations[order] |= np.asarray(truncated, bool)  # never set: envpool's own limit is one step further
        dones = terminations | truncations
        final_obs = self._obs.copy()
        if dones.any():
            self._reset_ids(np.flatnonzero(dones).astype(np.int32))
        infos = {"final_obs": final_obs, "_final_obs": dones}
        return self._obs.copy(), rewards, terminations, truncations, infos

    def close_extras(self, **kwargs: Any) -> None:
        """Release the pool (its worker threads)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
