"""A Lagrangian novelty constraint: PPO that must stay at least r0 away from every policy it avoids, each such
constraint relaxed by a multiplier that starts at 0 (plain PPO) and grows only while the constraint is violated
(SIPO, Fu et al., NeurIPS 2023, with one multiplier per reference; DOMiNO, Zahavy et al., ICLR 2023, for the optional
return constraint). No episode is ever cut: an infeasible policy keeps its task reward and gets a gradient out.

Constraint j: D_j >= target = (1 + margin) r0, D_j the rollout's distance to the j-th avoided policy. After every
rollout each multiplier takes a dual-ascent step on the normalised violation,

    lambda_j <- clip(lambda_j + lr (target - D_j) / target, 0, lambda_max),

(with `lagrangian_multipliers=nearest`, one multiplier for the nearest policy, D = min_j D_j), and the update maximises
PPO's objective plus sum_j lambda_j D_j / target. How D_j and its gradient are measured depends on the metric:

- action distances (`deterministic`, the paper's; the default): D_j = the batch's mean of ||clip(mu(s_t)) - mu_j(s_t)||
  over its states, the quantity the paper's novelty averages. Its gradient is exact: the term -sum_j lambda_j D_j /
  target is added to PPO's loss as a function of the policy's own mean actions at the batch's states
  (`LagrangianTerm`, a `MeanActionTerm`), so the mean is pushed away from the avoided policies' actions where it
  matters, whatever action noise was sampled.
- `state`: D_j = the MMD between the states of the rollout and those the j-th policy visits
  (`npsco.novelty.states`). Its gradient goes through the states the policy reaches, so it is a reward: a `novelty`
  stream (own critic, own GAE) whose reward at s_t is sum_j (lambda_j / Lambda) w_j . (phi(s_t) - mu_prev), the
  witness of the distance (w_j from the previous rollout's mean embedding mu_prev), and PPO's advantage is
  A_task / std + Lambda A_novelty / std (each standardised over the batch, Lambda = sum_j lambda_j).

With `lagrangian_joint` (action distance only), both at once: the action term with its multipliers lambda_j and the
state stream with its own kappa_j, each updated from its own distance against its own target ((1 + margin) x r0 and
(1 + margin) x the state threshold).

With `return_alpha` a, a second multiplier nu >= 0 guards the return: after each rollout
nu <- max(0, nu + lr (a R* - R) / |R*|), R the rollout's mean episode return, R* the median final return of the
references, and every lambda_j acts as lambda_j / (1 + nu): the novelty pressure eases while the return is below
a R*. With `lagrangian_constrain=return` the return is the only constraint (DOMiNO's form): no lambda_j, the term is
-w D_near / r0 with D_near the batch's action distance to the nearest avoided policy (maximised, no target) and
w = 1 / (1 + nu), so the slack above a R* goes to novelty until the return binds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from npsco.errors import NpscoError
from npsco.methods.base import MethodContext
from npsco.methods.novelty import NoveltyMethod
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import ReferenceSet
from npsco.novelty.states import StateDistance, witness
from npsco.ppo.hooks import RolloutShaping, RolloutSteps, TrainingSetup
from npsco.ppo.learner import Learner
from npsco.ppo.rollout import Batch, RolloutSummary

MULTIPLIERS = ("per_reference", "nearest")
CONSTRAINTS = ("distance", "return")


@dataclass
class LagrangianOptions:
    """The Lagrangian method's own settings."""

    lagrangian_lr: float = 0.1
    """Step of the multipliers' dual ascent, per rollout, on the violation normalised by the target."""
    lagrangian_margin: float = 0.1
    """The constraint's target is (1 + margin) x r0: the policy aims a little past the threshold, so that its
    deterministic episodes, whose states differ from the rollout's, still meet r0."""
    lagrangian_multipliers: str = "per_reference"
    """`per_reference` (one multiplier per avoided policy, SIPO's) or `nearest` (one, on the nearest policy)."""
    lagrangian_max: float = 100.0
    """Upper bound of each multiplier (the novelty term at most this many times the scale of PPO's surrogate)."""
    return_alpha: float | None = None
    """With a number a: the return constraint "rollout return >= a x the references' median final return" (DOMiNO's),
    whose multiplier eases the novelty pressure while it is violated. None: no return constraint."""
    lagrangian_constrain: str = "distance"
    """What is constrained: `distance` (each avoided policy's distance >= the target; multipliers lambda_j) or `return`
    (DOMiNO's form: the action distance to the nearest avoided policy is maximised with weight 1 / (1 + nu), subject to
    the return constraint, which `return_alpha` must then set; the margin is not used)."""
    lagrangian_joint: bool = False
    """With the action distance: also constrain the visited-state distance to each avoided policy, with its own
    multipliers and target (1 + margin) x the state threshold (the references' mean pairwise state distance, scaled
    as r0 is), so that the policy is pushed away in what it does and in where it goes."""

    def validate(self) -> None:
        checks = [
            (self.lagrangian_lr > 0, "lagrangian_lr must be > 0"),
            (self.lagrangian_margin >= 0, "lagrangian_margin must be >= 0"),
            (self.lagrangian_multipliers in MULTIPLIERS, f"lagrangian_multipliers must be one of {MULTIPLIERS}"),
            (self.lagrangian_max > 0, "lagrangian_max must be > 0"),
            (self.return_alpha is None or 0 < self.return_alpha, "return_alpha must be > 0 (or None)"),
            (self.lagrangian_constrain in CONSTRAINTS, f"lagrangian_constrain must be one of {CONSTRAINTS}"),
            (
                self.lagrangian_constrain != "return" or self.return_alpha is not None,
                "lagrangian_constrain=return needs return_alpha (the return constraint's a)",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise NpscoError(f"invalid method configuration: {message}")


def dual_step(multipliers: np.ndarray, distances: np.ndarray, target: float, lr: float, cap: float) -> np.ndarray:
    """One dual-ascent step: lambda_j + lr (target - D_j) / target, clipped to [0, cap]."""
    return np.clip(multipliers + lr * (target - distances) / target, 0.0, cap)


def return_step(nu: float, rollout_return: float, best: float, alpha: float, lr: float) -> float:
    """The return constraint's multiplier step: max(0, nu + lr (alpha R* - R) / |R*|)."""
    return max(0.0, nu + lr * (alpha * best - rollout_return) / max(abs(best), 1e-8))


def distance_loss(
    mean: np.ndarray, low: np.ndarray, high: np.ndarray, ref_actions: np.ndarray, weights: np.ndarray, target: float
) -> tuple[float, np.ndarray]:
    """The Lagrangian term of one minibatch and its gradient: L = -sum_j w_j mean_b ||clip(m_b) - a_bj|| / target.

    `mean` (B, A) the policy's raw mean actions, `ref_actions` (B, M, A) the avoided policies' (clipped) actions at
    the same states, `weights` (M,) the multipliers. dL/dm_b = -sum_j w_j (clip(m_b) - a_bj) / (|..| B target) where m_b
    lies inside the action bounds (clipping passes no gradient outside); a zero distance contributes no gradient.
    """
    clipped = np.clip(mean, low, high)
    diff = clipped[:, None, :] - ref_actions  # (B, M, A)
    dist = np.sqrt(np.einsum("bma,bma->bm", diff, diff))
    B = mean.shape[0]
    loss = -float((dist.mean(0) * weights).sum()) / target
    unit = np.divide(diff, dist[..., None], out=np.zeros_like(diff), where=dist[..., None] > 0)
    grad = -np.einsum("m,bma->ba", weights, unit) / (B * target)
    grad *= (mean > low) & (mean < high)
    return loss, grad.astype(np.float32)


class LagrangianTerm:
    """The action-distance Lagrangian term of one update (`npsco.ppo.rollout.MeanActionTerm`): the avoided policies'
    actions at the batch's states, the multipliers, the target."""

    def __init__(self, ref_actions: np.ndarray, weights: np.ndarray, target: float, low: np.ndarray, high: np.ndarray):
        self.ref_actions, self.weights, self.target, self.low, self.high = ref_actions, weights, target, low, high

    def __call__(self, index: np.ndarray, mean: np.ndarray) -> tuple[float, np.ndarray]:
        return distance_loss(mean, self.low, self.high, self.ref_actions[index], self.weights, self.target)


class Lagrangian(NoveltyMethod):
    """PPO with a Lagrangian novelty constraint per avoided policy (module docstring). Logs `lagrangian/lambda_max`,
    `lagrangian/lambda_sum` (the multipliers after the rollout's dual step), `lagrangian/distance_min` (min_j D_j of
    the rollout), `lagrangian/violation` (target - that, / target), `lagrangian/loss` (the term's mean value, action
    distances), `lagrangian/return_multiplier` (with a return constraint), `lagrangian/state_lambda_sum`,
    `lagrangian/state_distance_min` and `lagrangian/state_violation` (with `lagrangian_joint`),
    `lagrangian/novelty_weight` (1 / (1 + nu), with `lagrangian_constrain=return`), and the running novelty
    (`novelty/*`, action distances)."""

    name = "lagrangian"
    Options = LagrangianOptions
    keeps_reference_actions = True  # the term needs the avoided policies' actions at every state of the batch

    def __init__(
        self,
        references: ReferenceSet,
        r0: float,
        config: MethodConfig,
        env_id: str,
        states: StateDistance | None = None,
        reference_return: float | None = None,
        state_r0: float | None = None,
    ):
        super().__init__(references, r0, config, env_id)
        self.options: LagrangianOptions = config.options
        self.state_mode = config.metric == "state"  # the state distance alone
        self.joint = self.options.lagrangian_joint  # the action distance and the state distance
        self.by_return = self.options.lagrangian_constrain == "return"
        self.with_states = self.state_mode or self.joint
        if self.with_states and (states is None or len(states.embeddings) != len(references)):
            raise NpscoError("the state distance needs the visited-state embedding of every avoided policy")
        if self.joint and not (state_r0 is not None and np.isfinite(state_r0) and state_r0 > 0):
            raise NpscoError(f"lagrangian_joint needs a positive state threshold, got {state_r0!r}")
        if self.options.return_alpha is not None and reference_return is None:
            raise NpscoError("return_alpha needs the references' final returns (a population's references)")
        self.states, self.reference_return = states, reference_return
        self.streams = ("novelty",) if self.with_states else ()
        margin = 0.0 if self.by_return else self.options.lagrangian_margin
        self.target = (1.0 + margin) * self.r0
        self.state_target = (1.0 + margin) * state_r0 if self.joint and state_r0 is not None else None
        size = 1 if self.options.lagrangian_multipliers == "nearest" or self.by_return else len(references)
        # the multipliers of the method's own distance (actions, or states with metric=state); with `joint`, the
        # state distance's own; with constrain=return none moves (the novelty weight is 1 / (1 + nu))
        self.multipliers = np.ones(1) if self.by_return else np.zeros(size)
        self.state_multipliers = np.zeros(size if self.joint else 0)
        self.return_multiplier = 0.0

    @classmethod
    def from_config(cls, config: MethodConfig, context: MethodContext) -> Lagrangian:
        if context.r0 is None:
            raise NpscoError("method lagrangian needs a threshold r0")
        returns = context.reference_returns
        best = float(np.median(returns)) if returns else None
        return cls(context.references, context.r0, config, context.env_id, context.states, best, context.state_r0)

    @classmethod
    def check_config(cls, config: MethodConfig) -> None:
        if config.metric == "wasserstein2":
            raise NpscoError("method lagrangian measures deterministic action distances or states (metric=state)")
        options: LagrangianOptions = config.options
        if config.metric == "state" and (options.lagrangian_joint or options.lagrangian_constrain == "return"):
            raise NpscoError(
                "lagrangian_joint and lagrangian_constrain=return work on the action distance (metric=deterministic)"
            )
        if options.lagrangian_joint and options.lagrangian_constrain == "return":
            raise NpscoError("lagrangian_joint constrains distances: it does not go with lagrangian_constrain=return")

    @classmethod
    def uses_states(cls, config: MethodConfig) -> bool:
        return config.metric == "state" or bool(config.options.lagrangian_joint)

    def bind(self, setup: TrainingSetup) -> None:
        super().bind(setup)
        self.low = setup.action_space.low.astype(np.float32)
        self.high = setup.action_space.high.astype(np.float32)
        T, N, M, A = setup.num_steps, setup.num_envs, len(self.references), setup.action_space.shape[0]
        # the avoided policies' actions at the rollout's states (the action distance's term)
        self.ref_actions = np.zeros((0 if self.state_mode else T, N, M, A), np.float32)
        self.previous_embedding: np.ndarray | None = None
        self._reset_rollout()

    def _reset_rollout(self) -> None:
        self._distance_sum = np.zeros(len(self.references))
        self._embedding_sum = np.zeros(self.states.embeddings.shape[1]) if self.states is not None else None
        self._steps = 0

    # --------------------------------------------------------------------------------------------- the rollout
    def shape_rollout(self, steps: RolloutSteps) -> RolloutShaping:
        T, N = steps.reward.shape
        streams = {}
        if self.with_states:
            assert self.states is not None and self._embedding_sum is not None
            phi = self.states.embed(steps.obs.reshape(T * N, -1))
            self._embedding_sum += phi.sum(0)
            streams["novelty"] = self._state_reward(phi, self.state_lambdas).reshape(T, N)
        if not self.state_mode:
            d, _, ref_actions = self.rollout_novelty(steps)
            assert ref_actions is not None  # keeps_reference_actions
            self.ref_actions = ref_actions
            self._distance_sum += d.reshape(T * N, -1).sum(0)
        self._steps += T * N
        return RolloutShaping(streams=streams)

    @property
    def state_lambdas(self) -> np.ndarray:
        """The multipliers of the state distance (the method's own with metric=state, the second set with joint)."""
        return self.multipliers if self.state_mode else self.state_multipliers

    def _state_reward(self, phi: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
        """The novelty stream's reward at these states: the multipliers' mix of the distances' witnesses."""
        total = multipliers.sum()
        if self.previous_embedding is None or total <= 0:
            return np.zeros(len(phi), np.float32)
        assert self.states is not None
        w = witness(self.previous_embedding, self.states.embeddings)  # (M, F)
        if len(multipliers) == 1:  # nearest: the witness of the nearest avoided policy
            w = w[[int(np.argmin(self.states.distances(self.previous_embedding)))]]
        mix = (multipliers / total) @ w
        return ((phi - self.previous_embedding) @ mix).astype(np.float32)

    def end_episodes(self, done: np.ndarray) -> None:
        if not self.state_mode:  # the state distance keeps no per-episode novelty
            super().end_episodes(done)

    # ---------------------------------------------------------------------------------------------- the update
    def update(self, learner: Learner, batch: Batch) -> dict[str, float]:
        out: dict[str, float] = {}
        state_d = None
        if self.with_states:  # the MMD of the rollout's states; its mean embedding steers the next rewards
            assert self.states is not None and self._embedding_sum is not None
            self.previous_embedding = self._embedding_sum / max(self._steps, 1)
            state_d = self.states.distances(self.previous_embedding)
        # D_j of the method's own distance: the states', or the rollout's mean distance of the mean action to j's
        distances = state_d if self.state_mode else self._distance_sum / max(self._steps, 1)
        assert distances is not None
        if not self.by_return:
            self.multipliers = self._dual_step(self.multipliers, distances, self.target)
        if self.joint:
            assert state_d is not None and self.state_target is not None
            self.state_multipliers = self._dual_step(self.state_multipliers, state_d, self.state_target)
        ease = 1.0 + self.return_multiplier  # the return constraint eases every novelty weight
        stream = "task"
        if self.with_states:  # PPO's advantage: A_task / std + Lambda A_novelty / std
            stream = "combined"
            batch.advantages["combined"] = _standardised(batch.advantages["task"]) + float(
                self.state_lambdas.sum() / ease
            ) * _standardised(batch.advantages["novelty"])
        term = None
        if not self.state_mode:  # the action term, differentiated through the policy's mean actions
            weights = self.multipliers / ease
            if len(weights) == 1:  # nearest: the multiplier acts on the nearest policy at each state
                weights = np.where(np.arange(len(distances)) == np.argmin(distances), weights[0], 0.0)
            T, N, M, A = self.ref_actions.shape
            term = LagrangianTerm(self.ref_actions.reshape(T * N, M, A), weights, self.target, self.low, self.high)
        out.update(learner.ppo_update(batch, stream, term=term))
        if term is not None:
            with torch.no_grad():  # the term's value at the updated policy, over the whole batch
                mean = learner.agent.actor_mean(batch.obs).numpy()
            out["lagrangian/loss"] = distance_loss(
                mean, self.low, self.high, term.ref_actions, term.weights, self.target
            )[0]
        out.update(
            {
                "lagrangian/lambda_max": float(self.multipliers.max()),
                "lagrangian/lambda_sum": float(self.multipliers.sum()),
                "lagrangian/distance_min": float(distances.min()),
                "lagrangian/violation": float((self.target - distances.min()) / self.target),
            }
        )
        if self.joint:
            assert state_d is not None and self.state_target is not None
            out["lagrangian/state_lambda_sum"] = float(self.state_multipliers.sum())
            out["lagrangian/state_distance_min"] = float(state_d.min())
            out["lagrangian/state_violation"] = float((self.state_target - state_d.min()) / self.state_target)
        if self.by_return:
            out["lagrangian/novelty_weight"] = 1.0 / ease
        self._reset_rollout()
        return out

    def _dual_step(self, multipliers: np.ndarray, distances: np.ndarray, target: float) -> np.ndarray:
        """`dual_step` on each avoided policy's distance, or on the nearest one's with a single multiplier."""
        constrained = distances if len(multipliers) > 1 else distances.min(keepdims=True)
        opt = self.options
        return dual_step(multipliers, constrained, target, opt.lagrangian_lr, opt.lagrangian_max)

    def iteration_metrics(self, rollout: RolloutSummary) -> dict[str, float]:
        out = {} if self.state_mode else super().iteration_metrics(rollout)
        if self.options.return_alpha is not None and rollout.episodes:
            assert self.reference_return is not None  # checked in __init__
            self.return_multiplier = return_step(
                self.return_multiplier,
                float(np.mean(rollout.returns)),
                self.reference_return,
                self.options.return_alpha,
                self.options.lagrangian_lr,
            )
            out["lagrangian/return_multiplier"] = self.return_multiplier
        out["lagrangian/target"] = self.target
        return out

    def metadata(self) -> dict[str, Any]:
        out = {**super().metadata(), "target": self.target}
        if self.state_target is not None:
            out["state_target"] = self.state_target
        return out

    def state(self) -> dict[str, Any]:
        out = {
            **super().state(),
            "multipliers": self.multipliers.copy(),
            "state_multipliers": self.state_multipliers.copy(),
            "return_multiplier": self.return_multiplier,
        }
        if self.previous_embedding is not None:
            out["previous_embedding"] = self.previous_embedding.copy()
        return out

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.multipliers, self.return_multiplier = state["multipliers"], float(state["return_multiplier"])
        self.state_multipliers = state.get("state_multipliers", np.zeros(0))
        self.previous_embedding = state.get("previous_embedding")


def _standardised(x: torch.Tensor) -> torch.Tensor:
    """(x - mean) / std over the batch (std + 1e-8)."""
    return (x - x.mean()) / (x.std() + 1e-8)
