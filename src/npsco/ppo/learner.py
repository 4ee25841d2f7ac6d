"""The learner: the agent, its Adam optimiser and PPO's minibatch epochs, the one loop every update rule runs.

An update rule (`Hooks.update`) gets the learner and the batch, and nothing else of the trainer:

- `ppo_update(batch)`: PPO's clipped-surrogate update, optionally with a `MeanActionTerm` added to the loss (the
  Lagrangian method);
- `fit_critics(batch)`: the same epochs on the critics' value losses alone (CPO);
- `numpy_learner()`: the loop itself (`npsco.ppo.fast_update.NumpyLearner`: forward and backward passes written out
  in numpy), on which a method runs minibatch steps of its own (TNB's bisector), built from its pieces;
- `blas_threads()`: the thread limit a method's own numpy maths runs under (CPO's trust-region step);
- `agent`, `cfg`: what those steps are built from.

The optimiser is a `torch.optim.Adam` whose state (moments, step counts, learning rate) the numpy loop reads and
writes back at every update: the checkpoints save it (`npsco.ppo.state`). The torch autograd version of these updates
is the tests' reference (tests/oracles/), not a second path of the library.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from npsco.ppo.agent import ActorCritic
from npsco.ppo.config import PPOConfig
from npsco.ppo.fast_update import NumpyLearner
from npsco.ppo.rollout import Batch, MeanActionTerm


class Learner:
    """`agent` (its actor and one critic per stream), its Adam optimiser and PPO's minibatch epochs."""

    def __init__(self, cfg: PPOConfig, agent: ActorCritic, streams: tuple[str, ...]):
        self.cfg, self.agent, self.streams = cfg, agent, streams
        self.optimizer = torch.optim.Adam(agent.parameters(), lr=cfg.learning_rate, eps=1e-5, fused=True)
        # the minibatch permutations: the learner's own generator, so that whatever else draws from torch's global
        # one (the caller, another trainer in the same process) does not change this run
        self.torch_rng = torch.Generator().manual_seed(cfg.seed)
        self._numpy: tuple[nn.Module, torch.optim.Optimizer, NumpyLearner] | None = None

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

    def numpy_learner(self) -> NumpyLearner:
        """The minibatch epochs of the current agent and optimiser (`NumpyLearner`), built once per (agent,
        optimiser) pair: its buffers are reused, and it reads the parameters and Adam's state from them at every
        update. TypeError for an agent or optimiser it does not handle (`NumpyLearner.unsupported`)."""
        if self._numpy is None or self._numpy[0] is not self.agent or self._numpy[1] is not self.optimizer:
            reason = NumpyLearner.unsupported(self.agent, self.optimizer, self.streams)
            if reason:
                raise TypeError(f"the learner cannot update this agent and optimiser: {reason}")
            update = NumpyLearner(self.cfg, self.agent, self.optimizer, self.streams, self.minibatches)
            self._numpy = (self.agent, self.optimizer, update)
        return self._numpy[2]

    def blas_threads(self) -> Any:
        """A context in which numpy's BLAS runs with the updates' thread count (`NumpyLearner.blas_threads`)."""
        return self.numpy_learner().blas_threads()

    def ppo_update(
        self, batch: Batch, advantage_stream: str = "task", term: MeanActionTerm | None = None
    ) -> dict[str, float]:
        """PPO's update: `update_epochs` passes of minibatch Adam steps on the clipped surrogate (of the advantages
        of `advantage_stream`) + value losses - entropy bonus (+ `term`, a loss on the actor's mean actions); returns
        the mean `losses/*` statistics (`NumpyLearner.ppo_update`)."""
        return self.numpy_learner().ppo_update(batch, advantage_stream, term)

    def fit_critics(self, batch: Batch) -> dict[str, float]:
        """PPO's epochs of Adam minibatch steps on the critics' value losses alone, the actor untouched
        (`NumpyLearner.fit_critics`)."""
        return self.numpy_learner().fit_critics(batch)
