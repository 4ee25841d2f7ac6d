"""Interior Policy Differentiation (paper Alg. 1): PPO whose episodes are *terminated* when the novelty constraint
is violated, so the lost future reward acts as the barrier of an interior-point method.

Rule `instant` (the paper): at a step t > t_S of an episode, if the running novelty
u_t = min_j mean_{t' <= t} d_j(s_t') falls below r0, the episode ends there as a true termination (no value bootstrap).
Rule `cumulative` (the authors' code): from t > t_S on, add (u_t - r0) to a running sum; end when the sum <= -slack.

The threshold can vary (docs/methods/ipd.md): `r0_warmup` ramps it up over the first part of training
(`warmup_threshold`), `r0_profile=reference` scales it per episode step by the references' own running distance
(`profile_at`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npsco.algos.hooks import StepInfo, StepOutcome, TrainingSetup
from npsco.algos.novelty_method import NoveltyMethod
from npsco.algos.rollout import RolloutSummary
from npsco.config import MethodConfig
from npsco.errors import NpscoError
from npsco.novelty.references import ReferenceSet


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


def warmup_threshold(r0: float, warmup: float, iteration: int, num_iterations: int) -> float:
    """r0 at `iteration` (1-based) of `num_iterations` with a warm-up over the fraction `warmup` of training:
    r0 * min(1, progress / warmup), progress = (iteration - 1) / num_iterations; r0 itself when `warmup` is 0."""
    if warmup <= 0:
        return r0
    return r0 * min(1.0, max(0.0, (iteration - 1) / num_iterations / warmup))


def profile_at(profile: np.ndarray, episode_step: np.ndarray) -> np.ndarray:
    """rho(t) at each env's episode step t (1-based): `profile[t - 1]`, its last value beyond its end."""
    return profile[np.minimum(np.asarray(episode_step), profile.size) - 1]


class IPD(NoveltyMethod):
    """PPO + the IPD termination rule. Logs `ipd/terminated_frac`: the fraction of the iteration's finished episodes
    that the constraint ended; `ipd/first_check_frac`: the fraction of those constraint ends that came at the first
    step the rule checks (t_S + 1), where the episode's actions so far can barely have differed."""

    name = "ipd"

    def __init__(
        self, references: ReferenceSet, r0: float, config: MethodConfig, env_id: str, profile: np.ndarray | None = None
    ):
        super().__init__(references, r0, config, env_id)
        if (config.r0_profile == "reference") != (profile is not None):
            raise NpscoError(
                "r0_profile=reference needs the references' distance profile (threshold.json, computed by "
                "npsco population), and only then is a profile used"
            )
        self.profile = None if profile is None else np.asarray(profile, np.float64)
        if self.profile is not None and (
            self.profile.ndim != 1
            or not self.profile.size
            or not np.all(np.isfinite(self.profile))
            or np.any(self.profile <= 0)
        ):
            raise NpscoError("the threshold profile must be a non-empty list of positive numbers")
        self.r0_now = self.r0  # this iteration's threshold (`begin_iteration`: the warm-up)
        self.num_iterations = 1
        self._reset_counts()

    @classmethod
    def from_config(
        cls,
        config: MethodConfig,
        references: ReferenceSet,
        r0: float | None,
        env_id: str,
        profile: np.ndarray | None = None,
    ) -> IPD:
        if r0 is None:
            raise NpscoError("method ipd needs a threshold r0")
        return cls(references, r0, config, env_id, profile)

    def bind(self, setup: TrainingSetup) -> None:
        super().bind(setup)
        self.margin_sum = np.zeros(setup.num_envs)
        self.num_iterations = setup.num_iterations

    def begin_iteration(self, iteration: int) -> None:
        self.r0_now = warmup_threshold(self.r0, self.config.r0_warmup, iteration, self.num_iterations)

    def threshold(self, episode_step: np.ndarray) -> np.ndarray | float:
        """The threshold at this step of each env's episode: `r0_now`, times the references' profile at that step
        with `r0_profile=reference`."""
        if self.profile is None:
            return self.r0_now
        return self.r0_now * profile_at(self.profile, episode_step)

    def on_step(self, step: StepInfo) -> StepOutcome:
        _, u = self.novelty(step)
        r0 = self.last_threshold  # `threshold(step.episode_step)`, which novelty() just recorded
        if self.config.ipd_rule == "cumulative":
            violated, self.margin_sum = ipd_cumulative_violation(
                self.margin_sum, u, step.episode_step, r0, self.t_start, self.config.ipd_slack
            )
        else:
            violated = ipd_instant_violation(u, step.episode_step, r0, self.t_start)
        # the constraint's ends at its first checked step (an episode the env ended there is not the constraint's)
        first = step.episode_step == self.t_start + 1
        self.first_check_ends += int((violated & first & ~(step.terminated | step.truncated)).sum())
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
        out["novelty/r0"] = self.r0_now
        self._reset_counts()
        return out

    def _reset_counts(self) -> None:
        self.first_check_ends = 0

    def metadata(self) -> dict[str, Any]:
        out = super().metadata()
        if self.profile is not None:
            out["r0_profile_values"] = [round(float(v), 5) for v in self.profile]
        return out
