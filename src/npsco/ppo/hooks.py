"""What the trainer tells the hooks it trains with, and what they may answer: `TrainingSetup`, `StepInfo`,
`RolloutSummary` in; `StepOutcome` and an update rule out. `Hooks` itself is plain PPO; a method
(`npsco.methods`) overrides the hooks it needs.

The trainer calls, in this order: `bind` once; then per iteration `begin_iteration`, `on_step` after every vector
step of the rollout (and `end_episodes` after a step that ended episodes), `shape_rollout` with the whole rollout,
`update` with the `Learner` and the batch, and `iteration_metrics`. Hooks never see the trainer: a step shaper sees
steps (one by one, or a whole rollout), an update rule sees the learner (the agent, its optimiser and PPO's
minibatch epochs) and the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from npsco.ppo.rollout import Batch, RolloutSummary

if TYPE_CHECKING:  # annotations only: the learner imports torch
    from npsco.ppo.learner import Learner


@dataclass(frozen=True)
class TrainingSetup:
    """What the hooks learn once, when the trainer has built its envs (`Hooks.bind`)."""

    env_id: str
    """Gymnasium id of the task."""
    num_envs: int
    """Envs stepped together: the N of every (N,) array the hooks see."""
    num_iterations: int
    """Rollout + update iterations of the run."""
    num_steps: int
    """Steps per env per rollout: the T of a rollout's (T, N) arrays."""
    observation_space: gym.spaces.Box
    """The task's observation space."""
    action_space: gym.spaces.Box
    """The task's (bounded) action space."""


@dataclass
class StepInfo:
    """What the hooks see after each vectorised step of the rollout (arrays over the N envs)."""

    obs: np.ndarray
    """Raw observations s_t at which the actions were taken, (N, obs_dim)."""
    mean_action: np.ndarray
    """The new policy's deterministic action at s_t, clipped to the action bounds, (N, A)."""
    action: np.ndarray
    """The action executed at s_t (the Gaussian sample, clipped to the action bounds), (N, A)."""
    reward: np.ndarray
    """Task reward of the step, (N,)."""
    terminated: np.ndarray
    """The env terminated the episode at this step, (N,)."""
    truncated: np.ndarray
    """The env truncated the episode at this step (time limit), (N,)."""
    episode_step: np.ndarray
    """Steps taken in the current episode including this one (1 at the first step), (N,)."""
    action_std: np.ndarray
    """The policy's action standard deviation (state-independent, fixed during the rollout), (A,)."""


@dataclass
class RolloutSteps:
    """Every step of a rollout, for hooks that shape the rewards once the rollout is over (`Hooks.shape_rollout`):
    the `StepInfo` fields as (T, N, ...) arrays, in the order of the steps."""

    obs: np.ndarray
    """Raw observations s_t, (T, N, obs_dim)."""
    mean_action: np.ndarray
    """The policy's deterministic action at s_t, clipped to the action bounds, (T, N, A)."""
    action: np.ndarray
    """The executed action at s_t, (T, N, A)."""
    reward: np.ndarray
    """Task reward, (T, N)."""
    terminated: np.ndarray
    """The env terminated the episode at step t, (T, N)."""
    done: np.ndarray
    """The episode ended at step t (terminated or truncated), (T, N)."""
    episode_step: np.ndarray
    """Steps taken in the episode including step t (1 at its first step), (T, N)."""
    action_std: np.ndarray
    """The policy's action standard deviation during the rollout, (A,)."""

    @classmethod
    def empty(cls, steps: int, envs: int, obs_dim: int, action_dim: int) -> RolloutSteps:
        T, N = steps, envs
        return cls(
            obs=np.zeros((T, N, obs_dim), np.float32),
            mean_action=np.zeros((T, N, action_dim), np.float32),
            action=np.zeros((T, N, action_dim), np.float32),
            reward=np.zeros((T, N), np.float64),
            terminated=np.zeros((T, N), bool),
            done=np.zeros((T, N), bool),
            episode_step=np.zeros((T, N), np.int64),
            action_std=np.zeros(action_dim, np.float32),
        )


@dataclass
class RolloutShaping:
    """What `Hooks.shape_rollout` answers for a whole rollout. Every field is optional."""

    train_reward: np.ndarray | None = None
    """Replaces the task reward for training only, (T, N) (WSR's and RSPO's shaped rewards); the reported return stays
    the task reward."""
    streams: dict[str, np.ndarray] = field(default_factory=dict)
    """Rewards of the extra streams, (T, N) each, one per name in `Hooks.streams` (TNB's and the Lagrangian's
    `novelty`, CPO's `cost`), each learnt by its own critic with its own GAE."""


@dataclass
class StepOutcome:
    """The answer of `Hooks.on_step` to one vector step. Every field is optional. npsco's methods answer only
    `terminate` here (IPD) and shape rewards after the rollout (`RolloutShaping`); the per-step rewards are for
    hooks without `shape_rollout`, and the trainer ignores them when the hooks have one."""

    train_reward: np.ndarray | None = None
    """Replaces this step's task reward for training only, (N,); the reported return stays the task reward."""
    streams: dict[str, np.ndarray] = field(default_factory=dict)
    """This step's rewards of the extra streams, (N,) each: one per name in `Hooks.streams`, at every step."""
    terminate: np.ndarray | None = None
    """(N,) mask of the envs whose episode the hooks end now, as a true termination (IPD's constraint)."""


class Hooks:
    """Plain PPO: every hook does nothing, and the update is PPO's (`Learner.ppo_update`)."""

    name = "ppo"
    """The name in the checkpoints and the logs (a method's registry name)."""
    streams: tuple[str, ...] = ()
    """Extra reward streams; the trainer gives each a critic and its own advantages in the batch."""
    on_step: Callable[[StepInfo], StepOutcome | None] | None = None
    """Called after every vectorised env step, before episode ends are handled; it answers a `StepOutcome`, or None
    when it changes nothing at this step. None in place of the hook (plain PPO) skips building the `StepInfo` every
    step. Only hooks that must act during the rollout need it (IPD ends episodes)."""
    shape_rollout: Callable[[RolloutSteps], RolloutShaping] | None = None
    """Called once a rollout is collected, with all its steps: the training rewards and the streams' rewards of the
    whole rollout at once (a novelty reward computed for T x N states in one batched call instead of T small ones).
    None: the task reward trains as it is."""

    def bind(self, setup: TrainingSetup) -> None:
        """Called once when the trainer has built its envs and agent."""

    def begin_iteration(self, iteration: int) -> None:
        """Called before the rollout of each iteration (1-based)."""

    def end_episodes(self, done: np.ndarray) -> None:
        """Called after a step in which some episode ended (by the env or by `terminate`), with the (N,) mask of the
        envs whose episode ended."""

    def update(self, learner: Learner, batch: Batch) -> dict[str, float]:
        """The update phase; PPO's by default."""
        return learner.ppo_update(batch)

    def iteration_metrics(self, rollout: RolloutSummary) -> dict[str, float]:
        """Metrics of the iteration (namespaced keys), given the episodes of its rollout; called once per iteration
        after the update."""
        return {}

    def metadata(self) -> dict[str, Any]:
        """Settings saved in every checkpoint (read once per training: they do not change during it)."""
        return {}

    def state(self) -> dict[str, Any]:
        """What the hooks carry from one iteration to the next (numpy arrays and JSON numbers), saved with the
        training state between two iterations (`npsco.ppo.state`); plain PPO carries nothing."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Take back what `state` returned (after `bind`)."""
