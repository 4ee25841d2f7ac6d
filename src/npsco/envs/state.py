"""The state of a vector environment in the middle of its episodes, captured and restored, so that a training run
resumed from a saved state steps exactly as an uninterrupted one would.

What can be captured: the maze's numpy twin (positions, step counters, each maze's random generator), and a
`SyncVectorEnv` (or npsco's `LeanSyncVectorEnv`) of MuJoCo tasks (each sub-env's full integration state,
`mujoco.mj_getState` with `mjSTATE_INTEGRATION`, its random generator, and its time limit's step counter). Anything
else (the async and envpool backends, other tasks) returns None from `capture`: a resumed run then restarts its
episodes, which is documented as not bitwise equal to an uninterrupted run.

States are plain JSON (lists of floats, which Python's float repr round-trips exactly, and the generators' states).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from npsco.envs.maze import FourRewardMazeVec

FORMAT = 1


def _mujoco_env(env: gym.Env) -> Any | None:
    """The MuJoCo env under `env`'s wrappers (one with `model` and `data`), or None."""
    inner = env.unwrapped
    return inner if hasattr(inner, "model") and hasattr(inner, "data") else None


def _time_limit(env: gym.Env) -> gym.wrappers.TimeLimit | None:
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            return env
        env = env.env
    return None


def capture(envs: gym.vector.VectorEnv) -> dict[str, Any] | None:
    """The state of `envs` as a JSON-ready dict, or None when this kind of vector env cannot be captured."""
    if isinstance(envs, FourRewardMazeVec):
        return {
            "format": FORMAT,
            "kind": "maze",
            "positions": envs._positions.tolist(),
            "steps": envs._steps.tolist(),
            "was_reset": envs._was_reset.tolist(),
            "rngs": [None if r is None else r.bit_generator.state for r in envs._rngs],
        }
    if not isinstance(envs, gym.vector.SyncVectorEnv):  # Gymnasium's, or npsco's LeanSyncVectorEnv (a subclass)
        return None
    import mujoco  # lazy: only MuJoCo tasks get here

    subs = []
    for env in envs.envs:
        inner, limit = _mujoco_env(env), _time_limit(env)
        if inner is None:
            return None
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        state = np.empty(mujoco.mj_stateSize(inner.model, spec), np.float64)
        mujoco.mj_getState(inner.model, inner.data, state, spec)
        subs.append(
            {
                "physics": state.tolist(),
                "rng": inner.np_random.bit_generator.state,
                "elapsed_steps": None if limit is None else limit._elapsed_steps,
            }
        )
    return {"format": FORMAT, "kind": "mujoco", "envs": subs, "autoreset": np.asarray(envs._autoreset_envs).tolist()}


def restore(envs: gym.vector.VectorEnv, state: dict[str, Any]) -> None:
    """Put `envs` (made like the captured ones, and reset once) back in the captured `state`."""
    if state.get("format") != FORMAT:
        raise ValueError(f"unknown environment state format {state.get('format')!r}")
    if state["kind"] == "maze":
        assert isinstance(envs, FourRewardMazeVec)
        envs._positions = np.asarray(state["positions"], np.float32).reshape(envs.num_envs, 2)
        envs._steps = np.asarray(state["steps"], np.int64)
        envs._was_reset = np.asarray(state["was_reset"], bool)
        for i, rng_state in enumerate(state["rngs"]):
            if rng_state is not None:
                rng = np.random.default_rng()
                rng.bit_generator.state = rng_state
                envs._rngs[i] = rng
        return
    import mujoco  # lazy: only MuJoCo tasks get here

    assert isinstance(envs, gym.vector.SyncVectorEnv) and len(envs.envs) == len(state["envs"])
    for env, sub in zip(envs.envs, state["envs"], strict=True):
        inner, limit = _mujoco_env(env), _time_limit(env)
        assert inner is not None
        mujoco.mj_setState(
            inner.model, inner.data, np.asarray(sub["physics"], np.float64), mujoco.mjtState.mjSTATE_INTEGRATION
        )
        mujoco.mj_forward(inner.model, inner.data)
        inner.np_random.bit_generator.state = sub["rng"]
        if limit is not None:
            limit._elapsed_steps = sub["elapsed_steps"]
    envs._autoreset_envs = np.asarray(state["autoreset"], bool)
