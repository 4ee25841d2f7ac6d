"""The rollout's per-step bookkeeping, compiled (numba): the observation normaliser's update and normalisation, the
sampled action, the episode counters and ends, the reward scaler, each one call instead of a dozen numpy operations;
and GAE's backward recursion over a rollout (one loop instead of T numpy steps).

Each kernel computes what the numpy code it replaces computed, operation for operation in the same dtypes (float32
where numpy computed in float32, float64 where it promoted), and sums in numpy's order (`npsco.ppo._numpy_sums`), so
training keeps its bits (tests/unit/test_rollout_kernels.py checks each against the numpy original;
tests/integration/test_fingerprint.py, whole runs). What stays in numpy: the policy's matrix products and tanh (BLAS
and numpy's own tanh round differently from a compiled loop) and the random draws.
"""

from __future__ import annotations

import math

import numpy as np

from npsco.ppo._numpy_sums import column_sums, jit, reduce_sum


@jit
def observe(
    raw: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    count: float,
    eps: float,
    clip: float,
    enabled: bool,
    out: np.ndarray,
) -> float:
    """`RunningMeanStd.update(raw)` then `out[:] = RunningMeanStd.normalize(raw)`, for raw (N, D) float32
    observations (C-contiguous) and the float64 statistics `mean`, `var` (D,), updated in place; returns the new
    count. Disabled: `out` is `raw` as float32 and nothing changes."""
    n, d = raw.shape
    if not enabled:
        out[:] = raw
        return count
    total = count + n
    if n > 1:  # the batch's float32 mean and variance, numpy's sums in numpy's order
        batch_mean = np.empty(d, np.float32)
        column_sums(raw, batch_mean)
        nf = np.float32(n)
        for j in range(d):
            batch_mean[j] = batch_mean[j] / nf
        centred = np.empty((n, d), np.float32)
        for i in range(n):
            for j in range(d):
                c = raw[i, j] - batch_mean[j]
                centred[i, j] = c * c
        batch_var = np.empty(d, np.float32)
        column_sums(centred, batch_var)
        for j in range(d):
            batch_var[j] = batch_var[j] / nf
            delta = np.float64(batch_mean[j]) - mean[j]
            mean[j] = mean[j] + delta * n / total
            m2 = var[j] * count + np.float64(batch_var[j] * nf) + delta * delta * count * n / total
            var[j] = m2 / total
    else:  # one observation: its mean is itself, its variance 0
        for j in range(d):
            delta = np.float64(raw[0, j]) - mean[j]
            mean[j] = mean[j] + delta * n / total
            m2 = var[j] * count + 0.0 + delta * delta * count * n / total
            var[j] = m2 / total
    for j in range(d):
        scale = math.sqrt(var[j] + eps)
        for i in range(n):
            x = (np.float64(raw[i, j]) - mean[j]) / scale
            if x < -clip:  # np.maximum / np.minimum, NaN kept
                x = -clip
            if x > clip:
                x = clip
            out[i, j] = np.float32(x)
    return total


@jit
def sample_action(
    mean: np.ndarray,
    std: np.ndarray,
    noise: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    t: int,
    means: np.ndarray,
    actions: np.ndarray,
    env_actions: np.ndarray,
) -> None:
    """The Gaussian policy's action at step t of a rollout, for the mean actions `mean` (N, A) and std (A,), all
    float32: actions[t] = mean + std * noise[t], means[t] = mean, env_actions[t] = the action clipped to [low, high]
    (what the env gets); `noise`, `means`, `actions`, `env_actions` are the rollout's (T, N, A) arrays."""
    n, a = mean.shape
    for i in range(n):
        for j in range(a):
            m = mean[i, j]
            x = m + std[j] * noise[t, i, j]
            means[t, i, j] = m
            actions[t, i, j] = x
            if x < low[j]:  # np.maximum / np.minimum, NaN kept
                x = low[j]
            if x > high[j]:
                x = high[j]
            env_actions[t, i, j] = x


@jit
def tally(reward: np.ndarray, episode_return: np.ndarray, episode_step: np.ndarray) -> None:
    """One more step of each env's episode: `episode_step` += 1, `episode_return` += reward (float64)."""
    for i in range(reward.size):
        episode_step[i] += 1
        episode_return[i] += reward[i]


@jit
def record_ends(
    terminated: np.ndarray, truncated: np.ndarray, terminated_out: np.ndarray, done_out: np.ndarray
) -> tuple[bool, bool]:
    """terminated_out = terminated, done_out = terminated | truncated (bool (N,)); returns (any truncated, any done)."""
    any_truncated, any_done = False, False
    for i in range(terminated.size):
        term, trunc = terminated[i], truncated[i]
        terminated_out[i] = term
        done_out[i] = term or trunc
        any_truncated |= trunc
        any_done |= term or trunc
    return any_truncated, any_done


@jit
def scale_rewards(
    rewards: np.ndarray,
    done: np.ndarray,
    returns: np.ndarray,
    stats: np.ndarray,
    gamma: float,
    clip: float,
    square: float,
    out: np.ndarray,
) -> None:
    """`RewardScaler.__call__`: the running discounted `returns` (N,) float64 and their running mean, variance and
    count `stats` (3,) updated in place, and out = rewards / std clipped to +-clip, as float32.

    `square` must be 2.0, passed at run time: the variance update squares a Python float with `**`, which calls libm's
    pow, and pow(x, 2.0) differs from x * x in the last bit for about one value in a thousand; a literal 2.0 here would
    let the compiler turn the pow into x * x."""
    n = returns.size
    for i in range(n):
        returns[i] = returns[i] * gamma + rewards[i]
    if n > 1:
        bm = reduce_sum(returns) / n
        centred = np.empty(n, np.float64)
        for i in range(n):
            c = returns[i] - bm
            centred[i] = c * c
        bv = reduce_sum(centred) / n
    else:
        bm, bv = returns[0], 0.0
    mean, var, count = stats[0], stats[1], stats[2]
    delta, total = bm - mean, count + n
    stats[0] = mean + delta * n / total
    stats[1] = (var * count + bv * n + delta**square * count * n / total) / total
    stats[2] = total
    for i in range(n):
        if done[i]:
            returns[i] = 0.0
    scale = math.sqrt(stats[1] + 1e-8)
    for i in range(n):
        x = rewards[i] / scale
        if x < -clip:
            x = -clip
        if x > clip:
            x = clip
        out[i] = np.float32(x)


@jit
def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    done: np.ndarray,
    gamma: float,
    gae_lambda: float,
    out: np.ndarray,
) -> None:
    """out = GAE's advantages (T, N) float32 (`npsco.ppo.maths.compute_gae`): delta_t = r_t + gamma (1 - terminated_t)
    next_value_t - value_t, A_t = delta_t + gamma lambda (1 - done_t) A_{t+1}; the Python floats gamma and gamma
    lambda meet the float32 masks as float32, as in numpy."""
    steps, envs = rewards.shape
    discount, trace = np.float32(gamma), np.float32(gamma * gae_lambda)
    one = np.float32(1.0)
    for i in range(envs):
        last = np.float32(0.0)
        for t in range(steps - 1, -1, -1):
            not_terminated, not_done = one - np.float32(terminated[t, i]), one - np.float32(done[t, i])
            delta = rewards[t, i] + discount * not_terminated * next_values[t, i] - values[t, i]
            last = delta + trace * not_done * last
            out[t, i] = last
