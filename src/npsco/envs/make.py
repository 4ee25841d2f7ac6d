"""Vector environments for training and evaluation, with same-step autoreset everywhere.

Every backend returns a Gymnasium `VectorEnv` whose `step` already resets finished sub-envs (the last observation of the
finished episode is in `infos["final_obs"]`, masked by `infos["_final_obs"]`) and whose
`reset(options={"reset_mask": m})` resets only the masked sub-envs (IPD uses it to end an episode early). The optional
`envpool` backend (`npsco.envs.envpool_backend`, `pip install "npsco[envpool]"`) gives the same protocol for the MuJoCo
tasks.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from npsco.envs import mujoco_warnings
from npsco.envs.direct_step import TESTED_GYMNASIUM, gymnasium_release
from npsco.envs.envpool_backend import EnvPoolVectorEnv, check_envpool_task, import_envpool
from npsco.envs.lean import LeanSyncVectorEnv
from npsco.envs.maze import FourRewardMazeVec
from npsco.errors import NpscoError
from npsco.task_ids import may_import, names_module
from npsco.tasks import ENV_BACKENDS, MAZE_ID

DEFAULT_EPISODE_STEPS = 1000
"""Time limit of a `module:Class` task (as MuJoCo's); `--set max_episode_steps=N` changes it."""


def with_package(env_id: str, package: str | None) -> str:
    """`--env-package PKG --env ID` as the one id `PKG:ID`, which Gymnasium's `make` reads as "import PKG, then make
    ID": every process (workers, evaluation, rendering) that makes the task imports PKG itself."""
    if not package:
        return env_id
    if ":" in env_id:
        raise NpscoError(f"--env {env_id} already names a module; drop --env-package {package}")
    return f"{package}:{env_id}"


def _import_module(module: str, env_id: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise NpscoError(
            f"{env_id}: cannot import module {module!r} ({e}); is it installed or on PYTHONPATH?"
        ) from None


def env_spec(env_id: str) -> str | gym.envs.registration.EnvSpec:
    """What `gym.make` needs for an npsco env id: a registered id as it is; `module:ID` (Gymnasium's own form: the
    module registers ID when imported) as it is, after checking that it does; `module:Class` (an environment class,
    or a function returning an env) as a spec registered under that id, whose entry point is the class. An id read
    from a checkpoint that names a module is refused unless the user named it too (`npsco.task_ids`)."""
    if not names_module(env_id):
        return env_id
    if not may_import(env_id):
        raise NpscoError(
            f"{env_id}: this task id comes from a checkpoint and names a Python module to import; a checkpoint never "
            f"chooses code to run: name the task yourself (--env {env_id}), or use the run directory whose config.json "
            "names it"
        )
    module, _, name = env_id.partition(":")
    loaded = _import_module(module, env_id)
    if name in gym.registry:
        return env_id
    if env_id not in gym.registry:
        target = getattr(loaded, name, None)
        if not callable(target):
            raise NpscoError(
                f"{env_id}: module {module!r} registers no environment {name!r} and has no environment "
                f"class of that name"
            )
        gym.register(id=env_id, entry_point=env_id, max_episode_steps=DEFAULT_EPISODE_STEPS)
    return gym.registry[env_id]


def check_env_id(env_id: str) -> None:
    """Refuse an unknown or unsupported environment id with a message that says what to use instead."""
    if ":" in env_id:
        env_spec(env_id)
        return
    if env_id.endswith("-v3") or env_id.endswith("-v2"):
        raise NpscoError(
            f"{env_id}: MuJoCo -v2/-v3 environments need mujoco-py, which Gymnasium 1.x no longer supports; "
            f"use {env_id[:-3]}-v5 (default) or {env_id[:-3]}-v4 (see docs/environments.md)"
        )
    if env_id not in gym.registry:
        close = [k for k in gym.registry if k.split("/")[-1].split("-")[0].lower() in env_id.lower()]
        hint = f"; did you mean {', '.join(sorted(close)[-3:])}?" if close else ""
        raise NpscoError(f"unknown environment id {env_id!r}{hint}")


def check_task_spaces(
    env_id: str, observation_space: gym.Space, action_space: gym.Space
) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """Refuse a task npsco policies cannot act in: they take one flat Box observation and output a flat Box action
    with finite bounds. Returns the two spaces (as the Boxes they are)."""
    if not isinstance(action_space, gym.spaces.Box):
        raise NpscoError(
            f"{env_id}: {type(action_space).__name__} actions are not supported (npsco's policies act in "
            f"continuous Box spaces)"
        )
    if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
        what = (
            f"{type(observation_space).__name__} observations"
            if not isinstance(observation_space, gym.spaces.Box)
            else f"observations of shape {observation_space.shape}"
        )
        raise NpscoError(f"{env_id}: {what} are not supported (npsco's policies take one flat observation vector)")
    if len(action_space.shape) != 1 or not (
        np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))
    ):
        raise NpscoError(f"{env_id}: npsco's policies need a flat action vector with finite bounds")
    return observation_space, action_space


