"""The torch reference of CPO's trust-region quantities (`npsco.methods.cpo_problem.CPOProblem`, in numpy): the
surrogates and gradients by autograd, the Fisher-vector products by double backward, the direct cost term in torch."""

from __future__ import annotations

import torch
from torch import Tensor

from npsco.methods.constrained import flat_grad, get_flat_params, set_flat_params
from npsco.methods.cpo_problem import DirectCost
from npsco.ppo.agent import ActorCritic
from npsco.ppo.rollout import Batch
from oracles.torch_learner import normalize_advantages


def nearest_distance(
    own: Tensor, ref_actions: Tensor, own_std: Tensor | None = None, ref_std: Tensor | None = None
) -> Tensor:
    """Per state, the distance to the nearest reference j*: ||a - mu_j*(s)|| (`deterministic`), or with the stds
    sqrt(||a - mu_j*(s)||^2 + ||std - std_j*||^2) (`wasserstein2`); `own` is the new policy's action term (N, A)."""
    sq = ((own - ref_actions) ** 2).sum(-1)
    if own_std is not None:
        assert ref_std is not None, "own_std needs ref_std"
        sq = sq + ((own_std - ref_std) ** 2).sum(-1)
    return torch.sqrt(sq.clamp_min(1e-12))


def gaussian_kl(mean_p: Tensor, log_std_p: Tensor, mean_q: Tensor, log_std_q: Tensor) -> Tensor:
    """KL(p || q) per state for diagonal Gaussians, summed over action dims:

    sum_i  log(s_q / s_p) + (s_p^2 + (m_p - m_q)^2) / (2 s_q^2) - 1/2
    """
    var_p, var_q = torch.exp(2 * log_std_p), torch.exp(2 * log_std_q)
    return (log_std_q - log_std_p + (var_p + (mean_p - mean_q) ** 2) / (2 * var_q) - 0.5).sum(-1)


def direct_cost(direct: DirectCost, mean: Tensor, log_std: Tensor) -> Tensor:
    """`DirectCost.value_and_grads`'s J_dir in torch, differentiable, from the policy's mean actions (B, A) and (1, A)
    log-std."""
    own = (
        torch.from_numpy(direct.executed)
        if direct.executed is not None
        else torch.clamp(mean, torch.from_numpy(direct.low), torch.from_numpy(direct.high))
    )
    own_std = ref_std = None
    if direct.ref_std is not None:
        own_std, ref_std = log_std.exp().expand_as(own), torch.from_numpy(direct.ref_std)
    return (direct.r0 - nearest_distance(own, torch.from_numpy(direct.ref_actions), own_std, ref_std)).mean()


class TorchCPOProblem:
    """`npsco.methods.cpo_problem.TrustRegionProblem` in torch, by autograd."""

    def __init__(
        self, agent: ActorCritic, batch: Batch, norm_adv: bool, damping: float, direct: DirectCost | None = None
    ):
        self.agent, self.damping, self.direct = agent, damping, direct
        self.params = agent.actor_parameters()
        self.theta_old = get_flat_params(self.params)
        self.obs, self.actions, self.old_logprob = batch.obs, batch.actions, batch.logprobs
        adv_r = batch.advantages["task"]
        self.adv_r = normalize_advantages(adv_r) if norm_adv else adv_r
        self.adv_c = batch.advantages["cost"] - batch.advantages["cost"].mean()
        with torch.no_grad():
            self.old_mean = agent.actor_mean(self.obs)
            self.old_log_std = agent.actor_logstd.detach().clone()
            self.old_direct = direct_cost(direct, self.old_mean, self.old_log_std) if direct is not None else None

    def surrogates(self) -> tuple[Tensor, Tensor]:
        """At the actor's current parameters: the reward surrogate mean(ratio A_r) and the cost model

        L_C = mean(ratio A_c) + J_dir(theta) - J_dir(theta_old).
        """
        logprob, _, mean = self.agent.evaluate(self.obs, self.actions)
        ratio = torch.exp(logprob - self.old_logprob)
        cost_model = (ratio * self.adv_c).mean()
        if self.direct is not None and self.old_direct is not None:  # both or neither
            cost_model = cost_model + (direct_cost(self.direct, mean, self.agent.actor_logstd) - self.old_direct)
        return (ratio * self.adv_r).mean(), cost_model

    def gradients(self) -> tuple[float, float, Tensor, Tensor]:
        surr_r, surr_c = self.surrogates()
        g = flat_grad(surr_r, self.params, retain_graph=True)
        b = flat_grad(surr_c, self.params)
        return surr_r.item(), surr_c.item(), g, b

    def kl(self) -> Tensor:
        """Mean over the batch of KL(pi_old || pi_theta) at the actor's current parameters."""
        mean = self.agent.actor_mean(self.obs)
        return gaussian_kl(self.old_mean, self.old_log_std, mean, self.agent.actor_logstd).mean()

    def fisher_product(self, v: Tensor) -> Tensor:
        """(F + damping I) v by double backward through the mean KL."""
        grad_kl = flat_grad(self.kl(), self.params, create_graph=True)
        return flat_grad(torch.dot(grad_kl, v), self.params) + self.damping * v

    def evaluate(self, theta: Tensor) -> tuple[float, float, float]:
        """The surrogates and the KL with the actor's parameters set to `theta`."""
        set_flat_params(self.params, theta)
        with torch.no_grad():
            surr_r, surr_c = self.surrogates()
            return surr_r.item(), surr_c.item(), self.kl().item()
