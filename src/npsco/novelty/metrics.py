"""Distances between policies and the novelty of a policy (paper Sec. 3.1-3.2, App. C).

Everything here is a pure numpy function (float64 internally). Policies enter only through their actions at given
states, or as callables ``states (N, obs_dim) -> actions``: observation normalisation and action squashing are the
callable's business. A policy's deterministic action should be the one actually executed (the mean clipped to the
action bounds, or a tanh-bounded mean): see docs/design.md, "Distances use the executed action".

Definitions, with ``mu(s)`` a policy's deterministic (mean) action and ``sigma(s)`` its per-dimension std:

- per-state distance, deterministic (App. C):  ``d(s) = || mu_a(s) - mu_b(s) ||_2``;
- per-state distance, 2-Wasserstein between diagonal Gaussians (Sec. 3.1):
  ``d(s) = sqrt(|| mu_a(s) - mu_b(s) ||^2 + || sigma_a(s) - sigma_b(s) ||^2)``;
- policy distance ``D(i, j)`` = mean of ``d(pi_i(s), pi_j(s))`` over the states ``s`` visited by policy ``i``
  (the paper's ``rho_theta_i`` choice of ``q``; not symmetric in ``i, j`` in general);
- novelty ``U(theta | refs) = min_j D(theta, theta_j)`` (Eq. 3).
"""

from collections.abc import Callable, Sequence
from typing import Literal, cast

import numpy as np
from numpy.typing import ArrayLike

Metric = Literal["deterministic", "wasserstein2"]
"""Name of a per-state distance."""
ACTION_METRICS: tuple[str, ...] = ("deterministic", "wasserstein2")
"""The per-state distances between the actions of two policies (this module)."""
METRICS: tuple[str, ...] = (*ACTION_METRICS, "state")
"""Every distance between policies npsco measures: the per-state action distances, and `state`, the distance between
the distributions of the states the policies visit (`npsco.novelty.states`)."""
Actions = ArrayLike | tuple[ArrayLike, ArrayLike]
"""Deterministic actions ``(..., A)``, or ``(mean, std)`` pairs of such arrays for ``"wasserstein2"``."""
Policy = Callable[[np.ndarray], Actions]
"""``states (N, obs_dim) -> actions (N, A)``, or ``-> (mean (N, A), std (N, A))`` for ``"wasserstein2"``."""


def deterministic_distance(mean_a: ArrayLike, mean_b: ArrayLike) -> np.ndarray:
    """Per-state L2 distance between deterministic actions: ``||mean_a - mean_b||_2`` over the last axis.

    Not squared, not averaged over action dimensions; leading axes broadcast. Returns shape ``broadcast(...)[:-1]``.
    """
    diff = np.asarray(mean_a, dtype=np.float64) - np.asarray(mean_b, dtype=np.float64)
    return np.sqrt(sum_of_squares(diff))


def sum_of_squares(x: np.ndarray) -> np.ndarray:
    """sum over the last axis of x^2, added in the order of that axis: each state's sum is the same whatever states
    are beside it (numpy's reductions choose their order by the array's shape)."""
    total = x[..., 0] * x[..., 0] if x.shape[-1] else np.zeros(x.shape[:-1])
    for k in range(1, x.shape[-1]):
        total = total + x[..., k] * x[..., k]
    return total


def wasserstein2_distance(mean_a: ArrayLike, std_a: ArrayLike, mean_b: ArrayLike, std_b: ArrayLike) -> np.ndarray:
    """Closed-form 2-Wasserstein distance between diagonal Gaussians, per state (last axis = action dimensions).

    ``W2 = sqrt(||m_a - m_b||^2 + ||s_a - s_b||^2)``: the square root of the paper's
    ``||m1 - m2||^2 + tr[S1 + S2 - 2 (S1^1/2 S2 S1^1/2)^1/2]`` with diagonal covariances ``S = diag(s^2)``.
    Standard deviations must be non-negative (ValueError otherwise).
    """
    std_a = np.asarray(std_a, dtype=np.float64)
    std_b = np.asarray(std_b, dtype=np.float64)
    if np.any(std_a < 0) or np.any(std_b < 0):
        raise ValueError("standard deviations must be non-negative")
    mean_diff = np.asarray(mean_a, dtype=np.float64) - np.asarray(mean_b, dtype=np.float64)
    return np.sqrt(sum_of_squares(mean_diff) + sum_of_squares(std_a - std_b))


def per_state_distance(actions_a: Actions, actions_b: Actions, metric: Metric = "deterministic") -> np.ndarray:
    """Per-state distance ``d`` between two policies' actions at the same states, with the chosen metric.

    ``"deterministic"`` takes action arrays ``(..., A)``; ``"wasserstein2"`` takes ``(mean, std)`` pairs of them.
    """
    if metric == "deterministic":
        return deterministic_distance(cast(ArrayLike, actions_a), cast(ArrayLike, actions_b))
    if metric == "wasserstein2":
        (mean_a, std_a), (mean_b, std_b) = (
            cast(tuple[ArrayLike, ArrayLike], actions_a),
            cast(tuple[ArrayLike, ArrayLike], actions_b),
        )
        return wasserstein2_distance(mean_a, std_a, mean_b, std_b)
    raise ValueError(f"unknown metric {metric!r}; expected 'deterministic' or 'wasserstein2'")


