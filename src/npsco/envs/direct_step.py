"""Direct steps for Gymnasium's Hopper-v5, Walker2d-v5 and HalfCheetah-v5, as `gym.make` builds them.

An env's `step` goes through three wrappers and the task's Python: properties recomputed several times a step, an
info dict npsco never reads, checks that only the first step needs. `direct_step(env)` returns a function that does
the same arithmetic in the same order on the same MuJoCo data (so the same bits: observation, reward, terminated,
truncated; a NaN reward's sign aside), what follows the simulator steps in one compiled call
(`npsco.envs._direct_kernels`), and skips the rest; `LeanSyncVectorEnv` steps with it. Anything else, a task built
with other options (rendering, positions in the observation), or a Gymnasium release outside `TESTED_GYMNASIUM` keeps
Gymnasium's own step: the direct step copies that release's code and reads its wrappers' private counters, so each
new release is checked against it (tests/unit/test_direct_step.py) before it is added.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv
from gymnasium.envs.mujoco.hopper_v5 import HopperEnv
from gymnasium.envs.mujoco.walker2d_v5 import Walker2dEnv
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit

from npsco.envs._direct_kernels import (
    ANGLE_MAX,
    ANGLE_MIN,
    CTRL,
    DT,
    FORWARD,
    HEALTHY,
    MAX_ACTION_SIZE,
    STATE_MAX,
    STATE_MIN,
    Z_MAX,
    Z_MIN,
    task_outcome,
)

TESTED_GYMNASIUM = ((1, 4),)
"""The Gymnasium releases (major, minor) whose v5 steps and wrappers the direct step is checked against."""

Step = Callable[[np.ndarray], tuple[Any, float, bool, bool]]
"""action -> (observation, reward, terminated, truncated): `env.step` without its info dict."""


def gymnasium_step(env: gym.Env) -> Step:
    """`env.step`, its info dict dropped."""

    def step(action: np.ndarray) -> tuple[Any, float, bool, bool]:
        obs, reward, terminated, truncated, _ = env.step(action)
        return obs, float(reward), bool(terminated), bool(truncated)

    return step


def gymnasium_release() -> tuple[int, int]:
    """The installed Gymnasium's (major, minor) version."""
    major, minor = gym.__version__.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def direct_step(env: gym.Env) -> Step | None:
    """A step for `env` with the same results as `env.step` (info dropped), or None where `env` is not one of the
    three tasks wrapped exactly as `gym.make` wraps them, with their default observation and no rendering."""
    if gymnasium_release() not in TESTED_GYMNASIUM:
        return None
    limit = env
    order = getattr(limit, "env", None)
    checker = getattr(order, "env", None)
    task = getattr(checker, "env", None)
    if not (
        type(limit) is TimeLimit
        and type(order) is OrderEnforcing
        and type(checker) is PassiveEnvChecker
        and type(task) in (HopperEnv, Walker2dEnv, HalfCheetahEnv)
    ):
        return None
    assert isinstance(task, HopperEnv | Walker2dEnv | HalfCheetahEnv)
    if task.render_mode is not None or not task._exclude_current_positions_from_observation:
        return None
    outcome = _outcome(task)
    model, data = task.model, task.data
    qpos, ctrl = data.qpos, data.ctrl
    frame_skip, nu = task.frame_skip, task.model.nu
    fallback = gymnasium_step(env)
    time_limit: Any = limit  # its step counter is typed Optional: None until a reset, which OrderEnforcing checks
    mj_step, mj_rne = mujoco.mj_step, mujoco.mj_rnePostConstraint

    def step(action: np.ndarray) -> tuple[np.ndarray, float, bool, bool]:
        if not checker.checked_step:  # the first step: Gymnasium's checks (and its error when there was no reset)
            return fallback(action)
        if np.shape(action) != (nu,):
            raise ValueError(f"Action dimension mismatch. Expected {(nu,)}, found {np.shape(action)}")
        x_before = qpos[0]
        ctrl[:] = action  # MujocoEnv.do_simulation
        mj_step(model, data, nstep=frame_skip)
        mj_rne(model, data)
        obs, reward, terminated = outcome(x_before, action)
        time_limit._elapsed_steps += 1  # TimeLimit
        return obs, reward, terminated, time_limit._elapsed_steps >= time_limit._max_episode_steps

    return step


COMPILED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
"""The actions the kernels take (native byte order); any other goes through the numpy outcome."""


