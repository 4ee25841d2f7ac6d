"""Measuring a population's policies: each one's deterministic episodes and visited states (on the maze also the
paper's Fig. 2 episode), then the distances between them: novelty (paper Sec. 4.2) and state novelty."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npsco.episodes import Episodes, run_episodes
from npsco.novelty.references import ReferenceSet
from npsco.novelty.states import StateDistance
from npsco.policy import Policy
from npsco.tasks import MAZE_ID

FIG2_START = (14.5, 8.0)
"""Start of the paper's Fig. 2 trajectories: near the right edge, just outside the right region ((15, 8) is inside)."""
MAX_MEASURED_STATES = 100_000
"""The distances and behaviour descriptors of a policy are measured on at most this many of its visited states: those
of its first episodes (10 MuJoCo episodes of 1,000 steps are 10,000), so that memory does not grow with the number of
episodes evaluated; its return is measured on every episode."""
MAX_DIVERSITY_STATES = 2000
"""The state diversity compares at most this many visited states per policy (evenly spaced in visiting order)."""


@dataclass
class Measurement:
    """One policy's deterministic episodes and, on the maze, its Fig. 2 trajectory."""

    policy: Policy
    episodes: Episodes
    states: np.ndarray
    """Every state at which the policy acted, all episodes stacked: the states its distances are measured on."""
    fig2_trajectory: np.ndarray | None = None
    fig2_goal: int | None = None


MeasureCache = dict[tuple[str, int, int], Measurement]
"""(resolved checkpoint path, episodes, seed) -> its Measurement: shares the work between runs that borrow the same
references, and with the report's distance heatmap."""


def measure_policy(policy: Policy, episodes: int, seed: int, max_episode_steps: int | None = None) -> Measurement:
    """Run `episodes` deterministic episodes (env i seeded `seed + i`), keeping the visited states (at most
    `MAX_MEASURED_STATES`); on the maze also the episode from `FIG2_START`."""
    res = run_episodes(
        policy,
        episodes,
        seed=seed,
        max_episode_steps=max_episode_steps,
        record_states=True,
        max_states=MAX_MEASURED_STATES,
    )
    trajectory = goal = None
    if policy.metadata["env_id"] == MAZE_ID:
        one = run_episodes(
            policy, 1, seed=seed, max_episode_steps=max_episode_steps, record_states=True, start=FIG2_START
        )
        assert one.goals is not None  # the maze records goals
        trajectory, goal = one.trajectory(0), int(one.goals[0])
    return Measurement(
        policy=policy,
        episodes=res,
        states=np.concatenate(res.states, axis=0),
        fig2_trajectory=trajectory,
        fig2_goal=goal,
    )


def action_distance_matrix(measurements: list[Measurement]) -> np.ndarray:
    """D[i, j] = mean over the states visited by policy i of ||mu_i(s) - mu_j(s)|| (executed, clipped mean actions);
    one exact `ReferenceSet` call per row (a state's distance does not depend on the states beside it). The diagonal
    is 0; D is not symmetric."""
    everyone = ReferenceSet([m.policy for m in measurements], exact=True)
    matrix = np.zeros((len(measurements), len(measurements)))
    for i, m in enumerate(measurements):
        matrix[i] = action_distance_row(everyone, i, m)
    return matrix


def action_distance_row(everyone: ReferenceSet, i: int, measured: Measurement) -> np.ndarray:
    """Row i of `action_distance_matrix`: D(i, j) for every policy j of `everyone`, on the states that policy i (the
    i-th of `everyone`, whose episodes are `measured`) visited; 0 at j = i."""
    row = everyone.distances(measured.states, measured.policy.mean_action(measured.states)).mean(axis=0)
    row[i] = 0.0
    return row


def state_distance_matrix(measurements: list[Measurement], references: list[int]) -> np.ndarray | None:
    """D[i, j] = the MMD between the states visited by policies i and j (`npsco.novelty.states`), with the embedding
    fitted on the states of the `references` (None without references: no common scale)."""
    if not references:
        return None
    fitted = StateDistance.fit([measurements[i].states for i in references])
    everyone = StateDistance(fitted.mean, fitted.std, np.array([fitted.mean_embedding(m.states) for m in measurements]))
    return everyone.pairwise()


def diversity_states(states: np.ndarray, limit: int = MAX_DIVERSITY_STATES) -> np.ndarray:
    """At most `limit` of the visited states, evenly spaced (deterministic)."""
    if len(states) <= limit:
        return states
    return states[np.linspace(0, len(states) - 1, limit).round().astype(int)]


def novelty_against(matrix: np.ndarray, i: int, references: list[int]) -> float | None:
    """min over the references j != i of matrix[i, j] (None when there is none): the paper's novelty U."""
    others = [j for j in references if j != i]
    return float(matrix[i, others].min()) if others else None


def yardstick(matrix: np.ndarray, references: list[int], nearest: float | None) -> int | None:
    """How many of `references` are nearer to their own nearest other reference (matrix[i, j], measured on i's states)
    than `nearest`: a novel policy's distance put beside the references' leave-one-out nearest distances. None
    without a distance or with fewer than 2 references."""
    if nearest is None or len(references) < 2:
        return None
    loo = [novelty_against(matrix, i, references) for i in references]
    return sum(d is not None and d < nearest for d in loo)


def mean_reference_distance(matrix: np.ndarray, references: list[int]) -> float | None:
    """Mean of D(i, j) over ordered pairs of distinct references: the paper's default r0, here re-measured."""
    if len(references) < 2:
        return None
    sub = matrix[np.ix_(references, references)]
    return float(sub[~np.eye(len(references), dtype=bool)].mean())