def policy_distance(actions_i: Actions, actions_j: Actions, metric: Metric = "deterministic") -> float:
    """Policy distance ``D(i, j)``: mean per-state distance over the states visited by policy ``i``.

    ``actions_i`` and ``actions_j`` are the actions of policies ``i`` and ``j`` at those same N states (shape
    ``(N, A)``, or ``(mean, std)`` pairs for ``"wasserstein2"``). ValueError when there are no states.
    """
    distances = per_state_distance(actions_i, actions_j, metric)
    if distances.size == 0:
        raise ValueError("policy distance needs at least one state")
    return float(np.mean(distances))


def novelty(distances_to_refs: ArrayLike) -> float | np.ndarray:
    """Novelty ``U = min_j D(theta, theta_j)`` over the references, which lie along the last axis.

    A 1-D input gives a float; ValueError when there are no references (M = 0: novelty is undefined).
    """
    distances = np.asarray(distances_to_refs, dtype=np.float64)
    if distances.ndim == 0 or distances.shape[-1] == 0:
        raise ValueError("novelty needs at least one reference policy (M = 0)")
    result = np.min(distances, axis=-1)
    return float(result) if result.ndim == 0 else result


def pairwise_distance_matrix(
    policies: Sequence[Policy], visited_states: Sequence[ArrayLike], metric: Metric = "deterministic"
) -> np.ndarray:
    """M x M matrix of policy distances: ``D[i, j]`` = mean over ``visited_states[i]`` of ``d(pi_i(s), pi_j(s))``.

    ``policies[k]`` maps states ``(N, obs_dim)`` to actions (see ``Policy``); ``visited_states[i]`` holds states visited
    by policy ``i``. The diagonal is zero; the matrix is not symmetric in general, since row ``i`` uses ``i``'s states.
    """
    if len(policies) != len(visited_states):
        raise ValueError(f"{len(policies)} policies but {len(visited_states)} sets of visited states")
    n = len(policies)
    matrix = np.zeros((n, n), dtype=np.float64)
    for i, states in enumerate(visited_states):
        states = np.asarray(states)
        own_actions = policies[i](states)
        for j in range(n):
            if j != i:
                matrix[i, j] = policy_distance(own_actions, policies[j](states), metric)
    return matrix


def mean_pairwise_distance(distance_matrix: ArrayLike) -> float:
    """Mean of the off-diagonal entries of an M x M distance matrix (the paper's default threshold ``r0``).

    ValueError unless the matrix is square with M >= 2.
    """
    matrix = np.asarray(distance_matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {matrix.shape}")
    n = matrix.shape[0]
    if n < 2:
        raise ValueError("mean pairwise distance needs at least 2 policies")
    off_diagonal = ~np.eye(n, dtype=bool)
    return float(np.mean(matrix[off_diagonal]))


def running_mean(per_step_distances: ArrayLike, discount: float = 1.0) -> np.ndarray:
    """Running (discounted) mean along one episode, per column: ``sum_{k <= t} g^(t-k) d_k / sum_{k <= t} g^(t-k)``.

    ``per_step_distances`` has shape (T, M); ``discount`` g in (0, 1] (1: the plain mean since the first step).
    Returns shape (T, M).
    """
    distances = np.asarray(per_step_distances, dtype=np.float64)
    if distances.ndim != 2:
        raise ValueError(f"expected shape (T, M), got {distances.shape}")
    if not 0 < discount <= 1:
        raise ValueError(f"discount must be in (0, 1], got {discount!r}")
    if discount == 1.0:
        steps = np.arange(1, distances.shape[0] + 1, dtype=np.float64)
        return np.cumsum(distances, axis=0) / steps[:, None]
    sums, weights = np.zeros(distances.shape[1]), 0.0
    out = np.empty_like(distances)
    for t, row in enumerate(distances):
        sums = discount * sums + row
        weights = discount * weights + 1.0
        out[t] = sums / weights
    return out


def running_novelty(per_step_distances: ArrayLike, discount: float = 1.0) -> np.ndarray:
    """Novelty along one episode, as IPD checks it: ``u_t = min_j (1 / (t + 1)) sum_{k <= t} d_j(s_k)``.

    ``per_step_distances`` has shape (T, M): the per-state distance to each of M references at each step. Returns
    shape (T,): at each step, the minimum over references of the running mean of ``d_j`` up to and including it
    (discounted by ``discount`` < 1: see ``running_mean``).
    """
    distances = np.asarray(per_step_distances, dtype=np.float64)
    if distances.ndim == 2 and distances.shape[1] == 0:
        raise ValueError("running novelty needs at least one reference policy (M = 0)")
    return np.min(running_mean(distances, discount), axis=1)
