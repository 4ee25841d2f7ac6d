"""Interior Policy Differentiation (paper Alg. 1): PPO whose episodes are *terminated* when the novelty constraint
is violated, so the lost future reward acts as the barrier of an interior-point method.

Rule `instant` (the paper): at a step t > t_S of an episode, if the running novelty
u_t = min_j mean_{t' <= t} d_j(s_t') falls below r0, the episode ends there as a true termination (no value bootstrap).
Rule `cumulative` (the authors' code): from t > t_S on, add (u_t - r0) to a running sum; end when the sum <= -slack.
"""

from __future__ import annotations

import numpy as np

from npsco.algos.hooks import StepInfo, StepOutcome, TrainingSetup
from npsco.algos.novelty_method import NoveltyMethod
from npsco.algos.rollout import RolloutSummary


def ipd_instant_violation(u: np.ndarray, episode_step: np.ndarray, r0: float | np.ndarray, t_start: int) -> np.ndarray:
    """Paper Alg. 1: violated where t > t_S and u_t < r0 (a number, or one threshold per env)."""
    return (episode_step > t_start) & (u < r0)


def ipd_cumulative_violation(
    margin_sum: np.ndarray, u: np.ndarray, episode_step: np.ndarray, r0: float | np.ndarray, t_start: int, slack: float
) -> tuple[np.ndarray, np.ndarray]:
    """Authors' rule: margin_sum += (u_t - r0) where t > t_S; violated where margin_sum <= -slack.

    Returns (violated, the new margin_sum).
    """
    active = episode_step > t_start
    margin_sum = margin_sum + np.where(active, u - r0, 0.0)
    return active & (margin_sum <= -slack), margin_sum


class IPD(NoveltyMethod):
    """PPO + the IPD termination rule. Logs `ipd/terminated_frac`: the fraction of the iteration's finished episodes
    that the constraint ended; `ipd/first_check_frac`: the fraction of those constraint ends that came at the first
    step the rule checks (t_S + 1), where the episode's actions so far can barely have differed."""

    name = "ipd"

    def bind(self, setup: TrainingSetup) -> None:
        super().bind(setup)
        self.margin_sum = np.zeros(setup.num_envs)
        self.first_check_ends = 0

    def on_step(self, step: StepInfo) -> StepOutcome:
        _, u = self.novelty(step)
        r0 = self.threshold(step.episode_step)
        if self.config.ipd_rule == "cumulative":
            violated, self.margin_sum = ipd_cumulative_violation(
                self.margin_sum, u, step.episode_step, r0, self.t_start, self.config.ipd_slack
            )
        else:
            violated = ipd_instant_violation(u, step.episode_step, r0, self.t_start)
        self.first_check_ends += int(
            (violated & (step.episode_step == self.t_start + 1) & ~(step.terminated | step.truncated)).sum()
        )
        return StepOutcome(terminate=violated)

    def end_episodes(self, done: np.ndarray) -> None:
        super().end_episodes(done)
        self.margin_sum[done] = 0.0

    def iteration_metrics(self, rollout: RolloutSummary) -> dict[str, float]:
        out = super().iteration_metrics(rollout)
        finished, forced = rollout.episodes, rollout.forced_ends
        out["ipd/terminated_frac"] = forced / finished if finished else 0.0
        out["ipd/terminated"] = float(forced)
        out["ipd/first_check_frac"] = self.first_check_ends / forced if forced else 0.0
        self.first_check_ends = 0
        return out
