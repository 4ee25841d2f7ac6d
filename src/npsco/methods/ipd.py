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

from dataclasses import dataclass
from typing import Any

import numpy as np

from npsco.errors import NpscoError
from npsco.methods.base import MethodContext
from npsco.methods.novelty import NoveltyMethod
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import ReferenceSet
from npsco.ppo.hooks import StepInfo, StepOutcome, TrainingSetup
from npsco.ppo.rollout import RolloutSummary


@dataclass
class IPDOptions:
    """IPD's own settings."""

    ipd_rule: str = "instant"
    """Termination rule: `instant` (paper Alg. 1: end the episode at the first step t > t_S where the running
    novelty < r0) or `cumulative` (authors' code: sum (u_t - r0) over t > t_S, end when the sum <= -ipd_slack)."""
    ipd_slack: float = 0.1
    """Slack of the `cumulative` rule."""
    r0_warmup: float = 0.0
    """The threshold rises linearly from 0 at the first iteration to r0 at this fraction of the training budget, then
    stays at r0 (0: the full r0 from the start, as the paper)."""
    r0_profile: str = "constant"
    """`constant` (r0 at every step, as the paper) or `reference`: at episode step t the threshold is r0 x rho(t),
    where rho(t) is the references' own mean pairwise *running* distance at step t of their deterministic episodes
    divided by its whole-episode value (threshold.json, `profile`), so that the references, compared with each other,
    meet it on average at every step."""

    def validate(self) -> None:
        checks = [
            (self.ipd_rule in ("instant", "cumulative"), "ipd_rule must be instant or cumulative"),
            (self.ipd_slack >= 0, "ipd_slack must be >= 0"),
            (0 <= self.r0_warmup <= 1, "r0_warmup must be in [0, 1] (a fraction of the training budget)"),
            (self.r0_profile in ("constant", "reference"), "r0_profile must be constant or reference"),
        ]
        for ok, message in checks:
            if not ok:
                raise NpscoError(f"invalid method configuration: {message}")


def ipd_instant_violation(u: np.ndarray, active: np.ndarray, r0: float | np.ndarray) -> np.ndarray:
    """Paper Alg. 1: violated where the constraint is `active` (the episode's step t > t_S) and u_t < r0 (a number,
    or one threshold per env)."""
    return active & (u < r0)


def ipd_cumulative_violation(
    margin_sum: np.ndarray, u: np.ndarray, active: np.ndarray, r0: float | np.ndarray, slack: float
) -> tuple[np.ndarray, np.ndarray]:
    """Authors' rule: margin_sum += (u_t - r0) where the constraint is `active` (t > t_S); violated where
    margin_sum <= -slack.

    Returns (violated, the new margin_sum).
    """
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
    Options = IPDOptions

    def __init__(
        self, references: ReferenceSet, r0: float, config: MethodConfig, env_id: str, profile: np.ndarray | None = None
    ):
        super().__init__(references, r0, config, env_id)
        self.options: IPDOptions = config.options
        if (self.options.r0_profile == "reference") != (profile is not None):
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
    def from_config(cls, config: MethodConfig, context: MethodContext) -> IPD:
        if context.r0 is None:
            raise NpscoError("method ipd needs a threshold r0")
        profile = context.r0_profile if cls.uses_profile(config) else None
        return cls(context.references, context.r0, config, context.env_id, profile)

    @classmethod
    def uses_profile(cls, config: MethodConfig) -> bool:
        return bool(config.options.r0_profile == "reference")

    def bind(self, setup: TrainingSetup) -> None:
        super().bind(setup)
        self.margin_sum = np.zeros(setup.num_envs)
        self.num_iterations = setup.num_iterations

    def begin_iteration(self, iteration: int) -> None:
        self.r0_now = warmup_threshold(self.r0, self.options.r0_warmup, iteration, self.num_iterations)

    def threshold(self, episode_step: np.ndarray) -> np.ndarray | float:
        """The threshold at this step of each env's episode: `r0_now`, times the references' profile at that step
        with `r0_profile=reference`."""
        if self.profile is None:
            return self.r0_now
        return self.r0_now * profile_at(self.profile, episode_step)

    def on_step(self, step: StepInfo) -> StepOutcome | None:
        _, u = self.novelty(step)
        r0 = self.last_threshold  # `threshold(step.episode_step)`, which novelty() just recorded
        if self.options.ipd_rule == "cumulative":
            violated, self.margin_sum = ipd_cumulative_violation(
                self.margin_sum, u, self.constrained, r0, self.options.ipd_slack
            )
        else:
            violated = ipd_instant_violation(u, self.constrained, r0)
        # most steps end nothing: no outcome then (every numpy call counts here; count_nonzero is the cheapest test)
        if not np.count_nonzero(violated):
            return None
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

    def state(self) -> dict[str, Any]:
        return {**super().state(), "margin_sum": self.margin_sum.copy()}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.margin_sum = state["margin_sum"]

    def metadata(self) -> dict[str, Any]:
        out = super().metadata()
        if self.profile is not None:
            out["r0_profile_values"] = [round(float(v), 5) for v in self.profile]
        return out
