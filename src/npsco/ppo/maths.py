"""PPO's maths as pure functions: generalised advantage estimation, the clipped surrogate and value losses, advantage
normalisation and explained variance. Tested on exact numbers in tests/unit/test_ppo_maths.py."""

from __future__ import annotations

import numpy as np
import torch

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


def policy_loss(
    new_logprob: torch.Tensor, old_logprob: torch.Tensor, advantages: torch.Tensor, clip_coef: float
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's clipped surrogate, as a loss to minimise: mean(max(-A r, -A clip(r, 1-eps, 1+eps))), r = pi/pi_old.

    Also returns the approximate KL ((r - 1) - log r, Schulman's low-variance estimator) and the clip fraction.
    """
    log_ratio = new_logprob - old_logprob
    ratio = log_ratio.exp()
    loss = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return loss, {"approx_kl": approx_kl, "clipfrac": clipfrac}


def value_loss(
    new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip_coef: float, clip: bool
) -> torch.Tensor:
    """0.5 * mean squared error to the returns; with `clip`, the max of the plain and the clipped-around-old errors."""
    unclipped = (new_values - returns) ** 2
    if not clip:
        return 0.5 * unclipped.mean()
    clipped = old_values + torch.clamp(new_values - old_values, -clip_coef, clip_coef)
    return 0.5 * torch.max(unclipped, (clipped - returns) ** 2).mean()


def normalize_advantages(adv: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit std (the minibatch normalisation of the PPO implementation details)."""
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def explained_variance(values: np.ndarray, returns: np.ndarray) -> float:
    """1 - Var(returns - values) / Var(returns); nan when the returns are constant."""
    var = np.var(returns)
    return float("nan") if var == 0 else float(1 - np.var(returns - values) / var)
