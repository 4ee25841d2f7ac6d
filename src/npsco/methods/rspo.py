"""Reward-Switching Policy Optimisation (RSPO, Zhou et al., ICLR 2022), on IPD's novelty check: where IPD cuts an
episode whose running novelty falls below the threshold, RSPO lets it go on and *switches its reward*.

At a step t > t_S of an episode, with u_t the running novelty (min over the avoided policies of the running mean of
the per-state distance, as IPD checks it), the step is **switched** when u_t < r0: its training reward is not the
task reward r_t but the intrinsic reward

    w x min_j ||a_t - mu_j(s_t)|| / r0,

the distance of the action actually executed to the nearest avoided policy's action (a function of the sampled
action, so that the policy gradient learns *which* actions differ), scaled by r0 and the weight w. Steps that pass the
check, and the first t_S steps, keep the task reward. The switch is checked at every step (the running novelty may
climb back above r0 later in the episode, and the task reward resumes then); RSPO's paper accepts or rejects whole
trajectories after the fact, which needs the rollout's end before any reward is known.

RSPO calibrates its threshold to the fresh policy: with `rspo_calibrate` c > 0, after the first rollout the
threshold becomes c x the mean running novelty of that rollout's steps after t_S (then it stays); 0 keeps r0.
The reported (and evaluated) return is always the task's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from npsco.errors import NpscoError
from npsco.methods.novelty import NoveltyMethod
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import ReferenceSet
from npsco.ppo.hooks import RolloutShaping, RolloutSteps
from npsco.ppo.rollout import RolloutSummary


@dataclass
class RSPOOptions:
    """RSPO's own settings."""

    rspo_weight: float = 1.0
    """Weight w of the intrinsic reward w x (distance of the executed action to the nearest avoided policy) / r0."""
    rspo_calibrate: float = 0.0
    """c > 0: after the first rollout the threshold becomes c x that rollout's mean running novelty after t_S (RSPO's
    calibration to the fresh policy, e.g. 0.9); 0: the threshold stays r0."""

    def validate(self) -> None:
        if self.rspo_weight <= 0:
            raise NpscoError("invalid method configuration: rspo_weight must be > 0")
        if self.rspo_calibrate < 0:
            raise NpscoError("invalid method configuration: rspo_calibrate must be >= 0 (0: no calibration)")


def switched_reward(
    task: np.ndarray, intrinsic: np.ndarray, u: np.ndarray, episode_step: np.ndarray, threshold: float, t_start: int
) -> tuple[np.ndarray, np.ndarray]:
    """(training reward, switched mask): the intrinsic reward where t > t_S and u_t < threshold, else the task's."""
    switched = (episode_step > t_start) & (u < threshold)
    return np.where(switched, intrinsic, task), switched


def intrinsic_reward(action: np.ndarray, reference_actions: np.ndarray, r0: float, weight: float) -> np.ndarray:
    """w x min_j ||a - mu_j|| / r0 per env, from the executed actions (N, A) and the avoided policies' (M, N, A)."""
    diff = reference_actions - action[None]
    return weight * np.sqrt(np.einsum("mna,mna->mn", diff, diff)).min(axis=0) / r0


class RSPO(NoveltyMethod):
    """PPO whose steps that fail the novelty check train on the intrinsic reward (module docstring). Logs
    `rspo/switched_frac` (the fraction of steps after t_S that were switched), `rspo/threshold` and
    `rspo/intrinsic_mean` (the mean intrinsic reward of the switched steps)."""

    name = "rspo"
    Options = RSPOOptions
    keeps_reference_actions = True  # the intrinsic reward compares the executed action with theirs

    def __init__(self, references: ReferenceSet, r0: float, config: MethodConfig, env_id: str):
        super().__init__(references, r0, config, env_id)
        self.options: RSPOOptions = config.options
        self.switch_threshold = self.r0
        self.calibrated = self.options.rspo_calibrate == 0
        self._reset_counts()

    def _reset_counts(self) -> None:
        self._switched = self._active = 0
        self._intrinsic = 0.0

    def threshold(self, episode_step: np.ndarray) -> np.ndarray | float:
        return self.switch_threshold

    def shape_rollout(self, steps: RolloutSteps) -> RolloutShaping:
        _, u, ref_actions = self.rollout_novelty(steps)
        assert ref_actions is not None  # keeps_reference_actions
        T, N, M, A = ref_actions.shape
        intrinsic = intrinsic_reward(
            steps.action.reshape(T * N, A),
            ref_actions.reshape(T * N, M, A).transpose(1, 0, 2),
            self.r0,
            self.options.rspo_weight,
        ).reshape(T, N)
        reward, switched = switched_reward(
            steps.reward, intrinsic, u, steps.episode_step, self.switch_threshold, self.t_start
        )
        self._switched += int(switched.sum())
        self._active += int((steps.episode_step > self.t_start).sum())
        self._intrinsic += float(intrinsic[switched].sum())
        return RolloutShaping(train_reward=reward)

    def state(self) -> dict[str, Any]:
        return {**super().state(), "switch_threshold": self.switch_threshold, "calibrated": self.calibrated}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.switch_threshold, self.calibrated = float(state["switch_threshold"]), bool(state["calibrated"])

    def iteration_metrics(self, rollout: RolloutSummary) -> dict[str, float]:
        if not self.calibrated:  # RSPO's calibration: from the fresh policy's first rollout
            u = np.concatenate(self._u_steps) if self._u_steps else np.zeros(0)
            active = u[np.concatenate(self._constrained_steps)] if self._u_steps else u
            if active.size:
                self.switch_threshold = self.options.rspo_calibrate * float(active.mean())
                self.calibrated = True
        out = super().iteration_metrics(rollout)
        out["rspo/switched_frac"] = self._switched / self._active if self._active else 0.0
        out["rspo/intrinsic_mean"] = self._intrinsic / self._switched if self._switched else 0.0
        out["rspo/threshold"] = self.switch_threshold
        self._reset_counts()
        return out
