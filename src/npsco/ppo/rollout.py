"""What the rollout produces: the (T, N) arrays of one rollout (`RolloutBuffer`), its episode counts
(`RolloutSummary`), the same transitions flattened for the update (`Batch`), the running reward scaler applied
while collecting, and what an update may add to PPO's loss (`MeanActionTerm`).

A rollout has one or more reward streams: `task`, and the extra streams a method declares (TNB's `novelty`, CPO's
`cost`); each stream has its own rewards, critic values and bootstrap values, hence its own advantages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from npsco.ppo._rollout_kernels import scale_rewards


@dataclass
class RolloutSummary:
    """The episodes that ended during one rollout, as the trainer logs them and the methods read them."""

    returns: list[float] = field(default_factory=list)
    """Task return (raw, unscaled) of each episode that ended, in the order they ended."""
    lengths: list[int] = field(default_factory=list)
    """Length in steps of each of those episodes."""
    forced_ends: int = 0
    """How many of them a method ended (`StepOutcome.terminate`, IPD's constraint) before the env did."""

    @property
    def episodes(self) -> int:
        """Number of episodes that ended."""
        return len(self.returns)


@dataclass
class RolloutBuffer:
    """One rollout of T steps of N envs, as collected: (T, N, ...) arrays, and (T, N) arrays per reward stream."""

    obs: np.ndarray
    """Normalised observations the policy acted on, (T, N, obs_dim)."""
    actions: np.ndarray
    """The sampled actions (before clipping to the action bounds), (T, N, A)."""
    logprobs: np.ndarray
    """log pi(a_t | s_t) of the rollout policy, (T, N)."""
    terminated: np.ndarray
    """The episode ended at step t by a true termination (the env's, or a method's): no bootstrap, (T, N)."""
    done: np.ndarray
    """The episode ended at step t (terminated or truncated), (T, N)."""
    rewards: dict[str, np.ndarray]
    """Per stream, the training reward of step t (the task stream's scaled by `RewardScaler`), (T, N)."""
    values: dict[str, np.ndarray]
    """Per stream, the critic's V(s_t), (T, N)."""
    next_values: dict[str, np.ndarray]
    """Per stream, V of the state reached by step t: the next state's inside an episode, the final observation's on a
    truncation (ignored after a termination), (T, N)."""
    summary: RolloutSummary = field(default_factory=RolloutSummary)
    """The episodes that ended during the rollout."""

    @classmethod
    def empty(cls, steps: int, envs: int, obs_dim: int, action_dim: int, streams: tuple[str, ...]) -> RolloutBuffer:
        """Zeroed arrays for `steps` x `envs` transitions and the given reward streams."""
        T, N = steps, envs
        return cls(
            obs=np.zeros((T, N, obs_dim), np.float32),
            actions=np.zeros((T, N, action_dim), np.float32),
            logprobs=np.zeros((T, N), np.float32),
            terminated=np.zeros((T, N), bool),
            done=np.zeros((T, N), bool),
            rewards={s: np.zeros((T, N), np.float32) for s in streams},
            values={s: np.zeros((T, N), np.float32) for s in streams},
            next_values={s: np.zeros((T, N), np.float32) for s in streams},
        )


@dataclass
class Batch:
    """A rollout flattened for the update: (T*N, ...) tensors; advantages/returns/values per stream."""

    obs: torch.Tensor
    """Normalised observations, (B, obs_dim)."""
    actions: torch.Tensor
    """Sampled actions, (B, A)."""
    logprobs: torch.Tensor
    """log pi_old(a | s) of the rollout policy, (B,)."""
    advantages: dict[str, torch.Tensor]
    """Per stream, the GAE advantages (not normalised), (B,)."""
    returns: dict[str, torch.Tensor]
    """Per stream, the critic's targets: advantages + values, (B,)."""
    values: dict[str, torch.Tensor]
    """Per stream, the rollout critic's values, (B,)."""
    size: int
    """B = T * N."""


class MeanActionTerm(Protocol):
    """A loss on the policy's mean actions at the batch's states, added to PPO's loss by `Learner.ppo_update`: an
    update rule's way to steer the actor's mean directly (the Lagrangian method's novelty term)."""

    def __call__(self, index: np.ndarray, mean: np.ndarray) -> tuple[float, np.ndarray]:
        """(loss, d loss / d mean (B, A) float32) of the minibatch at batch indices `index` (B,), given the actor's
        raw (unclipped) mean output `mean` (B, A) there."""
        ...


class RewardScaler:
    """Divides rewards by the running std of each env's discounted return (Gymnasium's NormalizeReward), then clips.

    One compiled call per step (`npsco.ppo._rollout_kernels.scale_rewards`), with the bits of numpy's version."""

    def __init__(self, num_envs: int, gamma: float, clip: float, enabled: bool = True):
        self.enabled, self.gamma, self.clip = enabled, gamma, clip
        self.returns = np.zeros(num_envs, np.float64)
        self._stats = np.array([0.0, 1.0, 1e-4])  # the running mean, variance and count of the returns

    @property
    def mean(self) -> float:
        """Running mean of the discounted returns."""
        return float(self._stats[0])

    @mean.setter
    def mean(self, value: float) -> None:
        self._stats[0] = value

    @property
    def var(self) -> float:
        """Running variance of the discounted returns."""
        return float(self._stats[1])

    @var.setter
    def var(self, value: float) -> None:
        self._stats[1] = value

    @property
    def count(self) -> float:
        """Weight of the running statistics (the number of returns folded in, from 1e-4)."""
        return float(self._stats[2])

    @count.setter
    def count(self, value: float) -> None:
        self._stats[2] = value

    def __call__(self, rewards: np.ndarray, done: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The scaled rewards (N,) float32 of `rewards` (N,) float64 (written into `out` when given); `done` (N,)
        ends the running returns of those envs."""
        if out is None:
            out = np.empty(rewards.shape, np.float32)
        if not self.enabled:
            out[:] = rewards
            return out
        scale_rewards(rewards, done, self.returns, self._stats, self.gamma, self.clip, 2.0, out)
        return out
