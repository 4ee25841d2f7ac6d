"""Constrained Policy Optimization (Achiam et al. 2017) with a novelty cost, the paper's CMDP baseline (Table 1).

Cost. Each step costs c_t = r0 - d_t, with d_t = min_j d_j(s_t) the distance to the nearest reference at this state
(not the running mean). The constraint is on the average per-step cost, undiscounted,

    J_C = E[c_t] <= cost_limit (0 by default),   i.e.   E[min_j d_j(s_t)] >= r0 - cost_limit,

estimated from the batch as the mean of c_t over its steps. Note min_j of per-step distances is not the paper's
novelty min_j of the running means: mean_t min_j d_j(s_t) <= min_j mean_t d_j(s_t) (a mean of minima is at most the
minimum of the means), so satisfying the CPO constraint implies the novelty constraint at the episode level, and it is
stricter when different states are nearest to different references. The per-step form is what a critic can learn:
c_t is a function of the current step (s_t and the policy's action there), the running mean of the history.

Centred cost stream. The cost critic learns the stream c_t - c_bar, with c_bar the previous batch's J_C (during the
first batch, the mean of its costs so far). J_C is a per-step average over episodes that end (goals, falls): by the
renewal-reward theorem it is E[episode cost] / E[episode length], the average cost of the continuing process that
restarts after each episode. For that criterion the right advantages are the differential ones, of c_t - J_C, and the
differential value of a fresh start is E[sum over an episode of (c_t - J_C)] = 0, so cutting the return at a
termination (value 0 afterwards, as GAE does) is exact in expectation for gamma = 1. Uncentred costs would instead
reward ending episodes early whenever c_t > 0 (fewer costly steps in the episode's sum), which lowers the sum but not
the average: e.g. falling sooner on Hopper.

Update, once per iteration, on the actor parameters theta (mean MLP and log-std), at the rollout policy theta_old:

    g = grad mean(ratio A_r),   b = grad L_C,   L_C = mean(ratio A_c) + J_dir(theta) - J_dir(theta_old),

ratio = pi_theta(a|s) / pi_old(a|s), with A_r the task GAE advantages normalised over the batch (scale-free: the step
does not depend on |g|) and A_c the GAE advantages of the centred cost stream (own critic, same gamma and lambda),
centred again over the batch but not scaled, since b is compared with J_C. L_C is the model of the change of J_C:
mean(ratio A_c) is the score-function part (performance-difference lemma: which states and actions the policy picks,
each step's cost held fixed); J_dir (`CPO.direct_cost`) is the part the score function cannot see, the cost's own
dependence on theta: with `novelty_action=mean`, d_t compares the policy's own mean action at s_t, which moves with
theta whatever action is sampled (without it, recovery steps can leave the cost rising). F is the Fisher matrix, the
Hessian of the mean KL(pi_old || pi_theta) over the batch at theta_old, used through products (F + damping I) v;
`conjugate_gradient` gives F^-1 g and F^-1 b; `cpo_step` solves max g.x s.t. x^T F x / 2 <= max_kl,
J_C - limit + b.x <= 0 (with its recovery step when no point of the trust region is feasible). A backtracking line
search (x, coef x, coef^2 x, ...) accepts the first step with mean KL <= max_kl, a change of L_C <= max(0, -c)
(c = J_C - limit: a feasible policy may spend its slack, an infeasible one must not get worse) and, in the cases with
a feasible point, a reward surrogate that does not decrease; if none passes, theta stays. Then the task and cost
critics train with PPO's Adam minibatch epochs on their value losses. No entropy bonus.

These quantities (surrogates, gradients, Fisher products, trial evaluations) come from `npsco.methods.cpo_problem`
(`CPOProblem`, in numpy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from npsco.errors import NpscoError
from npsco.methods.constrained import conjugate_gradient, cpo_step, set_flat_params
from npsco.methods.cpo_problem import CPOProblem, DirectCost, TrustRegionProblem
from npsco.methods.novelty import NoveltyMethod
from npsco.ppo.hooks import RolloutShaping, RolloutSteps, TrainingSetup
from npsco.ppo.learner import Learner
from npsco.ppo.rollout import Batch


@dataclass
class CPOOptions:
    """CPO's own settings."""

    cpo_max_kl: float = 0.01
    """Trust region: the bound delta on the batch's mean KL(pi_old || pi_new)."""
    cpo_damping: float = 0.1
    """Damping added to the Fisher-vector products, (F + damping I) v."""
    cpo_cg_iters: int = 10
    """Conjugate-gradient iterations for F^-1 g and F^-1 b."""
    cpo_backtrack_iters: int = 10
    """Line-search trials; trial i scales the step by cpo_backtrack_coef ** i."""
    cpo_backtrack_coef: float = 0.8
    """Line-search shrink factor."""
    cpo_cost_limit: float = 0.0
    """Limit d of the constraint J_C <= d, with J_C the batch's mean per-step cost r0 - min_j d_j(s_t); 0 means
    "mean novelty >= r0"."""

    def validate(self) -> None:
        checks = [
            (self.cpo_max_kl > 0, "cpo_max_kl must be > 0"),
            (self.cpo_damping > 0, "cpo_damping must be > 0 (the Fisher matrix can be singular)"),
            (self.cpo_cg_iters > 0, "cpo_cg_iters must be > 0"),
            (self.cpo_backtrack_iters > 0, "cpo_backtrack_iters must be > 0"),
            (0 < self.cpo_backtrack_coef < 1, "cpo_backtrack_coef must be in (0, 1)"),
        ]
        for ok, message in checks:
            if not ok:
                raise NpscoError(f"invalid method configuration: {message}")


