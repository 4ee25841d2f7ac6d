"""The direct step's arithmetic after the simulator steps, compiled (numba): the x velocity, the observation, the reward
and the health check of Hopper-v5, Walker2d-v5 and HalfCheetah-v5, one call instead of ~20 numpy operations on
arrays of a few values (their Python costs 4-9 us a step; MuJoCo's simulator steps cost 30-100).

Each kernel repeats Gymnasium 1.4's operations in their dtypes and order (`npsco.envs.direct_step._numpy_outcome` is
the same in numpy; the tests hold the kernels to it and to Gymnasium's own step, bit for bit but for the sign of a NaN
that arithmetic makes, which IEEE 754 leaves open): float64 throughout, except the control cost, which numpy computes
in the action's dtype (`np.sum(np.square(action))`, then a Python float times that float32 scalar is a float32 under
numpy 2's promotion); sums of fewer than 8 values, which numpy adds one after the other. NaNs go where numpy's
`maximum`, `minimum` and comparisons send them. No fastmath: no fused multiply-adds. `direct_step._kernel_params`
sends any task whose settings would promote otherwise to the numpy code.
"""

from __future__ import annotations

import numba
import numpy as np

jit = numba.njit(error_model="numpy", cache=True)
"""IEEE arithmetic in the written order (no fastmath), numpy's error model (a division by zero gives inf or NaN)."""

DT, FORWARD, CTRL, HEALTHY, Z_MIN, Z_MAX, ANGLE_MIN, ANGLE_MAX, STATE_MIN, STATE_MAX = range(10)
"""Indices in a kernel's `params` (float64): the step's duration, the reward weights, the healthy reward and the
healthy ranges (Hopper's state range: ignored unless `check_state`)."""

MAX_ACTION_SIZE = 7
"""The longest action whose control cost the kernels sum in numpy's order (numpy adds fewer than 8 values one after
the other; longer arrays it sums pairwise in blocks)."""


@jit
def control_cost(action: np.ndarray, weight: float) -> float:
    """`weight * np.sum(np.square(action))` of a float32 or float64 action of at most `MAX_ACTION_SIZE` values: the
    sum in the action's dtype, the weight rounded to that dtype (numpy 2: a Python float meets a numpy scalar as its
    dtype), returned as a float64."""
    w = np.empty(1, action.dtype)
    w[0] = weight
    total = action[0] * action[0]
    for i in range(1, action.size):
        total += action[i] * action[i]
    return np.float64(w[0] * total)


@jit
def task_outcome(
    qpos: np.ndarray,
    qvel: np.ndarray,
    x_before: float,
    action: np.ndarray,
    params: np.ndarray,
    health: bool,
    check_state: bool,
    stop_when_unhealthy: bool,
) -> tuple[np.ndarray, float, bool]:
    """A task after its simulator steps: (observation, reward, terminated). HalfCheetah-v5 (no `health`): observation
    (qpos[1:], qvel), reward forward - control cost, never terminated. Hopper-v5 and Walker2d-v5 (`health`): qvel
    clipped to +-10 in the observation, the healthy reward added before the control cost is taken off, and with
    `check_state` Hopper's test of its state vector less x and z (qpos[2:] and all of qvel)."""
    x_velocity = (qpos[0] - x_before) / params[DT]
    healthy = True
    if health:
        z, angle = qpos[1], qpos[2]
        healthy = params[Z_MIN] < z < params[Z_MAX] and params[ANGLE_MIN] < angle < params[ANGLE_MAX]
        if healthy and check_state:
            lo, hi = params[STATE_MIN], params[STATE_MAX]
            for i in range(2, qpos.size):
                healthy = healthy and lo < qpos[i] < hi
            for i in range(qvel.size):
                healthy = healthy and lo < qvel[i] < hi
        # Gymnasium's `healthy * healthy_reward`: a bool times a float
        gain = params[FORWARD] * x_velocity + np.float64(healthy) * params[HEALTHY]
    else:
        gain = params[FORWARD] * x_velocity
    reward = gain - control_cost(action, params[CTRL])
    p, v = qpos.size - 1, qvel.size
    obs = np.empty(p + v)
    for i in range(p):
        obs[i] = qpos[i + 1]
    for i in range(v):
        x = qvel[i]
        if health:  # np.minimum(np.maximum(qvel, -10), 10): a NaN stays
            if x < -10.0:
                x = -10.0
            if x > 10.0:
                x = 10.0
        obs[p + i] = x
    return obs, reward, (not healthy) and stop_when_unhealthy
