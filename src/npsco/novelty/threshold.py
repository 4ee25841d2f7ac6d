"""The paper's default novelty threshold: r0 = mean pairwise distance between the PPO reference policies, each pair
measured on the states visited by the first policy of the pair (its deterministic episodes); with the `state` metric,
the mean pairwise distance between their visited-state distributions (`npsco.novelty.states`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from npsco.episodes import run_episodes
from npsco.errors import NpscoError
from npsco.novelty.metrics import (
    METRICS,
    Metric,
    mean_pairwise_distance,
    per_state_distance,
    running_mean,
)
from npsco.novelty.metrics import Policy as PolicyActions
from npsco.novelty.states import StateDistance
from npsco.policy import Policy


def visited_states(policy: Policy, episodes: int, seed: int, max_episode_steps: int | None = None) -> np.ndarray:
    """The raw observations at which `policy` acted in `episodes` deterministic episodes (stacked)."""
    return np.concatenate(visited_episodes(policy, episodes, seed, max_episode_steps), axis=0)


def visited_episodes(
    policy: Policy, episodes: int, seed: int, max_episode_steps: int | None = None
) -> list[np.ndarray]:
    """The raw observations at which `policy` acted, one (length, obs_dim) array per deterministic episode."""
    return run_episodes(policy, episodes, seed=seed, record_states=True, max_episode_steps=max_episode_steps).states


def policy_actions(policy: Policy, metric: str) -> PolicyActions:
    """`policy` as the callable `npsco.novelty.metrics` expects: states -> mean actions, or (mean, std) for W2."""
    if metric == "deterministic":
        return policy.mean_action
    return lambda states: (m := policy.mean_action(states), np.broadcast_to(policy.action_std, m.shape))


@dataclass
class Threshold:
    """The pairwise distance matrix of a policy set, its mean off-diagonal entry (the default r0), and the profile
    rho(t): the mean over ordered pairs (i, j) and policy i's episodes of the running distance between i and j at
    step t of the episode, divided by r0 (IPD's `r0_profile=reference`)."""

    matrix: np.ndarray
    r0: float
    names: list[str]
    episodes: int
    seed: int
    metric: str = "deterministic"
    profile: np.ndarray | None = None
    discount: float = 1.0
    states: StateDistance | None = None
    """With the `state` metric: the state embedding and each policy's mean embedding."""

    def to_dict(self) -> dict:
        metric = {
            "deterministic": "||mu_i(s) - mu_j(s)||, executed (clipped) mean actions",
            "wasserstein2": "the 2-Wasserstein distance between the Gaussians, "
            "sqrt(||mu_i(s) - mu_j(s)||^2 + ||sigma_i - sigma_j||^2)",
        }.get(self.metric)
        definition = (
            "mean over i != j of D(i, j) = mean over states visited by policy i (deterministic episodes) of " + metric
            if metric
            else "mean over i != j of D_state(i, j), the MMD between the policies' visited states (deterministic "
            "episodes; npsco.novelty.states)"
        )
        out = {
            "r0_default": self.r0,
            "names": self.names,
            "distance_matrix": self.matrix.round(6).tolist(),
            "episodes_per_policy": self.episodes,
            "seed": self.seed,
            "metric": self.metric,
            "definition": definition,
        }
        if self.states is not None:
            out["state"] = self.states.to_dict()
        if self.profile is not None:
            out["profile"] = [round(float(v), 6) for v in self.profile]
            out["profile_discount"] = self.discount
            out["profile_definition"] = (
                "rho(t), t = 1, 2, ...: the mean over ordered pairs (i, j) and over policy i's "
                "episodes still running at step t of the running (discounted) mean of the "
                "per-state distance between i and j up to step t, divided by r0_default"
            )
        return out


def distance_profile(per_pair_episodes: Sequence[Sequence[np.ndarray]], discount: float = 1.0) -> np.ndarray:
    """The mean running distance at each episode step t (1-based index t - 1) over a set of episodes.

    `per_pair_episodes[p]` holds, for one ordered pair of policies, one (length,) array of per-state distances per
    episode; at step t the mean is taken over the episodes of every pair that last at least t steps.
    """
    runs = [
        running_mean(np.asarray(d, np.float64)[:, None], discount)[:, 0]
        for pair in per_pair_episodes
        for d in pair
        if len(d)
    ]
    if not runs:
        raise NpscoError("a distance profile needs at least one non-empty episode")
    longest = max(len(r) for r in runs)
    sums, counts = np.zeros(longest), np.zeros(longest)
    for r in runs:
        sums[: len(r)] += r
        counts[: len(r)] += 1
    return sums / counts


def default_threshold(
    policies: Sequence[Policy],
    names: Sequence[str] | None = None,
    episodes: int = 10,
    seed: int = 0,
    max_episode_steps: int | None = None,
    metric: str = "deterministic",
    discount: float = 1.0,
) -> Threshold:
    """r0 = mean pairwise distance of `policies` (at least 2), each measured on its own visited states, in `metric`;
    with the profile rho(t) of their running pairwise distance (`discount`: that of the running mean)."""
    if len(policies) < 2:
        raise NpscoError(f"the default threshold needs at least 2 policies, got {len(policies)}")
    if metric not in METRICS:
        raise NpscoError(f"unknown novelty metric {metric!r}; choose one of {', '.join(METRICS)}")
    known = cast(Metric, metric)
    env_ids = {p.metadata.get("env_id") for p in policies}
    if len(env_ids) > 1:
        raise NpscoError(f"policies come from different environments: {', '.join(sorted(map(str, env_ids)))}")
    episodes_of = [visited_episodes(p, episodes, seed, max_episode_steps) for p in policies]
    names = list(names) if names is not None else [f"policy{i}" for i in range(len(policies))]
    if metric == "state":
        states = StateDistance.fit([np.concatenate(e) for e in episodes_of])
        matrix = states.pairwise()
        r0 = float(mean_pairwise_distance(matrix))
        return Threshold(matrix=matrix, r0=r0, names=names, episodes=episodes, seed=seed, metric=metric, states=states)
    acts = [policy_actions(p, metric) for p in policies]
    # D(i, j) = the mean of the per-state distances over i's states; each episode's distances also feed the profile
    n = len(policies)
    matrix, pairs = np.zeros((n, n)), []
    for i in range(n):
        own = [acts[i](states) for states in episodes_of[i]]
        for j in range(n):
            if j != i:
                per_episode = [
                    per_state_distance(a, acts[j](e), known) for a, e in zip(own, episodes_of[i], strict=True)
                ]
                matrix[i, j] = float(np.concatenate(per_episode).mean())
                pairs.append(per_episode)
    r0 = float(mean_pairwise_distance(matrix))
    profile = distance_profile(pairs, discount) / r0 if r0 > 0 else None
    return Threshold(
        matrix=matrix,
        r0=r0,
        names=names,
        episodes=episodes,
        seed=seed,
        metric=metric,
        profile=profile,
        discount=discount,
    )