def _outcome(task: HopperEnv | Walker2dEnv | HalfCheetahEnv) -> Callable[[float, np.ndarray], tuple]:
    """(x position before the simulator steps, action) -> (observation, reward, terminated) of `task` after its
    simulator steps: the task's `_get_obs`, `_get_rew` and `is_healthy`, each computed once, in Gymnasium's order of
    operations. A float32 or float64 action (or a list of floats) goes through the compiled kernel of
    `npsco.envs._direct_kernels` where `_kernel_params` allows it; anything else, through the same operations in numpy
    (`_numpy_outcome`)."""
    numpy_outcome = _numpy_outcome(task)
    params = _kernel_params(task)
    if params is None:
        return numpy_outcome
    qpos, qvel = task.data.qpos, task.data.qvel
    asarray, compiled = np.asarray, COMPILED_DTYPES
    health = not isinstance(task, HalfCheetahEnv)  # Hopper's and Walker2d's health check
    check_state = isinstance(task, HopperEnv)  # Hopper's third one
    stop_when_unhealthy = health and bool(task._terminate_when_unhealthy)  # type: ignore[union-attr]

    def step_outcome(x_before: float, action: np.ndarray) -> tuple:
        a = asarray(action)
        if a.dtype not in compiled:
            return numpy_outcome(x_before, action)
        return task_outcome(qpos, qvel, x_before, a, params, health, check_state, stop_when_unhealthy)

    return step_outcome


def _kernel_params(task: HopperEnv | Walker2dEnv | HalfCheetahEnv) -> np.ndarray | None:
    """The kernels' `params` (float64) of `task`'s settings, or None where the kernels would not give numpy's bits: a
    weight or healthy reward that is not a Python float (a numpy scalar, or an int, promotes otherwise), a health range
    bound that is not a Python number (per-joint arrays included), or an action size outside 1 to `MAX_ACTION_SIZE`."""
    weights = [task._forward_reward_weight, task._ctrl_cost_weight]
    bounds: list = []
    if not isinstance(task, HalfCheetahEnv):
        weights.append(task._healthy_reward)
        bounds += [*task._healthy_z_range, *task._healthy_angle_range]
        if isinstance(task, HopperEnv):
            bounds += [*task._healthy_state_range]
    if (
        not 1 <= task.model.nu <= MAX_ACTION_SIZE
        or any(type(w) is not float for w in weights)
        or any(type(b) not in (int, float) for b in bounds)
    ):
        return None
    params = np.zeros(STATE_MAX + 1)
    params[[DT, FORWARD, CTRL]] = task.dt, task._forward_reward_weight, task._ctrl_cost_weight
    if not isinstance(task, HalfCheetahEnv):
        params[HEALTHY] = task._healthy_reward
        params[[Z_MIN, Z_MAX]] = task._healthy_z_range
        params[[ANGLE_MIN, ANGLE_MAX]] = task._healthy_angle_range
    if isinstance(task, HopperEnv):
        params[[STATE_MIN, STATE_MAX]] = task._healthy_state_range
    return params


def _numpy_outcome(task: HopperEnv | Walker2dEnv | HalfCheetahEnv) -> Callable[[float, np.ndarray], tuple]:
    """`_outcome` in numpy: Gymnasium's operations as it writes them, without the properties' repeated work."""
    qpos, qvel, dt = task.data.qpos, task.data.qvel, task.dt
    forward_weight, ctrl_weight = task._forward_reward_weight, task._ctrl_cost_weight
    concat, square, total, low, high = np.concatenate, np.square, np.sum, np.maximum, np.minimum

    if isinstance(task, HalfCheetahEnv):

        def cheetah(x_before: float, action: np.ndarray) -> tuple:
            x_velocity = (qpos[0] - x_before) / dt
            reward = forward_weight * x_velocity - ctrl_weight * total(square(action))
            return concat((qpos[1:], qvel)), reward, False

        return cheetah

    healthy_reward, stop_when_unhealthy = task._healthy_reward, task._terminate_when_unhealthy
    (z_min, z_max), (angle_min, angle_max) = task._healthy_z_range, task._healthy_angle_range
    state_min, state_max = task._healthy_state_range if isinstance(task, HopperEnv) else (None, None)

    def walker(x_before: float, action: np.ndarray) -> tuple:
        x_velocity = (qpos[0] - x_before) / dt
        z, angle = qpos[1], qpos[2]
        healthy = bool(z_min < z < z_max and angle_min < angle < angle_max)
        if healthy and state_min is not None:  # Hopper: also qpos[2:] and every velocity in range
            state = concat((qpos[2:], qvel))
            healthy = bool(((state_min < state) & (state < state_max)).all())
        reward = (forward_weight * x_velocity + healthy * healthy_reward) - ctrl_weight * total(square(action))
        velocity = high(low(qvel, -10), 10)  # np.clip(qvel, -10, 10), minus its Python wrapper
        return concat((qpos[1:], velocity)), reward, not healthy and stop_when_unhealthy

    return walker
