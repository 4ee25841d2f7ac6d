"""CPO's update quantities on one batch, around the rollout policy theta_old (the method: `npsco.methods.cpo`): the
reward surrogate and the cost model with their gradients g and b, the Fisher-vector products (F + damping I) v, and
the surrogates and mean KL at a trial point of the line search.

Two implementations of one interface (`TrustRegionProblem`): `CPOProblem` in torch (autograd, the Fisher products by
double backward: the reference) and `NumpyCPOProblem` in numpy (the `update_backend = numpy` default: the gradients by
hand-written backward passes, the Fisher products analytically), equal up to float32 rounding
(tests/unit/test_fast_methods.py). Both hand their vectors to the conjugate gradient and `cpo_step` as 1-D torch
tensors (the numpy ones wrap numpy arrays, without copies).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from npsco.methods.constrained import flat_grad, get_flat_params, set_flat_params
from npsco.ppo.agent import ActorCritic
from npsco.ppo.maths import normalize_advantages
from npsco.ppo.numpy_nets import (
    GaussianPass,
    actor_views,
    gaussian_pass,
    logprob_backward,
    mlp_backward,
    mlp_jvp,
    normalized,
)
from npsco.ppo.numpy_nets import gaussian_kl as gaussian_kl_np
from npsco.ppo.rollout import Batch

_add = np.add.reduce


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


@dataclass
class DirectCost:
    """J_dir(theta) of one batch (`npsco.methods.cpo`): the mean over the batch of r0 - d(s_t; theta), with the states
    and each state's nearest reference j* held at the rollout's. d compares the policy's clipped mean action at s_t
    (a function of theta), or the executed action (`executed`, a constant), with j*'s action; with `ref_std`
    (`wasserstein2`) also the policy's std with j*'s."""

    r0: float
    ref_actions: np.ndarray
    """The nearest reference's action at each state, (B, A)."""
    low: np.ndarray
    """The action space's bounds, (A,): the mean action is clipped to them."""
    high: np.ndarray
    executed: np.ndarray | None = None
    """The executed actions (B, A) when d compares them (`novelty_action=sample`); None: the clipped mean action."""
    ref_std: np.ndarray | None = None
    """The nearest reference's std at each state (B, A) when d compares the stds too (`wasserstein2`)."""

    def torch(self, mean: Tensor, log_std: Tensor) -> Tensor:
        """J_dir in torch, differentiable, from the policy's mean actions (B, A) and (1, A) log-std."""
        own = (
            torch.from_numpy(self.executed)
            if self.executed is not None
            else torch.clamp(mean, torch.from_numpy(self.low), torch.from_numpy(self.high))
        )
        own_std = ref_std = None
        if self.ref_std is not None:
            own_std, ref_std = log_std.exp().expand_as(own), torch.from_numpy(self.ref_std)
        return (self.r0 - nearest_distance(own, torch.from_numpy(self.ref_actions), own_std, ref_std)).mean()

    def numpy(self, mean: np.ndarray, log_std: np.ndarray) -> tuple[np.floating, np.ndarray, np.ndarray]:
        """J_dir in numpy and its gradients with respect to `mean` (B, A) and `log_std` (A,), with torch's
        conventions: `clamp` passes the gradient at the bounds, `clamp_min(1e-12)` none below."""
        n = mean.shape[0]
        own = self.executed if self.executed is not None else np.clip(mean, self.low, self.high)
        diff = own - self.ref_actions
        sq = np.einsum("ba,ba->b", diff, diff)
        if self.ref_std is not None:
            std = np.exp(log_std)
            diff_std = std - self.ref_std
            sq = sq + np.einsum("ba,ba->b", diff_std, diff_std)
        dist = np.sqrt(np.maximum(sq, np.float32(1e-12)))
        value = _add(self.r0 - dist) / np.float32(n)
        g_sq = np.where(sq >= np.float32(1e-12), np.float32(-0.5 / n) / dist, np.float32(0.0))  # d J / d sq
        g_mean = np.zeros_like(mean)
        if self.executed is None:
            g_mean = (2 * g_sq)[:, None] * diff * ((mean >= self.low) & (mean <= self.high))
        g_log_std = np.zeros_like(log_std)
        if self.ref_std is not None:
            g_log_std = _add((2 * g_sq)[:, None] * diff_std, axis=0) * std
        return value, g_mean, g_log_std


class TrustRegionProblem(Protocol):
    """What CPO's step (`CPO.policy_step`) needs of a batch, around theta_old; vectors are 1-D float32 tensors laid
    out as `ActorCritic.actor_parameters`."""

    @property
    def params(self) -> Sequence[Tensor]:
        """The actor's parameters (mean MLP and log-std), which the step sets."""
        ...

    @property
    def theta_old(self) -> Tensor:
        """Their values at the rollout policy, flat."""
        ...

    def gradients(self) -> tuple[float, float, Tensor, Tensor]:
        """At theta_old: the reward surrogate, the cost model L_C and their gradients g and b."""
        ...

    def fisher_product(self, v: Tensor) -> Tensor:
        """(F + damping I) v, with F the Hessian of the mean KL(pi_old || pi_theta) at theta_old."""
        ...

    def evaluate(self, theta: Tensor) -> tuple[float, float, float]:
        """The reward surrogate, the cost model L_C and the mean KL at the actor parameters `theta`."""
        ...


