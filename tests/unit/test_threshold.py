"""The default threshold r0 (mean pairwise distance of the references) in either metric, and its per-step profile
rho(t) (IPD's `r0_profile=reference`), on hand-built maze policies whose distances are known."""

import numpy as np
import pytest

from npsco.errors import NpscoError
from npsco.novelty.threshold import default_threshold, distance_profile


def test_distance_profile_averages_the_running_means_of_the_episodes_still_running():
    # pair A: episodes [1, 3] (running means 1, 2) and [2] (2); pair B: [0, 0, 6] (0, 0, 2)
    profile = distance_profile([[np.array([1.0, 3.0]), np.array([2.0])], [np.array([0.0, 0.0, 6.0])]])
    np.testing.assert_allclose(profile, [(1 + 2 + 0) / 3, (2 + 0) / 2, 2.0])
    discounted = distance_profile([[np.array([1.0, 0.0])]], discount=0.5)
    np.testing.assert_allclose(discounted, [1.0, 0.5 / 1.5])
    with pytest.raises(NpscoError, match="non-empty"):
        distance_profile([[np.zeros(0)]])


def test_r0_in_the_deterministic_and_the_wasserstein_metric(maze_policies):
    const_policy = maze_policies.const
    a, b = const_policy([0.0, 0.0]), const_policy([0.3, 0.4])  # mean actions 0.5 apart
    th = default_threshold([a, b], episodes=3, seed=0)
    assert th.r0 == pytest.approx(0.5) and th.metric == "deterministic"
    np.testing.assert_allclose(th.profile, 1.0)  # constant distances: the running mean is r0 at every step
    b.log_std = np.log(np.array([1.0, 0.25], np.float32))  # std 1 and 0.25 vs 1 and 1: W2 adds 0.75^2
    w2 = default_threshold([a, b], episodes=3, seed=0, metric="wasserstein2")
    assert w2.r0 == pytest.approx(np.sqrt(0.25 + 0.75**2), rel=1e-6) and w2.metric == "wasserstein2"
    assert default_threshold([a, b], episodes=3, seed=0).r0 == pytest.approx(0.5)  # std ignored by the default metric
    assert w2.to_dict()["metric"] == "wasserstein2" and len(w2.to_dict()["profile"]) == len(w2.profile)


def test_the_profile_follows_the_running_distance_along_the_episodes(maze_policies):
    # the step policy acts (1, 0) right of x = 8 and (0.2, 0) left of it; against the constant (1, 0) its distance is
    # 0 or 0.8 by side; both policies run right from their start, so the running distance changes along the episode
    a, b = maze_policies.step(), maze_policies.const([1.0, 0.0])
    th = default_threshold([a, b], episodes=6, seed=1)
    assert th.profile.size > 1
    assert not np.allclose(th.profile, th.profile[0])  # not constant: the distance depends on the side of the map
    np.testing.assert_allclose(th.profile * th.r0, distance_profile_by_hand(a, b, episodes=6, seed=1), rtol=1e-6)


def distance_profile_by_hand(a, b, episodes, seed):
    from npsco.novelty.threshold import visited_episodes

    pairs = []
    for p, q in ((a, b), (b, a)):
        pairs.append(
            [np.linalg.norm(p.mean_action(e) - q.mean_action(e), axis=1) for e in visited_episodes(p, episodes, seed)]
        )
    return distance_profile(pairs)


def test_unknown_metric_is_refused(maze_policies):
    const_policy = maze_policies.const
    with pytest.raises(NpscoError, match="unknown novelty metric"):
        default_threshold([const_policy([0.0, 0.0]), const_policy([0.1, 0.0])], episodes=1, metric="l1")


def test_the_matrix_is_the_pairwise_distance_matrix_of_the_visited_states(maze_policies):
    from npsco.novelty.metrics import pairwise_distance_matrix
    from npsco.novelty.threshold import visited_states

    policies = [maze_policies.step(), maze_policies.const([1.0, 0.0]), maze_policies.const([0.2, 0.5])]
    th = default_threshold(policies, episodes=4, seed=2)
    states = [visited_states(p, 4, 2) for p in policies]
    expected = pairwise_distance_matrix([p.mean_action for p in policies], states)
    np.testing.assert_allclose(th.matrix, expected, rtol=1e-6)
