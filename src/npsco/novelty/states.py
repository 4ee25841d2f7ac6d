"""The `state` distance between policies: how far apart the distributions of the states they visit are, whatever
actions take them there (two policies whose actions differ can still move the body alike, and the reverse).

Definition. States are standardised with one fixed scale (`StateDistance.mean`, `.std`: those of the states all the
references visited), then mapped by random Fourier features phi (`features` of them, Gaussian frequencies of std
1 / (bandwidth sqrt(obs_dim)), a fixed seed), so that phi(x) . phi(y) ~ exp(-|x - y|^2 / (2 bandwidth^2 obs_dim)), an
RBF kernel. A set of states is summarised by its mean embedding mu = mean phi(s), and

    D_state(P, Q) = || mu_P - mu_Q ||_2,

the kernel's maximum mean discrepancy (MMD) between the two state distributions, as the features approximate it.
It is symmetric, 0 for identical distributions, and at most 2. Each avoided policy's mean embedding is computed once
(from its deterministic episodes) and stored; a new policy's comes from the states of its rollouts.

The witness of the distance to Q at a state s, w . (phi(s) - mu_P) with w = (mu_P - mu_Q) / D_state(P, Q), is how much
visiting s rather than P's average state moves P away from Q, to first order: a per-step reward that pushes the state
distribution away from Q (the `lagrangian` method's reward with `metric=state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from npsco.seeds import STATE_FEATURES

FEATURES = 512
"""Random Fourier features of the state embedding."""
BANDWIDTH = 1.0
"""The RBF kernel's length scale, in units of sqrt(obs_dim) standard deviations of the standardised states."""


@dataclass
class StateDistance:
    """The state embedding of a population, and the mean embedding of each policy it was fitted on."""

    mean: np.ndarray
    """Standardisation: the mean of the states, (obs_dim,)."""
    std: np.ndarray
    """Standardisation: the std of the states (at least 1e-6), (obs_dim,)."""
    embeddings: np.ndarray
    """(M, features): the mean embedding of each policy's visited states, in the order given."""
    bandwidth: float = BANDWIDTH
    """The kernel's length scale (see `BANDWIDTH`)."""
    seed: int = STATE_FEATURES
    """Seed of the random features."""
    frequencies: np.ndarray = field(init=False, repr=False)
    """(obs_dim, features) Gaussian frequencies, drawn from `seed`."""
    phases: np.ndarray = field(init=False, repr=False)
    """(features,) phases, uniform in [0, 2 pi), drawn from `seed`."""

    def __post_init__(self) -> None:
        dim, features = self.mean.size, self.embeddings.shape[1]
        rng = np.random.default_rng(self.seed)
        self.frequencies = rng.standard_normal((dim, features)) / (self.bandwidth * np.sqrt(dim))
        self.phases = np.asarray(rng.uniform(0.0, 2 * np.pi, features))

    @classmethod
    def fit(
        cls,
        states: Sequence[np.ndarray],
        features: int = FEATURES,
        bandwidth: float = BANDWIDTH,
        seed: int = STATE_FEATURES,
    ) -> StateDistance:
        """The embedding standardised on all of `states` (one (n_i, obs_dim) array per policy), with each policy's mean
        embedding."""
        if not states or any(len(s) == 0 for s in states):
            raise ValueError("the state distance needs at least one state of each policy")
        pooled = np.concatenate([np.asarray(s, np.float64) for s in states])
        out = cls(pooled.mean(0), np.maximum(pooled.std(0), 1e-6), np.zeros((0, features)), bandwidth, seed)
        out.embeddings = np.stack([out.mean_embedding(s) for s in states])
        return out

    def embed(self, states: np.ndarray) -> np.ndarray:
        """phi of each state, (n, features) float64."""
        z = (np.asarray(states, np.float64) - self.mean) / self.std
        return np.sqrt(2.0 / self.phases.size) * np.cos(z @ self.frequencies + self.phases)

    def mean_embedding(self, states: np.ndarray) -> np.ndarray:
        """mu = the mean of phi over `states`, (features,)."""
        return self.embed(states).mean(0)

    def distances(self, embedding: np.ndarray) -> np.ndarray:
        """D_state between the distribution with mean embedding `embedding` and each fitted policy's, (M,)."""
        return np.linalg.norm(self.embeddings - embedding[None], axis=1)

    def pairwise(self) -> np.ndarray:
        """(M, M) D_state between the fitted policies (symmetric, zero diagonal)."""
        diff = self.embeddings[:, None] - self.embeddings[None]
        return np.linalg.norm(diff, axis=-1)

    def subset(self, index: Sequence[int]) -> StateDistance:
        """The same embedding with the mean embeddings of the policies at `index` only."""
        return StateDistance(self.mean, self.std, self.embeddings[list(index)], self.bandwidth, self.seed)

    def with_policy(self, states: np.ndarray) -> StateDistance:
        """The same embedding with one more policy, whose visited states are `states`."""
        embeddings = np.vstack([self.embeddings, self.mean_embedding(states)])
        return StateDistance(self.mean, self.std, embeddings, self.bandwidth, self.seed)

    def to_dict(self) -> dict:
        """JSON-ready (threshold.json's `state`)."""
        return {
            "definition": "D_state(P, Q) = |mu_P - mu_Q|, mu = mean random Fourier features (RBF kernel MMD) of the "
            "standardised visited states",
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "bandwidth": self.bandwidth,
            "seed": self.seed,
            "embeddings": self.embeddings.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> StateDistance:
        """Inverse of `to_dict`."""
        return cls(
            mean=np.asarray(data["mean"], np.float64),
            std=np.asarray(data["std"], np.float64),
            embeddings=np.asarray(data["embeddings"], np.float64),
            bandwidth=float(data["bandwidth"]),
            seed=int(data["seed"]),
        )


def witness(embedding: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Unit witness directions w_j = (mu - mu_j) / |mu - mu_j| of the distribution with mean embedding `embedding`
    against each of `others` (M, features); a zero row where the two coincide."""
    diff = embedding[None] - others
    norm = np.linalg.norm(diff, axis=1, keepdims=True)
    return np.divide(diff, norm, out=np.zeros_like(diff), where=norm > 0)
