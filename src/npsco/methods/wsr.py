"""Weighted Sum Reward (paper Sec. 3.3 and App. C): PPO on the task reward plus a weighted, shaped novelty reward.

    r_train,t = r_t + w * shape(u_t),    u_t = min_j mean_{t' <= t} d_j(s_t')

u_t is the episode's running novelty (`NoveltyMethod.novelty`), as in the authors' code (which used the running mean
from the first step, minus a threshold of 0). The paper writes the intrinsic reward as min_j D(theta, theta_j); the
running mean is the per-episode estimate of it, so the reward is not Markovian in the state. Only the training reward
changes: the reported (and evaluated) return stays the task's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npsco.errors import NpscoError
from npsco.methods.novelty import NoveltyMethod
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import ReferenceSet
from npsco.ppo.hooks import RolloutShaping, RolloutSteps
from npsco.ppo.rollout import RolloutSummary
from npsco.tasks import task_family


@dataclass
class WSROptions:
    """WSR's own settings."""

    wsr_weight: float | None = None
    """Weight of the shaped novelty reward. None: the task's default (10 on the maze as the paper, 0.5 on MuJoCo as the
    authors' README: `default_wsr_weight`)."""
    wsr_shape: str = "linear"
    """Shape of the novelty reward: `linear` (u), `exp` (exp(u)), `neg_exp` (-exp(-u)) (paper Sec. 3.2)."""

    def validate(self) -> None:
        if self.wsr_shape not in ("linear", "exp", "neg_exp"):
            raise NpscoError("invalid method configuration: wsr_shape must be linear, exp or neg_exp")


def default_wsr_weight(env_id: str) -> float:
    """10 on the maze (paper Fig. 2), 0.5 elsewhere (authors' README for MuJoCo)."""
    return 10.0 if task_family(env_id) == "maze" else 0.5


def wsr_shape(u: np.ndarray, shape: str) -> np.ndarray:
    """The paper's three shapes of the novelty reward: `linear` u, `exp` exp(u), `neg_exp` -exp(-u)."""
    u = np.asarray(u, np.float64)
    if shape == "linear":
        return u
    if shape == "exp":
        return np.exp(u)
    if shape == "neg_exp":
        return -np.exp(-u)
    raise ValueError(f"unknown WSR shape {shape!r}; expected linear, exp or neg_exp")


class WSR(NoveltyMethod):
    """PPO trained on r_t + w * shape(u_t). Logs `wsr/bonus_mean`: the mean of w * shape(u_t) over the iteration's
    steps; `wsr/weight`."""

    name = "wsr"
    Options = WSROptions

    def __init__(self, references: ReferenceSet, r0: float, config: MethodConfig, env_id: str):
        super().__init__(references, r0, config, env_id)
        options: WSROptions = config.options
        self.shape = options.wsr_shape
        self.weight = options.wsr_weight if options.wsr_weight is not None else default_wsr_weight(env_id)
        self._bonus_sum, self._bonus_n = 0.0, 0

    def shape_rollout(self, steps: RolloutSteps) -> RolloutShaping:
        _, u, _ = self.rollout_novelty(steps)
        bonus = self.weight * wsr_shape(u, self.shape)
        self._bonus_sum += float(bonus.sum())
        self._bonus_n += bonus.size
        return RolloutShaping(train_reward=steps.reward + bonus)

    def iteration_metrics(self, rollout: RolloutSummary) -> dict[str, float]:
        out = super().iteration_metrics(rollout)
        out["wsr/bonus_mean"] = self._bonus_sum / max(self._bonus_n, 1)
        out["wsr/weight"] = self.weight
        self._bonus_sum, self._bonus_n = 0.0, 0
        return out

    def metadata(self) -> dict:
        return {**super().metadata(), "wsr_weight": self.weight}
