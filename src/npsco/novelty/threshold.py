"""The paper's default novelty threshold: r0 = mean pairwise distance between the PPO reference policies, each pair
measured on the states visited by the first policy of the pair (its deterministic episodes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from npsco.errors import NpscoError
from npsco.evaluation import run_episodes
from npsco.novelty.metrics import mean_pairwise_distance, pairwise_distance_matrix
from npsco.policy import Policy


def default_distance_episodes(env_id: str) -> int:
    """Deterministic episodes per policy for the threshold: 50 on the maze (short episodes), 5 on MuJoCo (1000 steps)."""
    from npsco.config import task_family

    return 50 if task_family(env_id) == "maze" else 5


def visited_states(policy: Policy, episodes: int, seed: int, max_episode_steps: int | None = None) -> np.ndarray:
    """The raw observations at which `policy` acted in `episodes` deterministic episodes (stacked)."""
    res = run_episodes(policy, episodes, seed=seed, record_states=True, max_episode_steps=max_episode_steps)
    return np.concatenate(res.states, axis=0)


@dataclass
class Threshold:
    """The pairwise distance matrix of a policy set and its mean off-diagonal entry (the default r0)."""

    matrix: np.ndarray
    r0: float
    names: list[str]
    episodes: int
    seed: int

    def to_dict(self) -> dict:
        return {"r0_default": self.r0, "names": self.names, "distance_matrix": self.matrix.round(6).tolist(),
                "episodes_per_policy": self.episodes, "seed": self.seed,
                "definition": "mean over i != j of D(i, j) = mean over states visited by policy i (deterministic "
                              "episodes) of ||mu_i(s) - mu_j(s)||, executed (clipped) mean actions"}


def default_threshold(policies: Sequence[Policy], names: Sequence[str] | None = None, episodes: int = 10,
                      seed: int = 0, max_episode_steps: int | None = None) -> Threshold:
    """r0 = mean pairwise distance of `policies` (at least 2), each measured on its own visited states."""
    if len(policies) < 2:
        raise NpscoError(f"the default threshold needs at least 2 policies, got {len(policies)}")
    env_ids = {p.metadata.get("env_id") for p in policies}
    if len(env_ids) > 1:
        raise NpscoError(f"policies come from different environments: {', '.join(sorted(map(str, env_ids)))}")
    states = [visited_states(p, episodes, seed, max_episode_steps) for p in policies]
    matrix = pairwise_distance_matrix([p.mean_action for p in policies], states)
    names = list(names) if names is not None else [f"policy{i}" for i in range(len(policies))]
    return Threshold(matrix=matrix, r0=float(mean_pairwise_distance(matrix)), names=names, episodes=episodes, seed=seed)