def check_task(env_id: str) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """`check_env_id`, then the task's spaces (one environment is made): before a run starts. Returns the observation
    and action spaces."""
    check_env_id(env_id)
    env = make_env(env_id)
    try:
        return check_task_spaces(env_id, env.observation_space, env.action_space)
    finally:
        env.close()


def check_env_backend(env_id: str, backend: str) -> None:
    """Refuse the envpool backend for a task it cannot run, or when envpool is not installed, before a run starts."""
    if backend == "envpool":
        check_envpool_task(env_id)
        import_envpool()


def make_env(
    env_id: str, max_episode_steps: int | None = None, render_mode: str | None = None, render_size: int | None = None
) -> gym.Env:
    """One (non-vector) environment, for rendering and single-episode use. `render_size`: frames of that many pixels
    a side (the maze's `render_size`, MuJoCo's `width` and `height`); a task that takes neither renders at its own
    size."""
    check_env_id(env_id)
    mujoco_warnings.install()
    kwargs: dict[str, Any] = {"render_mode": render_mode}
    if env_id == MAZE_ID:
        if max_episode_steps is not None:
            kwargs["max_steps"] = max_episode_steps
        if render_size is not None:
            kwargs["render_size"] = render_size
        return gym.make(env_id, **kwargs)
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    if render_size is not None:
        try:
            return gym.make(env_spec(env_id), width=render_size, height=render_size, **kwargs)
        except TypeError:  # the task takes no frame size
            pass
    return gym.make(env_spec(env_id), **kwargs)


def make_vector_env(
    env_id: str, num_envs: int, backend: str = "auto", max_episode_steps: int | None = None
) -> gym.vector.VectorEnv:
    """`num_envs` copies of the task in one vector env with same-step autoreset.

    `auto` uses the batched numpy twin for the maze (all mazes stepped in one call) and `LeanSyncVectorEnv` otherwise
    (one process: MuJoCo's steps are too short to gain from `async`'s worker processes on a few cores; the same
    transitions as Gymnasium's `SyncVectorEnv`, which `sync` selects, with less work per step). `envpool` (MuJoCo
    only, optional package) steps the tasks in C++.
    Seed it with `env.reset(seed=s)`: sub-env i gets seed s + i.
    """
    check_env_id(env_id)
    if backend not in ENV_BACKENDS:
        raise NpscoError(f"unknown env backend {backend!r}; choose one of {', '.join(ENV_BACKENDS)}")
    if backend == "envpool":
        return EnvPoolVectorEnv(env_id, num_envs, max_episode_steps)
    if env_id == MAZE_ID and backend == "auto":
        return FourRewardMazeVec(num_envs, **({} if max_episode_steps is None else {"max_steps": max_episode_steps}))
    fns = [lambda: make_env(env_id, max_episode_steps) for _ in range(num_envs)]
    if backend == "auto" and gymnasium_release() in TESTED_GYMNASIUM:  # it writes SyncVectorEnv's private fields
        return LeanSyncVectorEnv(fns)
    cls = gym.vector.AsyncVectorEnv if backend == "async" else gym.vector.SyncVectorEnv
    return cls(fns, autoreset_mode=AutoresetMode.SAME_STEP)


def final_observations(infos: dict, done: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """The last observation of each finished episode (rows where `done`), taken from `infos["final_obs"]`."""
    final = np.array(next_obs, dtype=np.float32, copy=True)
    if done.any():
        rows = np.flatnonzero(done)
        final[rows] = np.stack([np.asarray(infos["final_obs"][i], dtype=np.float32) for i in rows])
    return final
