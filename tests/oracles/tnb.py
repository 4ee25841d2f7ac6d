"""The torch reference of TNB's minibatch step (`npsco.methods.tnb.TNB.bisector_step`, which runs in numpy): f and g by
autograd, the bisector, the critics' and the entropy's gradients by `backward`."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from npsco.methods.constrained import bisector, flat_grad
from npsco.methods.tnb import TNB
from npsco.ppo.rollout import Batch
from oracles.torch_learner import TorchLearner, normalize_advantages, policy_loss


def _add_to_grads(params: Sequence[torch.Tensor], flat: torch.Tensor) -> None:
    """param.grad += the slice of the 1-D `flat` that belongs to param (laid out as `flat_grad`)."""
    offset = 0
    for p in params:
        piece = flat[offset : offset + p.numel()].view_as(p)
        p.grad = piece.clone() if p.grad is None else p.grad + piece
        offset += p.numel()


def bisector_grads(method: TNB, learner: TorchLearner, batch: Batch, mb: torch.Tensor) -> dict[str, torch.Tensor]:
    """The gradients of minibatch `mb` (a `MinibatchStep`): the actor's along -p with p = bisector(f, g), the critics'
    of their value losses, the entropy bonus's on the log-std."""
    cfg, agent = learner.cfg, learner.agent
    obs = batch.obs[mb]
    new_logprob, entropy, _ = agent.evaluate(obs, batch.actions[mb])
    adv_task, adv_nov = batch.advantages["task"][mb], batch.advantages["novelty"][mb]
    if cfg.norm_adv:
        adv_task, adv_nov = normalize_advantages(adv_task), normalize_advantages(adv_nov)
    task_loss, info = policy_loss(new_logprob, batch.logprobs[mb], adv_task, cfg.clip_coef)
    nov_loss, _ = policy_loss(new_logprob, batch.logprobs[mb], adv_nov, cfg.clip_coef)
    actor = agent.actor_parameters()
    f = -flat_grad(task_loss, actor, retain_graph=True)
    g = -flat_grad(nov_loss, actor)
    p = bisector(f, g, rule=method.config.options.tnb_rule)

    v_loss = learner.critic_loss(batch, mb, obs)
    (cfg.vf_coef * v_loss - cfg.ent_coef * entropy).backward()  # critics' grads, and the entropy's on log-std
    _add_to_grads(actor, -p)
    cos = torch.dot(f, g) / (torch.linalg.vector_norm(f) * torch.linalg.vector_norm(g) + 1e-12)
    return {
        "policy_loss": task_loss.detach(),
        "novelty_policy_loss": nov_loss.detach(),
        "value_loss": v_loss.detach(),
        "entropy": entropy.detach(),
        "approx_kl": info["approx_kl"],
        "clipfrac": info["clipfrac"],
        "cos": cos.detach(),
    }


def tnb_update(method: TNB, learner: TorchLearner, batch: Batch) -> dict[str, float]:
    """`TNB.update` in torch: the learner's epochs of `bisector_grads`, the same metrics."""
    return TNB.metrics(learner.run_epochs(lambda mb: bisector_grads(method, learner, batch, mb)))
