"""`LeanSyncVectorEnv`: Gymnasium's `SyncVectorEnv` with same-step autoreset, stepped by a shorter loop.

Gymnasium's step merges every sub-env's `info` dict into the vector's infos (and deep-copies the observations) on
every step: about 20 us per step of one MuJoCo env, a fifth of the env's own cost. npsco reads only the last
observation of each finished episode (`infos["final_obs"]`, masked by `infos["_final_obs"]`), so this step builds only
that. Transitions, seeds and resets are Gymnasium's: the same sub-envs, stepped and reset by the same calls, so a run
trains bit for bit as on `SyncVectorEnv` (tests/unit/test_lean_vector_env.py). Reset, state capture and everything
else are inherited, except a masked reset without seeds, which writes the reset observations in place. `step_some`
steps only some sub-envs: an evaluation stops stepping the episodes that are over.
Hopper-v5, Walker2d-v5 and HalfCheetah-v5 step by `direct_step` (same bits, less Python per step). It writes
`SyncVectorEnv`'s private fields, so `make_vector_env` uses it only on the Gymnasium releases of `TESTED_GYMNASIUM`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from npsco.envs.direct_step import Step, direct_step, gymnasium_step


class LeanSyncVectorEnv(gym.vector.SyncVectorEnv):
    """`SyncVectorEnv(env_fns, autoreset_mode=SAME_STEP)` whose `step` returns only `final_obs` in its infos."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]):
        super().__init__(env_fns, autoreset_mode=AutoresetMode.SAME_STEP)
        # observations that are not one flat array (Dict, Tuple spaces) take Gymnasium's own step
        self._flat = isinstance(self.single_observation_space, gym.spaces.Box)
        self._obs_shape = self.single_observation_space.shape
        self._steps: list[Step] = [direct_step(env) or gymnasium_step(env) for env in self.envs]

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        return self.step_some(actions, None)

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """`SyncVectorEnv.reset`. A masked reset without seeds (IPD ending episodes mid-rollout) resets the masked
        sub-envs by the same calls and writes their observations in place, where Gymnasium re-stacks and deep-copies
        every sub-env's; any other reset, or a mask Gymnasium would refuse, is
        Gymnasium's own."""
        mask = None if options is None else options.get("reset_mask")
        if not (
            self._flat
            and seed is None
            and isinstance(mask, np.ndarray)
            and mask.shape == (self.num_envs,)
            and mask.dtype == np.bool_
            and mask.any()
            and all(obs is not None for obs in self._env_obs)  # (before a first reset, Gymnasium's error)
        ):
            return super().reset(seed=seed, options=options)
        assert options is not None
        del options["reset_mask"]  # as Gymnasium: the sub-envs get the options without it
        self._terminations[mask] = False
        self._truncations[mask] = False
        self._autoreset_envs[mask] = False
        infos: dict[str, Any] = {}
        for i in np.flatnonzero(mask).tolist():
            obs, info = self.envs[i].reset(seed=None, options=options)
            self._store_observation(i, obs)
            infos = self._add_info(infos, info, i)
        return self._observations.copy(), infos

    def _store_observation(self, i: int, obs: Any) -> None:
        """Sub-env i's latest observation, where Gymnasium's masked reset re-stacks it from and in the batch; one of
        another shape is refused, as Gymnasium's stacking refuses it (no silent broadcast)."""
        if np.shape(obs) != self._obs_shape:
            raise ValueError(f"sub-env {i} returned an observation of shape {np.shape(obs)}, not {self._obs_shape}")
        self._env_obs[i] = obs
        self._observations[i] = obs

    def step_some(
        self, actions: Any, active: np.ndarray | None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """`step`, for the sub-envs where `active` (N,) only (None: all): the others are not stepped (their
        observation stays, with reward 0 and no end). Observations that are not one flat array step every sub-env."""
        if not self._flat:
            return super().step(actions)
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            if active is not None and not active[i]:
                self._rewards[i], self._terminations[i], self._truncations[i] = 0.0, False, False
                continue
            obs, self._rewards[i], self._terminations[i], self._truncations[i] = self._steps[i](actions[i])
            if self._terminations[i] or self._truncations[i]:
                if not infos:
                    infos = {
                        "final_obs": np.full(self.num_envs, None, dtype=object),
                        "_final_obs": np.zeros(self.num_envs, dtype=np.bool_),
                    }
                infos["final_obs"][i], infos["_final_obs"][i] = obs, True
                obs, _ = env.reset()
            self._store_observation(i, obs)
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        return (
            self._observations.copy(),
            self._rewards.copy(),
            self._terminations.copy(),
            self._truncations.copy(),
            infos,
        )
