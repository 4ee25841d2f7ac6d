"""PPO's maths as pure functions: generalised advantage estimation and explained variance. Tested on exact numbers in
tests/unit/test_ppo_maths.py. (The losses, with their gradients, are in `npsco.ppo.numpy_nets`.)"""

from __future__ import annotations

import numpy as np

from npsco.ppo._rollout_kernels import gae


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    done: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation over a (T, N) rollout, with correct episode ends.

    `next_values[t]` is V of the state reached by step t: the next state's value inside an episode, the value of the
    final observation when the episode was *truncated* (time limit), and ignored when it *terminated* (no bootstrap).
    `done = terminated | truncated` cuts the recursion at episode boundaries:

        delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t
        A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}

    Returns (advantages, returns = advantages + values).
    """
    advantages = np.empty(rewards.shape, np.float32)
    gae(rewards, values, next_values, terminated, done, gamma, gae_lambda, advantages)  # compiled: the recursion
    return advantages, advantages + values


def explained_variance(values: np.ndarray, returns: np.ndarray) -> float:
    """1 - Var(returns - values) / Var(returns); nan when the returns are constant."""
    var = np.var(returns)
    return float("nan") if var == 0 else float(1 - np.var(returns - values) / var)
