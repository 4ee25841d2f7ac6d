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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from npsco.errors import NpscoError
from npsco.methods.constrained import conjugate_gradient, cpo_step, flat_grad, get_flat_params, set_flat_params
from npsco.methods.novelty import NoveltyMethod
from npsco.ppo.agent import ActorCritic
from npsco.ppo.hooks import StepInfo, StepOutcome, TrainingSetup
from npsco.ppo.learner import Learner
from npsco.ppo.maths import normalize_advantages
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


def nearest_distance(
    own: torch.Tensor,
    ref_actions: torch.Tensor,
    own_std: torch.Tensor | None = None,
    ref_std: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per state, the distance to the nearest reference j*: ||a - mu_j*(s)|| (`deterministic`), or with the stds
    sqrt(||a - mu_j*(s)||^2 + ||std - std_j*||^2) (`wasserstein2`); `own` is the new policy's action term (N, A)."""
    sq = ((own - ref_actions) ** 2).sum(-1)
    if own_std is not None:
        assert ref_std is not None, "own_std needs ref_std"
        sq = sq + ((own_std - ref_std) ** 2).sum(-1)
    return torch.sqrt(sq.clamp_min(1e-12))


def gaussian_kl(
    mean_p: torch.Tensor, log_std_p: torch.Tensor, mean_q: torch.Tensor, log_std_q: torch.Tensor
) -> torch.Tensor:
    """KL(p || q) per state for diagonal Gaussians, summed over action dims:

    sum_i  log(s_q / s_p) + (s_p^2 + (m_p - m_q)^2) / (2 s_q^2) - 1/2
    """
    var_p, var_q = torch.exp(2 * log_std_p), torch.exp(2 * log_std_q)
    return (log_std_q - log_std_p + (var_p + (mean_p - mean_q) ** 2) / (2 * var_q) - 0.5).sum(-1)


class CPOProblem:
    """One CPO update's quantities on a batch, at the rollout policy theta_old: surrogates, KL, Fisher products."""

    def __init__(
        self,
        agent: ActorCritic,
        batch: Batch,
        norm_adv: bool,
        damping: float,
        direct_cost: Callable[[], torch.Tensor] | None = None,
    ):
        self.agent, self.damping, self.direct_cost = agent, damping, direct_cost
        self.params = agent.actor_parameters()
        self.obs, self.actions, self.old_logprob = batch.obs, batch.actions, batch.logprobs
        adv_r = batch.advantages["task"]
        self.adv_r = normalize_advantages(adv_r) if norm_adv else adv_r
        self.adv_c = batch.advantages["cost"] - batch.advantages["cost"].mean()
        with torch.no_grad():
            self.old_mean = agent.actor_mean(self.obs)
            self.old_log_std = agent.actor_logstd.detach().clone()
            self.old_direct = direct_cost() if direct_cost is not None else None

    def surrogates(self) -> tuple[torch.Tensor, torch.Tensor]:
        """At the actor's current parameters: the reward surrogate mean(ratio A_r) and the cost model

            L_C = mean(ratio A_c) + J_dir(theta) - J_dir(theta_old),

        the estimated change of J_C: the score-function term (which states and actions the policy picks, the cost held
        fixed) plus the direct term `direct_cost` (the cost's own dependence on theta at the batch's states), if any.
        """
        logprob, _, _ = self.agent.evaluate(self.obs, self.actions)
        ratio = torch.exp(logprob - self.old_logprob)
        cost_model = (ratio * self.adv_c).mean()
        if self.direct_cost is not None and self.old_direct is not None:  # both or neither
            cost_model = cost_model + (self.direct_cost() - self.old_direct)
        return (ratio * self.adv_r).mean(), cost_model

    def kl(self) -> torch.Tensor:
        """Mean over the batch of KL(pi_old || pi_theta) at the actor's current parameters."""
        mean = self.agent.actor_mean(self.obs)
        return gaussian_kl(self.old_mean, self.old_log_std, mean, self.agent.actor_logstd).mean()

    def fisher_product(self, v: torch.Tensor) -> torch.Tensor:
        """(F + damping I) v, with F the Hessian of the mean KL at theta_old (double backward)."""
        grad_kl = flat_grad(self.kl(), self.params, create_graph=True)
        return flat_grad(torch.dot(grad_kl, v), self.params) + self.damping * v


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
        self.action_low = torch.from_numpy(setup.action_space.low.astype(np.float32))
        self.action_high = torch.from_numpy(setup.action_space.high.astype(np.float32))
        self.cost_center: float | None = None
        """c_bar: the previous batch's J_C, subtracted from the cost stream (None during the first batch)."""
        self._reset_batch()

    def _reset_batch(self) -> None:
        self._cost_sum, self._cost_n = 0.0, 0
        self._nearest: dict[str, list[np.ndarray]] = {"actions": [], "std": [], "executed": []}

    def on_step(self, step: StepInfo) -> StepOutcome:
        d, _ = self.novelty(step)
        cost = novelty_cost(d, self.r0)
        self._cost_sum += float(cost.sum())
        self._cost_n += cost.size
        # what the direct term needs: the nearest reference's action (and std) at s_t, and a_t if it is compared
        nearest = d.argmin(axis=1)
        assert self.tracker is not None and self.tracker.reference_actions is not None  # keeps_reference_actions
        self._nearest["actions"].append(self.tracker.reference_actions[nearest, np.arange(len(nearest))])
        assert self.references.std is not None  # a CPO run has references
        self._nearest["std"].append(self.references.std[nearest])
        self._nearest["executed"].append(step.action)
        center = self.cost_center if self.cost_center is not None else self._cost_sum / self._cost_n
        return StepOutcome(streams={"cost": cost - np.float32(center)})

    def state(self) -> dict[str, Any]:
        return {**super().state(), "cost_center": self.cost_center}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.cost_center = state["cost_center"]

    def update(self, learner: Learner, batch: Batch) -> dict[str, float]:
        cost = self._cost_sum / max(self._cost_n, 1)
        out = {"cpo/cost": cost, **self.policy_step(learner.agent, batch, cost, learner.cfg.norm_adv)}
        self.cost_center = cost
        self._reset_batch()
        out.update(learner.fit_critics(batch))
        return out

    def direct_cost(self, agent: ActorCritic, obs: torch.Tensor) -> torch.Tensor:
        """J_dir(theta) = mean over the batch of r0 - d(s_t; theta), with the states and each state's nearest reference
        j* held at the rollout's: the cost's own dependence on the policy. With `novelty_action=mean`, d compares the
        policy's clipped mean action at s_t (a function of theta); with `sample`, the executed a_t (a constant, so only
        the std of `wasserstein2` depends on theta). At theta_old it equals J_C. `obs`: the batch's (normalised) obs."""
        n = obs.shape[0]
        refs = {k: torch.from_numpy(np.stack(v).reshape(n, -1)) for k, v in self._nearest.items()}
        if self.config.novelty_action == "mean":
            own = torch.clamp(agent.actor_mean(obs), self.action_low, self.action_high)
        else:
            own = refs["executed"]
        own_std = ref_std = None
        if self.config.metric == "wasserstein2":
            own_std, ref_std = agent.actor_logstd.exp().expand_as(own), refs["std"]
        return (self.r0 - nearest_distance(own, refs["actions"], own_std, ref_std)).mean()

    def policy_step(self, agent: ActorCritic, batch: Batch, cost: float, norm_adv: bool = True) -> dict[str, float]:
        """The CPO step of the actor from the batch, `cost` being J_C; returns the `cpo/*` metrics."""
        cfg: CPOOptions = self.config.options
        problem = CPOProblem(agent, batch, norm_adv, cfg.cpo_damping, lambda: self.direct_cost(agent, batch.obs))
        surr_r, surr_c = problem.surrogates()
        g = flat_grad(surr_r, problem.params, retain_graph=True)
        b = flat_grad(surr_c, problem.params)
        Hinv_g = conjugate_gradient(problem.fisher_product, g, cfg.cpo_cg_iters)
        Hinv_b = conjugate_gradient(problem.fisher_product, b, cfg.cpo_cg_iters)
        c = cost - cfg.cpo_cost_limit
        x, info = cpo_step(g, b, c, Hinv_g, Hinv_b, cfg.cpo_max_kl)

        theta_old = get_flat_params(problem.params)
        r_old, c_old = surr_r.item(), surr_c.item()
        accepted, kl, d_r, d_c, trials = False, 0.0, 0.0, 0.0, 0
        for i in range(cfg.cpo_backtrack_iters):
            trials = i + 1
            set_flat_params(problem.params, theta_old + cfg.cpo_backtrack_coef**i * x)
            with torch.no_grad():
                new_r, new_c = problem.surrogates()
                kl = problem.kl().item()
            d_r, d_c = new_r.item() - r_old, new_c.item() - c_old
            improves = d_r >= 0 or info.case <= 1  # without a feasible point, only the cost counts
            if all(map(math.isfinite, (kl, d_r, d_c))) and kl <= cfg.cpo_max_kl and d_c <= max(0.0, -c) and improves:
                accepted = True
                break
        if not accepted:
            set_flat_params(problem.params, theta_old)
            kl, d_r, d_c = 0.0, 0.0, 0.0
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