class CPOProblem:
    """`TrustRegionProblem` in torch, by autograd (the reference implementation)."""

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
            self.old_direct = direct.torch(self.old_mean, self.old_log_std) if direct is not None else None

    def surrogates(self) -> tuple[Tensor, Tensor]:
        """At the actor's current parameters: the reward surrogate mean(ratio A_r) and the cost model

            L_C = mean(ratio A_c) + J_dir(theta) - J_dir(theta_old),

        the estimated change of J_C: the score-function term (which states and actions the policy picks, the cost held
        fixed) plus the direct term (the cost's own dependence on theta at the batch's states), if any.
        """
        logprob, _, mean = self.agent.evaluate(self.obs, self.actions)
        ratio = torch.exp(logprob - self.old_logprob)
        cost_model = (ratio * self.adv_c).mean()
        if self.direct is not None and self.old_direct is not None:  # both or neither
            cost_model = cost_model + (self.direct.torch(mean, self.agent.actor_logstd) - self.old_direct)
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


class NumpyCPOProblem:
    """`TrustRegionProblem` in numpy: `CPOProblem`'s quantities with the passes written out.

    The Fisher matrix of a diagonal Gaussian with a state-independent log-std s, at theta_old, has two blocks and no
    cross terms (the KL's mixed derivatives carry a factor mean - mean_old, zero there): for the mean MLP's
    parameters phi, J^T diag(1/sigma^2) J averaged over the batch (J = d mean / d phi at each state), and 2 I for s.
    So (F + damping I) v is a forward-mode pass through the mean MLP (u = J v_phi), the weighting u / sigma^2 / B, a
    backward pass (J^T), 2 v_s, and damping v; the activations at theta_old are computed once per update.
    """

    def __init__(
        self, agent: ActorCritic, batch: Batch, norm_adv: bool, damping: float, direct: DirectCost | None = None
    ):
        self.damping, self.direct = damping, direct
        self.params = agent.actor_parameters()
        self.shapes = [tuple(p.shape) for p in self.params]
        self.theta_old = get_flat_params(self.params)  # a copy: its numpy view stays theta_old
        self.obs, self.actions = batch.obs.detach().numpy(), batch.actions.detach().numpy()
        self.old_logprob = batch.logprobs.detach().numpy()
        self.n = self.obs.shape[0]
        adv_r = batch.advantages["task"].detach().numpy()
        self.adv_r = normalized(adv_r) if norm_adv else adv_r
        adv_c = batch.advantages["cost"].detach().numpy()
        self.adv_c = adv_c - _add(adv_c) / np.float32(self.n)
        self.layers, log_std = actor_views(self.theta_old.numpy(), self.shapes)
        self.old_log_std = log_std[0]
        self.old = gaussian_pass(self.layers, self.old_log_std, self.obs, self.actions)
        self.old_direct = direct.numpy(self.old.mean, self.old_log_std)[0] if direct is not None else None
        self.fisher_weight = np.exp(-2 * self.old_log_std) / np.float32(self.n)  # 1 / (sigma^2 B), (A,)

    def _surrogates(self, policy: GaussianPass, log_std: np.ndarray) -> tuple[np.floating, np.floating, np.ndarray]:
        """The reward surrogate, the cost model and the ratios pi / pi_old of `policy` (with log-std `log_std`)."""
        ratio = np.exp(policy.logprob - self.old_logprob)
        surr_r = _add(ratio * self.adv_r) / np.float32(self.n)
        cost_model = _add(ratio * self.adv_c) / np.float32(self.n)
        if self.direct is not None and self.old_direct is not None:
            cost_model = cost_model + (self.direct.numpy(policy.mean, log_std)[0] - self.old_direct)
        return surr_r, cost_model, ratio

    def _backward(self, g_mean: np.ndarray, g_log_std: np.ndarray) -> np.ndarray:
        """The flat actor gradient at theta_old from d / d mean (B, A) and d / d log_std (A,)."""
        out = np.empty(self.theta_old.numel(), np.float32)
        grads, grad_log_std = actor_views(out, self.shapes)
        mlp_backward(self.layers, grads, self.old.acts, g_mean)
        grad_log_std[0] = g_log_std
        return out

    def gradients(self) -> tuple[float, float, Tensor, Tensor]:
        surr_r, cost_model, ratio = self._surrogates(self.old, self.old_log_std)
        inv_n = np.float32(1.0 / self.n)
        g = self._backward(*logprob_backward(self.old, ratio * self.adv_r * inv_n))
        g_mean, g_log_std = logprob_backward(self.old, ratio * self.adv_c * inv_n)
        if self.direct is not None:
            _, direct_mean, direct_log_std = self.direct.numpy(self.old.mean, self.old_log_std)
            g_mean, g_log_std = g_mean + direct_mean, g_log_std + direct_log_std
        b = self._backward(g_mean, g_log_std)
        return float(surr_r), float(cost_model), torch.from_numpy(g), torch.from_numpy(b)

    def fisher_product(self, v: Tensor) -> Tensor:
        """(F + damping I) v analytically (the class docstring)."""
        v_np = v.detach().numpy()
        tangents, v_log_std = actor_views(v_np, self.shapes)
        u = mlp_jvp(self.layers, tangents, self.old.acts)  # J v_phi, (B, A)
        u *= self.fisher_weight
        out = self._backward(u, 2 * v_log_std[0])
        out += np.float32(self.damping) * v_np
        return torch.from_numpy(out)

    def evaluate(self, theta: Tensor) -> tuple[float, float, float]:
        """The surrogates and the KL at `theta` (the actor's parameters are left as they are)."""
        layers, log_std = actor_views(theta.detach().numpy(), self.shapes)
        policy = gaussian_pass(layers, log_std[0], self.obs, self.actions)
        surr_r, cost_model, _ = self._surrogates(policy, log_std[0])
        kl = _add(gaussian_kl_np(self.old.mean, self.old_log_std, policy.mean, log_std[0])) / np.float32(self.n)
        return float(surr_r), float(cost_model), float(kl)
