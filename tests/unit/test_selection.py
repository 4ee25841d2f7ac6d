"""Selecting one of a slot's candidates (`npsco.selection`): the first that meets the criteria, else the one closest to
meeting both; never decided before every earlier candidate is trained, whatever order they finish in."""

from hypothesis import given, settings
from hypothesis import strategies as st

from npsco.selection import Trained, choose, meets_criteria, score


def test_the_first_that_meets_is_kept_once_the_ones_before_it_are_trained():
    meets, fails = (100.0, 1.2), (50.0, 1.5)  # baseline 100: 0.8 x 100 = 80; threshold 1
    c = [Trained(0, *fails), Trained(1, *meets), Trained(2, *meets)]
    assert choose(c[1:], 3, baseline=100.0, threshold=1.0) is None  # candidate 0 not trained yet
    assert choose(c, 3, 100.0, 1.0) == 1
    assert choose([Trained(0, *meets)], 3, 100.0, 1.0) == 0  # the slot's own seed meets: nothing else to train


def test_when_none_meets_the_closest_to_both_criteria_is_kept():
    c = [Trained(0, 60.0, 2.0), Trained(1, 90.0, 0.9), Trained(2, 200.0, 0.5)]  # scores 0.75, 0.9, 0.5
    assert choose(c[:2], 3, 100.0, 1.0) is None  # not all trained
    assert choose(c, 3, 100.0, 1.0) == 1
    assert score(c[0], 100.0, 1.0) == 0.75 and score(Trained(0, 80.0, 1.0), 100.0, 1.0) == 1.0
    tie = [Trained(0, 40.0, 0.5), Trained(1, 70.0, 0.5)]  # both 0.5 (by distance): the higher return
    assert choose(tie, 2, 100.0, 1.0) == 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 300), st.floats(0, 3)), min_size=1, max_size=5),
    st.randoms(use_true_random=False),
)
def test_the_choice_does_not_depend_on_the_order_candidates_finish_in(numbers, rng):
    candidates = [Trained(i, r, n) for i, (r, n) in enumerate(numbers)]
    shuffled = list(candidates)
    rng.shuffle(shuffled)
    assert choose(shuffled, len(candidates), 100.0, 1.0) == choose(candidates, len(candidates), 100.0, 1.0)
    kept = choose(candidates, len(candidates), 100.0, 1.0)
    assert kept is not None
    meeting = [c.index for c in candidates if meets_criteria(c.return_mean, 100.0, c.nearest, 1.0)]
    assert kept == (meeting[0] if meeting else kept)
