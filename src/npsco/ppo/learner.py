"""The learner: the agent, its Adam optimiser and PPO's minibatch epochs, the one loop every update rule runs.

An update rule (`Hooks.update`) gets the learner and the batch, and nothing else of the trainer:

- `ppo_update(batch)`: PPO's clipped-surrogate update, optionally with a `MeanActionTerm` added to the loss (the
  Lagrangian method);
- `run_epochs(step, params)`: the epochs -> minibatches -> gradients -> clip -> Adam step -> target-KL loop with the
  gradients of a minibatch computed by `step` (TNB's bisector);
- `fit_critics(batch)`: the same loop on the critics' value losses alone (CPO);
- `numpy_learner()`: the numpy twin of that loop (`npsco.ppo.fast_update.NumpyLearner`) when `update_backend` is
  numpy (the default): `ppo_update` and `fit_critics` run on it, and a method runs its own steps on it;
- `agent`, `cfg`, `critic_loss`, `minibatches`: what those steps are built from.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from npsco.ppo.agent import ActorCritic
from npsco.ppo.config import PPOConfig
from npsco.ppo.fast_update import NumpyLearner
from npsco.ppo.maths import normalize_advantages, policy_loss, value_loss
from npsco.ppo.rollout import Batch, MeanActionTerm

MinibatchStep = Callable[[torch.Tensor], dict[str, torch.Tensor]]
"""Computes the gradients of one minibatch (batch indices in, `.grad` of the parameters set) and returns its
statistics as 0-d tensors; an `approx_kl` entry enables the target-KL early stop."""


class Learner:
    """`agent` (its actor and one critic per stream), its Adam optimiser and PPO's minibatch epochs."""

    def __init__(self, cfg: PPOConfig, agent: ActorCritic, streams: tuple[str, ...]):
        self.cfg, self.agent, self.streams = cfg, agent, streams
        self.optimizer = torch.optim.Adam(agent.parameters(), lr=cfg.learning_rate, eps=1e-5, fused=True)
        # the minibatch permutations: the learner's own generator, so that whatever else draws from torch's global
        # one (the caller, another trainer in the same process) does not change this run
        self.torch_rng = torch.Generator().manual_seed(cfg.seed)
        self._fallback_warned = False
        self._numpy: tuple[nn.Module, torch.optim.Optimizer, NumpyLearner | None, str | None] | None = None

    @property
    def learning_rate(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    @learning_rate.setter
    def learning_rate(self, lr: float) -> None:
        self.optimizer.param_groups[0]["lr"] = lr

    def minibatches(self) -> tuple[torch.Tensor, ...]:
        """Index tensors of the minibatches of one epoch (a fresh permutation each call)."""
        perm = torch.randperm(self.cfg.batch_size, generator=self.torch_rng)
        return perm.split(self.cfg.minibatch_size)

    def critic_loss(self, batch: Batch, mb: torch.Tensor, obs: torch.Tensor | None = None) -> torch.Tensor:
        """Sum over streams of the (clipped) value losses on minibatch `mb`."""
        obs = batch.obs[mb] if obs is None else obs
        return cast(
            torch.Tensor,
            sum(
                value_loss(
                    self.agent.value(obs, s),
                    batch.values[s][mb],
                    batch.returns[s][mb],
                    self.cfg.clip_coef,
                    self.cfg.clip_vloss,
                )
                for s in self.streams
            ),
        )

    # ------------------------------------------------------------------------------------------- the one loop
    def run_epochs(
        self, step: MinibatchStep, params: Sequence[torch.Tensor] | None = None
    ) -> list[dict[str, torch.Tensor]]:
        """`update_epochs` passes of minibatch steps: per minibatch, the gradients of `step`, the global norm of
        those of `params` (default: all the agent's) clipped to `max_grad_norm`, one Adam step; after an epoch whose
        last minibatch's `approx_kl` exceeds `target_kl`, stop. Returns every minibatch's statistics."""
        cfg = self.cfg
        params = list(self.agent.parameters()) if params is None else list(params)
        stats: list[dict[str, torch.Tensor]] = []
        for _epoch in range(cfg.update_epochs):
            for mb in self.minibatches():
                self.optimizer.zero_grad(set_to_none=True)
                stats.append(step(mb))
                nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                self.optimizer.step()
            kl = stats[-1].get("approx_kl") if stats else None
            if cfg.target_kl is not None and kl is not None and float(kl) > cfg.target_kl:
                break
        return stats

    # ------------------------------------------------------------------------------------------- the numpy twin
    def numpy_learner(self) -> NumpyLearner | None:
        """The numpy twin of this learner (`NumpyLearner`: the same minibatches, gradient clipping and Adam state,
        equal up to float32 rounding), which the updates run on when `cfg.update_backend` is `numpy`; None with the
        `torch` backend, or when it cannot run this learner: an agent or optimiser it does not handle, or a learner
        whose `critic_loss` is overridden (it computes the built-in one). Then the torch loop runs, with a warning
        (once per learner)."""
        if self.cfg.update_backend != "numpy":
            return None
        update, reason = self._numpy_update()
        if update is None and not self._fallback_warned:
            warnings.warn(f"update_backend=numpy: {reason}; the torch update runs instead", stacklevel=3)
            self._fallback_warned = True
        return update

    def _numpy_update(self) -> tuple[NumpyLearner | None, str | None]:
        """The numpy learner of the current agent and optimiser, or None and why it cannot run them. Checked and built
        once per (agent, optimiser) pair: its buffers are reused, and it reads the parameters and Adam's state from
        them at every update."""
        if self._numpy is None or self._numpy[0] is not self.agent or self._numpy[1] is not self.optimizer:
            reason = (
                "the learner overrides critic_loss"
                if type(self).critic_loss is not Learner.critic_loss
                else NumpyLearner.unsupported(self.agent, self.optimizer, self.streams)
            )
            update = (
                None if reason else NumpyLearner(self.cfg, self.agent, self.optimizer, self.streams, self.minibatches)
            )
            self._numpy = (self.agent, self.optimizer, update, reason)
        return self._numpy[2], self._numpy[3]

    # ------------------------------------------------------------------------------------------------- PPO
    def ppo_update(
        self, batch: Batch, advantage_stream: str = "task", term: MeanActionTerm | None = None
    ) -> dict[str, float]:
        """PPO's update: `update_epochs` passes of minibatch Adam steps on the clipped surrogate (of the advantages
        of `advantage_stream`) + value losses - entropy bonus (+ `term`, a loss on the actor's mean actions).

        Runs on `numpy_learner()` (`NumpyLearner.ppo_update`) when there is one, else `ppo_update_torch`.
        """
        fast = self.numpy_learner()
        if fast is not None:
            return fast.ppo_update(batch, advantage_stream, term)
        return self.ppo_update_torch(batch, advantage_stream, term)

    def ppo_update_torch(
        self, batch: Batch, advantage_stream: str = "task", term: MeanActionTerm | None = None
    ) -> dict[str, float]:
        """`ppo_update` with torch autograd and the torch optimiser (the reference implementation)."""
        cfg, agent = self.cfg, self.agent

        def step(mb: torch.Tensor) -> dict[str, torch.Tensor]:
            obs = batch.obs[mb]
            new_logprob, entropy, mean = agent.evaluate(obs, batch.actions[mb])
            adv = batch.advantages[advantage_stream][mb]
            if cfg.norm_adv:
                adv = normalize_advantages(adv)
            pg_loss, info = policy_loss(new_logprob, batch.logprobs[mb], adv, cfg.clip_coef)
            v_loss = self.critic_loss(batch, mb, obs)
            loss = pg_loss - cfg.ent_coef * entropy + cfg.vf_coef * v_loss
            if term is not None:
                loss = loss + _MeanActionLoss.apply(mean, mb, term)
            loss.backward()
            return {
                "policy_loss": pg_loss.detach(),
                "value_loss": v_loss.detach(),
                "entropy": entropy.detach(),
                "approx_kl": info["approx_kl"],
                "clipfrac": info["clipfrac"],
            }

        stats = self.run_epochs(step)
        names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")
        # one row per minibatch, averaged in float64 (no .item() sync per minibatch)
        means = torch.stack([torch.stack([row[k] for k in names]) for row in stats]).double().mean(0).tolist()
        return {f"losses/{k}": float(v) for k, v in zip(names, means, strict=True)}

    def fit_critics(self, batch: Batch) -> dict[str, float]:
        """PPO's epochs of Adam minibatch steps on the critics' value losses alone (the actor untouched): on
        `numpy_learner()` when there is one, else `fit_critics_torch`."""
        fast = self.numpy_learner()
        if fast is not None:
            return fast.fit_critics(batch)
        return self.fit_critics_torch(batch)

    def fit_critics_torch(self, batch: Batch) -> dict[str, float]:
        """`fit_critics` with torch autograd and the torch optimiser (the reference implementation)."""
        cfg = self.cfg

        def step(mb: torch.Tensor) -> dict[str, torch.Tensor]:
            v_loss = self.critic_loss(batch, mb)
            (cfg.vf_coef * v_loss).backward()
            return {"value_loss": v_loss.detach()}

        stats = self.run_epochs(step, self.agent.critic_parameters())
        return {"losses/value_loss": float(np.mean([row["value_loss"].item() for row in stats]))}


class _MeanActionLoss(torch.autograd.Function):
    """A `MeanActionTerm` as a torch loss of the actor's mean output: its value forward, its gradient backward."""

    @staticmethod
    def forward(ctx: Any, mean: torch.Tensor, index: torch.Tensor, term: MeanActionTerm) -> torch.Tensor:
        value, grad = term(index.numpy(), mean.detach().numpy())
        ctx.save_for_backward(torch.from_numpy(np.asarray(grad, np.float32)))
        return mean.new_tensor(value)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (grad,) = ctx.saved_tensors
        return grad_output * grad, None, None
