"""What every novelty method shares: a `NoveltyMethod` base that tracks, during the rollout, the running novelty of
each episode against the reference set, and logs it; and `make_method`, the registry of the methods."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from npsco.algos.ppo import Method, StepInfo
from npsco.config import MethodConfig, default_t_start
from npsco.errors import NpscoError
from npsco.novelty.references import NoveltyTracker, ReferenceSet

if TYPE_CHECKING:
    from npsco.algos.ppo import Trainer


class NoveltyMethod(Method):
    """Base of IPD, WSR, TNB, CTNB and CPO: the reference set, the threshold r0 and the per-episode running novelty.

    Subclasses call `self.novelty(step)` in `on_step` to get (d, u): the per-state distances (N, M) and the running
    novelty u_t = min_j mean_{t'<=t} d_j (N,); it also sets `self.constrained`, the (N,) mask of the envs whose
    episode is past t_S. Logged per iteration: `novelty/running_mean` (mean of u_t over the steps),
    `novelty/running_min` (min of u_t over steps after t_S), `novelty/episode_mean` (mean of u at the end of each
    episode), `novelty/below_r0_frac` (fraction of steps after t_S with u_t < r0).
    """

    def __init__(self, references: ReferenceSet, r0: float, config: MethodConfig, env_id: str):
        if not (np.isfinite(r0) and r0 > 0):
            raise NpscoError(f"r0 must be a positive number, got {r0!r}")
        self.references, self.r0, self.config = references, float(r0), config
        self.t_start = config.t_start if config.t_start is not None else default_t_start(env_id)
        self.trainer: Trainer | None = None
        self.tracker: NoveltyTracker | None = None
        self._reset_stats()

    def bind(self, trainer: "Trainer") -> None:
        super().bind(trainer)
        self.trainer = trainer
        self.references.check_compatible(trainer.obs_space, trainer.action_space, trainer.cfg.env_id)
        self.tracker = NoveltyTracker(self.references, trainer.cfg.num_envs, self.config.metric)

    def novelty(self, step: StepInfo) -> tuple[np.ndarray, np.ndarray]:
        action = step.mean_action if self.config.novelty_action == "mean" else step.action
        std = np.exp(self.trainer.agent.actor_logstd.detach().numpy().reshape(-1)) if self.config.metric == "wasserstein2" else None
        d, u = self.tracker.update(step.obs, action, std)
        self.constrained = step.episode_step > self.t_start  # the envs past t_S, where the constraint applies
        # per step only keep u and where the constraint applies; the statistics are computed once per iteration
        self._u_steps.append(u)
        self._constrained_steps.append(self.constrained)
        self._last_u = u
        return d, u

    def end_episodes(self, done: np.ndarray) -> None:
        self._episode_u.extend(self._last_u[done].tolist())
        self.tracker.reset(done)

    def iteration_metrics(self) -> dict[str, float]:
        u = np.stack(self._u_steps) if self._u_steps else np.zeros((0, 0))
        active = u[np.stack(self._constrained_steps)] if self._u_steps else u.ravel()
        out = {
            "novelty/running_mean": float(u.mean()) if u.size else 0.0,
            "novelty/running_min": float(active.min()) if active.size else float("nan"),
            "novelty/episode_mean": float(np.mean(self._episode_u)) if self._episode_u else float("nan"),
            "novelty/below_r0_frac": float((active < self.r0).mean()) if active.size else 0.0,
            "novelty/r0": self.r0,
        }
        self._reset_stats()
        return out

    def _reset_stats(self) -> None:
        self._u_steps: list[np.ndarray] = []
        self._constrained_steps: list[np.ndarray] = []
        self._episode_u: list[float] = []
        self._last_u = np.zeros(0)

    def metadata(self) -> dict[str, Any]:
        return {**self.config.to_dict(), "r0": self.r0, "t_start": self.t_start, "references": list(self.references.names)}


def make_method(config: MethodConfig, references: ReferenceSet, r0: float | None, env_id: str) -> Method:
    """The `Method` object of `config.method`, bound to `references` and threshold `r0`."""
    config.validate()
    if config.method == "ppo":
        return Method()
    if r0 is None:
        raise NpscoError(f"method {config.method} needs a threshold r0")
    if config.method == "ipd":
        from npsco.algos.ipd import IPD

        return IPD(references, r0, config, env_id)
    if config.method == "wsr":
        from npsco.algos.wsr import WSR

        return WSR(references, r0, config, env_id)
    if config.method in ("tnb", "ctnb"):
        from npsco.algos.tnb import CTNB, TNB

        return (TNB if config.method == "tnb" else CTNB)(references, r0, config, env_id)
    if config.method == "cpo":
        from npsco.algos.cpo import CPO

        return CPO(references, r0, config, env_id)
    raise NpscoError(f"method {config.method!r} is not available in this version")
