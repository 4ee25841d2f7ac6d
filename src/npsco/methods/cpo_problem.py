"""CPO's update quantities on one batch, around the rollout policy theta_old (the method: `npsco.methods.cpo`): the
reward surrogate and the cost model with their gradients g and b, the Fisher-vector products (F + damping I) v, and
the surrogates and mean KL at a trial point of the line search.

`CPOProblem` computes them in numpy: the gradients by hand-written backward passes, the Fisher products analytically.
The tests hold it against a torch version by autograd (the Fisher products by double backward; tests/oracles/cpo.py),
equal up to float32 rounding (tests/unit/test_fast_methods.py). It hands its vectors to the conjugate gradient and
`cpo_step` as 1-D torch tensors that wrap its numpy arrays, without copies (`TrustRegionProblem`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from npsco.methods.constrained import get_flat_params
from npsco.ppo.agent import ActorCritic
from npsco.ppo.numpy_nets import (
    GaussianPass,
    actor_views,
    gaussian_kl,
    gaussian_pass,
    logprob_backward,
    mlp_backward,
    mlp_jvp,
    normalized,
)
from npsco.ppo.rollout import Batch

_add = np.add.reduce


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

    def value_and_grads(self, mean: np.ndarray, log_std: np.ndarray) -> tuple[np.floating, np.ndarray, np.ndarray]:
        """J_dir and its gradients with respect to `mean` (B, A) and `log_std` (A,), with torch's
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
    """`TrustRegionProblem` of one batch, in numpy.

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
        self.old_direct = direct.value_and_grads(self.old.mean, self.old_log_std)[0] if direct is not None else None
        self.fisher_weight = np.exp(-2 * self.old_log_std) / np.float32(self.n)  # 1 / (sigma^2 B), (A,)

    def _surrogates(self, policy: GaussianPass, log_std: np.ndarray) -> tuple[np.floating, np.floating, np.ndarray]:
        """The reward surrogate, the cost model and the ratios pi / pi_old of `policy` (with log-std `log_std`)."""
        ratio = np.exp(policy.logprob - self.old_logprob)
        surr_r = _add(ratio * self.adv_r) / np.float32(self.n)
        cost_model = _add(ratio * self.adv_c) / np.float32(self.n)
        if self.direct is not None and self.old_direct is not None:
            cost_model = cost_model + (self.direct.value_and_grads(policy.mean, log_std)[0] - self.old_direct)
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
            _, direct_mean, direct_log_std = self.direct.value_and_grads(self.old.mean, self.old_log_std)
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
        kl = _add(gaussian_kl(self.old.mean, self.old_log_std, policy.mean, log_std[0])) / np.float32(self.n)
        return float(surr_r), float(cost_model), float(kl)