def novelty_cost(d: np.ndarray, r0: float) -> np.ndarray:
    """Per-step cost c_t = r0 - min_j d_j(s_t) from the (N, M) distances to the M references."""
    return (r0 - d.min(axis=1)).astype(np.float32)


class CPO(NoveltyMethod):
    """CPO on the novelty cost (its critic on the centred stream). Logs `cpo/cost` (J_C, the batch's mean per-step
    cost), `cpo/case` (`cpo_step`'s case: 0 infeasible recovery, 1 infeasible with feasible points, 2 feasible with an
    active constraint, 3 TRPO step, 4 no cost gradient), `cpo/lambda`, `cpo/nu` (dual variables), `cpo/kl` (mean KL
    of the step taken, 0 if none), `cpo/step_accepted`, `cpo/backtracks`, `cpo/surrogate_change`,
    `cpo/cost_surrogate_change`, `losses/value_loss`."""

    name = "cpo"
    Options = CPOOptions
    streams = ("cost",)
    keeps_reference_actions = True  # the direct term needs the nearest reference's action at each state

    def bind(self, setup: TrainingSetup) -> None:
        super().bind(setup)
        self.action_low = setup.action_space.low.astype(np.float32)
        self.action_high = setup.action_space.high.astype(np.float32)
        self.cost_center: float | None = None
        """c_bar: the previous batch's J_C, subtracted from the cost stream (None during the first batch)."""
        self._reset_batch()

    def _reset_batch(self) -> None:
        self._cost_sum, self._cost_n = 0.0, 0
        self._nearest: dict[str, np.ndarray] = {}

    def shape_rollout(self, steps: RolloutSteps) -> RolloutShaping:
        d, _, ref_actions = self.rollout_novelty(steps)
        assert ref_actions is not None and self.references.std is not None  # keeps_reference_actions; references
        T, N, M = d.shape
        cost = novelty_cost(d.reshape(T * N, M), self.r0).reshape(T, N)
        self._cost_sum, self._cost_n = float(cost.sum()), cost.size
        # what the direct term needs: the nearest reference's action (and std) at s_t, and a_t if it is compared
        nearest = d.argmin(axis=2)
        self._nearest = {
            "actions": np.take_along_axis(ref_actions, nearest[..., None, None], axis=2)[:, :, 0].reshape(T * N, -1),
            "std": self.references.std[nearest].reshape(T * N, -1),
            "executed": steps.action.reshape(T * N, -1),
        }
        if self.cost_center is not None:
            center: np.ndarray | float = self.cost_center
        else:  # during the first batch: the mean of its costs up to and including each step
            center = (np.cumsum(cost.sum(axis=1)) / (N * np.arange(1, T + 1)))[:, None]
        return RolloutShaping(streams={"cost": (cost - center).astype(np.float32)})

    def state(self) -> dict[str, Any]:
        return {**super().state(), "cost_center": self.cost_center}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.cost_center = state["cost_center"]

    def update(self, learner: Learner, batch: Batch) -> dict[str, float]:
        cost = self._cost_sum / max(self._cost_n, 1)
        options: CPOOptions = self.config.options
        with learner.blas_threads():  # the actor's step in numpy, under the updates' BLAS threads
            problem = CPOProblem(learner.agent, batch, learner.cfg.norm_adv, options.cpo_damping, self.direct_cost())
            out = {"cpo/cost": cost, **self.policy_step(problem, cost)}
        self.cost_center = cost
        self._reset_batch()
        out.update(learner.fit_critics(batch))
        return out

    def direct_cost(self) -> DirectCost:
        """J_dir of the batch just collected (`DirectCost`): the mean over the batch of r0 - d(s_t; theta), with the
        states and each state's nearest reference j* held at the rollout's: the cost's own dependence on the policy.
        With `novelty_action=mean`, d compares the policy's clipped mean action at s_t (a function of theta); with
        `sample`, the executed a_t (a constant, so only the std of `wasserstein2` depends on theta). At theta_old it
        equals J_C."""
        nearest = self._nearest  # (T N, A) each, in the batch's order
        return DirectCost(
            self.r0,
            nearest["actions"],
            self.action_low,
            self.action_high,
            executed=nearest["executed"] if self.config.novelty_action != "mean" else None,
            ref_std=nearest["std"] if self.config.metric == "wasserstein2" else None,
        )

    def policy_step(self, problem: TrustRegionProblem, cost: float) -> dict[str, float]:
        """The CPO step of the actor on `problem` (the batch around theta_old), `cost` being J_C; returns the `cpo/*`
        metrics."""
        cfg: CPOOptions = self.config.options
        r_old, c_old, g, b = problem.gradients()
        Hinv_g = conjugate_gradient(problem.fisher_product, g, cfg.cpo_cg_iters)
        Hinv_b = conjugate_gradient(problem.fisher_product, b, cfg.cpo_cg_iters)
        c = cost - cfg.cpo_cost_limit
        x, info = cpo_step(g, b, c, Hinv_g, Hinv_b, cfg.cpo_max_kl)

        theta = problem.theta_old
        accepted, kl, d_r, d_c, trials = False, 0.0, 0.0, 0.0, 0
        for i in range(cfg.cpo_backtrack_iters):
            trials = i + 1
            theta = problem.theta_old + cfg.cpo_backtrack_coef**i * x
            new_r, new_c, kl = problem.evaluate(theta)
            d_r, d_c = new_r - r_old, new_c - c_old
            improves = d_r >= 0 or info.case <= 1  # without a feasible point, only the cost counts
            if all(map(math.isfinite, (kl, d_r, d_c))) and kl <= cfg.cpo_max_kl and d_c <= max(0.0, -c) and improves:
                accepted = True
                break
        if not accepted:
            theta, kl, d_r, d_c = problem.theta_old, 0.0, 0.0, 0.0
        set_flat_params(problem.params, theta)
        return {
            "cpo/case": float(info.case),
            "cpo/lambda": info.lam,
            "cpo/nu": info.nu,
            "cpo/kl": kl,
            "cpo/step_accepted": float(accepted),
            "cpo/backtracks": float(trials - 1 if accepted else trials),
            "cpo/surrogate_change": d_r,
            "cpo/cost_surrogate_change": d_c,
        }
