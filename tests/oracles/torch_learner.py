"""The torch reference of the learner's epochs (`npsco.ppo.learner.Learner`, which runs them in numpy): per minibatch,
the gradients of a step by autograd, `clip_grad_norm_` and the torch optimiser's step; PPO's losses in torch. It runs
on a learner's own agent, optimiser and minibatch generator, so that both updates start from one state."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from npsco.ppo.learner import Learner
from npsco.ppo.rollout import Batch, MeanActionTerm

MinibatchStep = Callable[[torch.Tensor], dict[str, torch.Tensor]]
"""Computes the gradients of one minibatch (batch indices in, `.grad` of the parameters set) and returns its
statistics as 0-d tensors; an `approx_kl` entry enables the target-KL early stop."""


def policy_loss(
    new_logprob: torch.Tensor, old_logprob: torch.Tensor, advantages: torch.Tensor, clip_coef: float
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's clipped surrogate, as a loss to minimise: mean(max(-A r, -A clip(r, 1-eps, 1+eps))), r = pi/pi_old.

    Also returns the approximate KL ((r - 1) - log r, Schulman's low-variance estimator) and the clip fraction.
    """
    log_ratio = new_logprob - old_logprob
    ratio = log_ratio.exp()
    loss = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return loss, {"approx_kl": approx_kl, "clipfrac": clipfrac}


def value_loss(
    new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip_coef: float, clip: bool
) -> torch.Tensor:
    """0.5 * mean squared error to the returns; with `clip`, the max of the plain and the clipped-around-old errors."""
    unclipped = (new_values - returns) ** 2
    if not clip:
        return 0.5 * unclipped.mean()
    clipped = old_values + torch.clamp(new_values - old_values, -clip_coef, clip_coef)
    return 0.5 * torch.max(unclipped, (clipped - returns) ** 2).mean()


def normalize_advantages(adv: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit std (the minibatch normalisation of the PPO implementation details)."""
    return (adv - adv.mean()) / (adv.std() + 1e-8)


class TorchLearner:
    """`learner`'s updates in torch: what a method's update and the trainer use of a learner (`ppo_update`,
    `fit_critics`, `blas_threads`, `agent`, `cfg`, `learning_rate`, ...), plus the torch loop (`run_epochs`) and the
    critics' loss (`critic_loss`). In place of a trainer's learner (`trainer.learner = TorchLearner(trainer.learner)`,
    under `oracles.torch_update.torch_methods`) it trains in torch."""

    def __init__(self, learner: Learner):
        self.learner = learner

    @property
    def cfg(self):
        return self.learner.cfg

    @property
    def agent(self):
        return self.learner.agent

    @property
    def streams(self) -> tuple[str, ...]:
        return self.learner.streams

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.learner.optimizer

    @property
    def torch_rng(self) -> torch.Generator:
        return self.learner.torch_rng

    @property
    def learning_rate(self) -> float:
        return self.learner.learning_rate

    @learning_rate.setter
    def learning_rate(self, lr: float) -> None:
        self.learner.learning_rate = lr

    def blas_threads(self) -> Any:
        return contextlib.nullcontext()

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

    def run_epochs(
        self, step: MinibatchStep, params: Sequence[torch.Tensor] | None = None
    ) -> list[dict[str, torch.Tensor]]:
        """`update_epochs` passes of minibatch steps: per minibatch, the gradients of `step`, the global norm of
        those of `params` (default: all the agent's) clipped to `max_grad_norm`, one optimiser step; after an epoch
        whose last minibatch's `approx_kl` exceeds `target_kl`, stop. Returns every minibatch's statistics."""
        cfg = self.cfg
        params = list(self.agent.parameters()) if params is None else list(params)
        stats: list[dict[str, torch.Tensor]] = []
        for _epoch in range(cfg.update_epochs):
            for mb in self.learner.minibatches():
                self.optimizer.zero_grad(set_to_none=True)
                stats.append(step(mb))
                nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                self.optimizer.step()
            kl = stats[-1].get("approx_kl") if stats else None
            if cfg.target_kl is not None and kl is not None and float(kl) > cfg.target_kl:
                break
        return stats

    def ppo_update(
        self, batch: Batch, advantage_stream: str = "task", term: MeanActionTerm | None = None
    ) -> dict[str, float]:
        """`Learner.ppo_update` by autograd."""
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
                loss = loss + MeanActionLoss.apply(mean, mb, term)
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
        means = torch.stack([torch.stack([row[k] for k in names]) for row in stats]).double().mean(0).tolist()
        return {f"losses/{k}": float(v) for k, v in zip(names, means, strict=True)}

    def fit_critics(self, batch: Batch) -> dict[str, float]:
        """`Learner.fit_critics` by autograd."""
        cfg = self.cfg

        def step(mb: torch.Tensor) -> dict[str, torch.Tensor]:
            v_loss = self.critic_loss(batch, mb)
            (cfg.vf_coef * v_loss).backward()
            return {"value_loss": v_loss.detach()}

        stats = self.run_epochs(step, self.agent.critic_parameters())
        return {"losses/value_loss": float(np.mean([row["value_loss"].item() for row in stats]))}


class MeanActionLoss(torch.autograd.Function):
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
