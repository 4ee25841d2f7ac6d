"""What every novelty method shares: a `NoveltyMethod` base that tracks, during the rollout, the running novelty of
each episode against the reference set, and logs it."""

from __future__ import annotations

from typing import Any

import numpy as np

from npsco.errors import NpscoError
from npsco.methods.base import Method, MethodContext
from npsco.methods.settings import MethodConfig
from npsco.novelty.metrics import ACTION_METRICS
from npsco.novelty.references import NoveltyTracker, ReferenceSet
from npsco.ppo.hooks import RolloutSteps, StepInfo, TrainingSetup
from npsco.ppo.rollout import RolloutSummary
from npsco.tasks import default_t_start


class NoveltyMethod(Method):
    """Base of IPD, WSR, TNB, CTNB and CPO: the reference set, the threshold r0 and the per-episode running novelty.

    A method that must act during the rollout (IPD ends episodes) calls `self.novelty(step)` in `on_step` to get
    (d, u): the per-state distances (N, M) and the running novelty u_t = min_j mean_{t'<=t} d_j (N,); it also sets
    `self.constrained`, the (N,) mask of the envs whose episode is past t_S. A method that only shapes rewards does it
    after the rollout, for all its steps at once (`rollout_novelty` in `shape_rollout`): the same numbers, the
    references evaluated on the rollout's T x N states in one batched call instead of T small ones.

    Logged per iteration: `novelty/running_mean` (mean of u_t over the steps), `novelty/running_min` (min of u_t
    over steps after t_S), `novelty/episode_mean` (mean of u at the end of each episode), `novelty/below_r0_frac`
    (fraction of steps after t_S with u_t below the step's threshold, `threshold`).
    """

    keeps_reference_actions = False
    """Whether the tracker keeps the references' mean actions of the last step (`tracker.reference_actions`), for a
    method that needs them besides the distances (CPO): no second forward pass of the references."""

    def __init__(self, references: ReferenceSet, r0: float, config: MethodConfig, env_id: str):
        if not (np.isfinite(r0) and r0 > 0):
            raise NpscoError(f"r0 must be a positive number, got {r0!r}")
        self.references, self.r0, self.config = references, float(r0), config
        self.t_start = config.t_start if config.t_start is not None else default_t_start(env_id)
        self.tracker: NoveltyTracker | None = None
        # set by `novelty` at each step: the envs past t_S (where the constraint applies) and the step's threshold
        self.constrained = np.zeros(0, bool)
        self.last_threshold: np.ndarray | float = self.r0
        # the iteration's statistics: per step u, the threshold, where the constraint applies; u at episode ends
        self._u_steps: list[np.ndarray] = []
        self._threshold_steps: list[np.ndarray | float] = []
        self._constrained_steps: list[np.ndarray] = []
        self._episode_u: list[float] = []
        self._last_u = np.zeros(0)

    @classmethod
    def from_config(cls, config: MethodConfig, context: MethodContext) -> NoveltyMethod:
        if context.r0 is None:
            raise NpscoError(f"method {config.method} needs a threshold r0")
        return cls(context.references, context.r0, config, context.env_id)

    @classmethod
    def check_config(cls, config: MethodConfig) -> None:
        if config.metric == "state":
            raise NpscoError(
                f"method {config.method} compares actions: metric=state (visited states) is the lagrangian method's"
            )

    def bind(self, setup: TrainingSetup) -> None:
        self.references.check_compatible(setup.observation_space, setup.action_space, setup.env_id)
        self.tracker = NoveltyTracker(
            self.references,
            setup.num_envs,
            self.config.metric if self.config.metric in ACTION_METRICS else "deterministic",
            self.config.novelty_discount,
            self.keeps_reference_actions,
        )

    def threshold(self, episode_step: np.ndarray) -> np.ndarray | float:
        """The threshold at this step of each env's episode: r0 (IPD's can vary with the iteration and the step)."""
        return self.r0

    def novelty(self, step: StepInfo) -> tuple[np.ndarray, np.ndarray]:
        action = step.mean_action if self.config.novelty_action == "mean" else step.action
        std = step.action_std if self.config.metric == "wasserstein2" else None
        assert self.tracker is not None, "bind() first"
        d, u = self.tracker.update(step.obs, action, std)
        self.constrained = step.episode_step > self.t_start  # the envs past t_S, where the constraint applies
        self.last_threshold = self.threshold(step.episode_step)
        # per step only keep u, the threshold and where the constraint applies; the statistics come once per iteration
        self._u_steps.append(u)
        self._threshold_steps.append(self.last_threshold)  # a number, or one per env (broadcast once per iteration)
        self._constrained_steps.append(self.constrained)
        self._last_u = u
        return d, u

    def rollout_novelty(self, steps: RolloutSteps) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """`novelty` for every step of a rollout at once: (d (T, N, M), u (T, N), and with `keeps_reference_actions`
        the references' actions at every state (T, N, M, A), else None). Records the iteration's statistics."""
        assert self.tracker is not None, "bind() first"
        T, N = steps.reward.shape
        action = steps.mean_action if self.config.novelty_action == "mean" else steps.action
        obs, act = steps.obs.reshape(T * N, -1), action.reshape(T * N, -1)
        metric = self.tracker.metric
        std = steps.action_std if metric == "wasserstein2" else None
        ref_actions = None
        if self.keeps_reference_actions:
            actions, flat = self.references.actions_and_distances(obs, act, std, metric)  # (M, T N, A), (T N, M)
            ref_actions = actions.reshape(len(self.references), T, N, -1).transpose(1, 2, 0, 3)
        else:
            flat = self.references.distances(obs, act, std, metric)
        d = flat.reshape(T, N, -1)
        u = self.tracker.run(d, steps.done)
        self._u_steps = list(u)
        self._constrained_steps = list(steps.episode_step > self.t_start)
        self._threshold_steps = [self.threshold(e) for e in steps.episode_step]
        self._episode_u = u[steps.done].tolist()
        return d, u, ref_actions

    def end_episodes(self, done: np.ndarray) -> None:
        if self.on_step is None:  # the episodes' novelty comes with the whole rollout (`rollout_novelty`)
            return
        self._episode_u.extend(self._last_u[done].tolist())
        assert self.tracker is not None, "bind() first"
        self.tracker.reset(done)

    def iteration_metrics(self, rollout: RolloutSummary) -> dict[str, float]:
        # (concatenate, then reshape: several times faster than np.stack on a rollout's T small arrays)
        u = np.concatenate(self._u_steps).reshape(len(self._u_steps), -1) if self._u_steps else np.zeros((0, 0))
        mask = np.concatenate(self._constrained_steps).reshape(u.shape) if self._u_steps else np.zeros(u.shape, bool)
        active = u[mask]
        steps = self._threshold_steps
        if all(isinstance(th, float) for th in steps):  # a constant per step (the common case): no broadcast per step
            thresholds = np.array(steps, np.float64).reshape(-1, 1)
        else:
            thresholds = np.stack([np.broadcast_to(th, u.shape[1:]) for th in steps]) if steps else np.zeros(u.shape)
        below = (u < thresholds)[mask] if self._u_steps else active
        out = {
            "novelty/running_mean": float(u.mean()) if u.size else 0.0,
            "novelty/running_min": float(active.min()) if active.size else float("nan"),
            "novelty/episode_mean": float(np.mean(self._episode_u)) if self._episode_u else float("nan"),
            "novelty/below_r0_frac": float(below.mean()) if below.size else 0.0,
            "novelty/r0": self.r0,
        }
        self._reset_stats()
        return out

    def _reset_stats(self) -> None:
        self._u_steps = []
        self._threshold_steps = []
        self._constrained_steps = []
        self._episode_u = []
        self._last_u = np.zeros(0)

    def state(self) -> dict[str, Any]:
        """The running novelty of the episodes in progress (the tracker's sums and counts)."""
        assert self.tracker is not None, "bind() first"
        return {"tracker_sums": self.tracker._sums.copy(), "tracker_counts": self.tracker.counts.copy()}

    def load_state(self, state: dict[str, Any]) -> None:
        assert self.tracker is not None, "bind() first"
        self.tracker._sums, self.tracker.counts = state["tracker_sums"], state["tracker_counts"]

    def metadata(self) -> dict[str, Any]:
        return {
            **self.config.to_dict(),
            "r0": self.r0,
            "t_start": self.t_start,
            "references": list(self.references.names),
        }
