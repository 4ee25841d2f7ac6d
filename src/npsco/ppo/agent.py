"""The network PPO trains: `ActorCritic`, a Gaussian policy (tanh-MLP mean, state-independent log-std) with one critic
per reward stream, and `RunningMeanStd`, its observation normaliser. `ActorCritic.to_policy` turns it into the numpy
snapshot (`npsco.policy.Policy`) that is saved and evaluated."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Normal

from npsco.policy import OBS_NORM_EPS, Policy
from npsco.ppo._rollout_kernels import observe

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class RunningMeanStd:
    """Running mean and variance of observations (parallel-update formula, float64), as Gymnasium's
    NormalizeObservation."""

    def __init__(self, shape: Sequence[int], clip: float = 10.0, enabled: bool = True):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 1e-4
        self.clip = float(clip)
        self.enabled = enabled

    def update(self, batch: np.ndarray) -> None:
        """Fold a batch (N, *shape) of raw observations into the statistics."""
        if not self.enabled:
            return
        n = batch.shape[0]
        if n > 1:  # numpy's mean and var, computed as they do, without their slow Python wrappers (runs every step)
            batch_mean = np.add.reduce(batch, axis=0) / n
            centred = batch - batch_mean
            batch_var = np.add.reduce(centred * centred, axis=0) / n
        else:  # one observation (a single env): no reduction needed
            batch_mean, batch_var = batch[0], 0.0
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.var = m2 / total
        self.count = total

    def observe(self, raw: np.ndarray, out: np.ndarray) -> None:
        """`update(raw)`, then out[:] = `normalize(raw)`, in one compiled call (the rollout's step, where numpy's
        per-call overhead outweighs the work): raw (N, D) float32 observations and `out` (N, D) float32, both
        C-contiguous. The same bits as the two calls."""
        self.count = observe(raw, self.mean, self.var, self.count, OBS_NORM_EPS, self.clip, self.enabled, out)

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """Raw observations -> normalised, clipped float32 observations (identity cast when disabled)."""
        if not self.enabled:
            return np.asarray(obs, np.float32)
        out = (obs - self.mean) / np.sqrt(self.var + OBS_NORM_EPS)
        # np.clip(out, -clip, clip) as two ufuncs (np.clip's wrapper costs more than the work on these small arrays)
        return np.minimum(np.maximum(out, -self.clip, out=out), self.clip, out=out).astype(np.float32)


def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weight init with gain `std` and constant bias (the PPO implementation-detail convention)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(sizes: Sequence[int], out_std: float) -> nn.Sequential:
    """tanh MLP with orthogonal init; the last layer is linear with gain `out_std`."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        last = i == len(sizes) - 2
        layers.append(layer_init(nn.Linear(sizes[i], sizes[i + 1]), out_std if last else math.sqrt(2)))
        if not last:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def linear_layers(module: nn.Module) -> list[tuple[np.ndarray, np.ndarray]]:
    """(W, b) numpy *views* of the Linear layers of an MLP (they follow in-place optimiser updates)."""
    return [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in module.children() if isinstance(m, nn.Linear)]


class ActorCritic(nn.Module):
    """Gaussian policy (tanh-MLP mean, state-independent log-std) and one critic per reward stream.

    The network works on *normalised* observations; `obs_rms` (numpy, not a parameter) turns raw observations into them
    and is copied into every `Policy` snapshot. Stream "task" is the environment reward; methods add streams (TNB's
    "novelty", CPO's "cost") with `add_critic`.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        actor_hidden: Sequence[int] = (64, 64),
        critic_hidden: Sequence[int] = (64, 64),
        init_log_std: float = 0.0,
        norm_obs: bool = True,
        obs_clip: float = 10.0,
    ):
        super().__init__()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.actor_hidden, self.critic_hidden = tuple(actor_hidden), tuple(critic_hidden)
        self.actor_mean = mlp([obs_dim, *actor_hidden, action_dim], out_std=0.01)
        self.actor_logstd = nn.Parameter(torch.full((1, action_dim), float(init_log_std)))
        self.critics = nn.ModuleDict({"task": mlp([obs_dim, *critic_hidden, 1], out_std=1.0)})
        self.obs_rms = RunningMeanStd((obs_dim,), clip=obs_clip, enabled=norm_obs)

    def add_critic(self, stream: str) -> None:
        """Add a critic for another reward stream (same architecture as the task critic)."""
        self.critics[stream] = mlp([self.obs_dim, *self.critic_hidden, 1], out_std=1.0)

    def actor_parameters(self) -> list[nn.Parameter]:
        """The parameters that define the policy (mean MLP and log-std): the ones TNB/CPO steer."""
        return [*self.actor_mean.parameters(), self.actor_logstd]

    def critic_parameters(self) -> list[nn.Parameter]:
        return list(self.critics.parameters())

    def distribution(self, obs: torch.Tensor) -> Normal:
        mean = self.actor_mean(obs)
        return Normal(mean, self.actor_logstd.expand_as(mean).exp(), validate_args=False)

    def value(self, obs: torch.Tensor, stream: str = "task") -> torch.Tensor:
        return self.critics[stream](obs).squeeze(-1)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """log pi(a|s) summed over action dims, the entropy (the same for every state), and the mean.

        Written out instead of through `torch.distributions` (3x fewer autograd nodes: this runs once per minibatch).
        """
        mean = self.actor_mean(obs)
        log_std = self.actor_logstd
        logprob = (-0.5 * ((actions - mean) * torch.exp(-log_std)) ** 2 - log_std - LOG_SQRT_2PI).sum(-1)
        entropy = (0.5 + LOG_SQRT_2PI + log_std).sum()
        return logprob, entropy, mean

    def to_policy(self, action_space: gym.spaces.Box, metadata: dict[str, Any]) -> Policy:
        """A snapshot of the policy (its weights and normaliser copied) acting in `action_space`, with `metadata`."""
        actor, _, _ = self.numpy_views()
        return Policy(
            weights=[(w.copy(), b.copy()) for w, b in actor],
            log_std=self.actor_logstd.detach().numpy().reshape(-1).copy(),
            obs_mean=self.obs_rms.mean.astype(np.float32),
            obs_var=self.obs_rms.var.astype(np.float32),
            obs_clip=self.obs_rms.clip,
            norm_obs=self.obs_rms.enabled,
            action_low=np.asarray(action_space.low, np.float32),
            action_high=np.asarray(action_space.high, np.float32),
            metadata=dict(metadata),
        )

    def numpy_views(self) -> tuple[list, np.ndarray, dict[str, list]]:
        """Numpy views of the actor layers, the log-std and each critic's layers, for fast rollouts."""
        return (
            linear_layers(self.actor_mean),
            self.actor_logstd.detach().numpy().reshape(-1),
            {s: linear_layers(c) for s, c in self.critics.items()},
        )
