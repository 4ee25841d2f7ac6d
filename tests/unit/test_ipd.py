"""IPD: the two termination rules on scripted novelty sequences, then the rule inside the real `Trainer` on the maze
with hand-built policies whose actions are known, so the step at which each episode is terminated can be predicted."""

import math

import numpy as np
import pytest
import torch

from npsco.errors import NpscoError
from npsco.methods.base import MethodContext
from npsco.methods.ipd import IPD, ipd_cumulative_violation, ipd_instant_violation, profile_at, warmup_threshold
from npsco.methods.settings import MethodConfig
from npsco.novelty.metrics import running_novelty
from npsco.novelty.references import NoveltyTracker, ReferenceSet
from npsco.ppo.config import preset
from npsco.ppo.hooks import StepInfo
from npsco.ppo.rollout import RolloutSummary
from npsco.ppo.trainer import Trainer
from npsco.tasks import MAZE_ID

# ------------------------------------------------------------------------------------------- the rules, scripted
# Per-step distances to two references; reference 0 is the nearest. Running means of reference 0:
#   t:  1    2    3      4      5      6       7       8       9
#   u:  0    0    0.5    0.625  0.54   0.4833  0.4143  0.3625  0.3222
SCRIPT = np.array(
    [
        [0.0, 2.0],
        [0.0, 2.0],
        [1.5, 2.0],
        [1.0, 2.0],
        [0.2, 2.0],
        [0.2, 2.0],
        [0.0, 2.0],
        [0.0, 2.0],
        [0.0, 2.0],
        [0.0, 2.0],
    ]
)


def instant_stop(maze_policies, distances, r0, t_start):
    """Play an episode step by step through the tracker and the instant rule; the step it is ended at (or None)."""
    const = maze_policies.const
    refs = ReferenceSet([const([0.0, 0.0]), const([0.0, 0.0])])
    tracker = NoveltyTracker(refs, num_envs=1, compiled=False)  # the numpy path, which calls `distances`
    tracker.references.distances = lambda obs, action, std, metric: action  # feed the scripted distances
    for t, d in enumerate(distances, start=1):
        _, u = tracker.update(None, d[None])
        if ipd_instant_violation(u, np.array([t]) > t_start, r0)[0]:
            return t
    return None


def cumulative_stop(distances, r0, t_start, slack):
    u = running_novelty(distances)
    margin = np.zeros(1)
    for t, ut in enumerate(u, start=1):
        violated, margin = ipd_cumulative_violation(margin, np.array([ut]), np.array([t]) > t_start, r0, slack)
        if violated[0]:
            return t
    return None


@pytest.mark.parametrize("t_start,expected", [(0, 1), (1, 2), (2, 6), (3, 6), (5, 6), (6, 7), (8, 9)])
def test_instant_rule_ends_at_the_first_step_after_t_start_with_novelty_below_r0(t_start, expected, maze_policies):
    # r0 = 0.5: u < r0 at t = 1, 2, 6, 7, ...; u == r0 at t = 3 is not a violation
    assert instant_stop(maze_policies, SCRIPT, r0=0.5, t_start=t_start) == expected


def test_instant_rule_never_fires_at_or_before_t_start(maze_policies):
    always_zero = np.zeros((10, 2))  # the worst possible novelty at every step
    assert instant_stop(maze_policies, always_zero, r0=0.5, t_start=9) == 10
    assert instant_stop(maze_policies, always_zero, r0=0.5, t_start=10) is None
    assert (
        instant_stop(maze_policies, SCRIPT, r0=1e-3, t_start=3) is None
    )  # novelty above a tiny r0 after t_S: never ends


def test_instant_rule_is_per_env():
    u = np.array([0.1, 0.1, 0.9, 0.1])
    steps = np.array([4, 3, 7, 1])
    np.testing.assert_array_equal(ipd_instant_violation(u, steps > 3, r0=0.5), [True, False, False, False])


@pytest.mark.parametrize(
    "t_start,slack,expected",
    [
        (3, 0.1, 9),  # margins from t = 4: +.125 +.04 -.0167 -.0857 -.1375 (-.075 at t=8) -.1778 -> sum -.253 at t = 9
        (3, 0.0, 8),  # sum first <= 0 at t = 8 (-.0749)
        (3, 0.3, 10),  # -.253 at t = 9, -.553 at t = 10
        (6, 0.1, 8),  # only t >= 7 counts: -.0857 at t = 7, -.2232 at t = 8
        (0, 0.1, 1),  # t = 1: u = 0, margin -0.5
    ],
)
def test_cumulative_rule_sums_margins_after_t_start_until_minus_slack(t_start, slack, expected):
    assert cumulative_stop(SCRIPT, r0=0.5, t_start=t_start, slack=slack) == expected


def test_cumulative_rule_later_than_instant_on_the_same_script(maze_policies):
    assert instant_stop(maze_policies, SCRIPT, r0=0.5, t_start=3) == 6
    assert cumulative_stop(SCRIPT, r0=0.5, t_start=3, slack=0.1) == 9


def test_cumulative_rule_ignores_margins_at_or_before_t_start():
    zeros = np.zeros((10, 2))
    margin = np.zeros(3)
    violated, margin = ipd_cumulative_violation(margin, np.zeros(3), np.array([1, 3, 4]) > 3, 0.5, 0.1)
    np.testing.assert_array_equal(margin, [0.0, 0.0, -0.5])
    np.testing.assert_array_equal(violated, [False, False, True])
    assert cumulative_stop(zeros, r0=0.5, t_start=10, slack=0.0) is None
    assert cumulative_stop(zeros, r0=0.5, t_start=9, slack=0.0) == 10


# ------------------------------------------------------------------------------------ through the real Trainer
@pytest.fixture(scope="module", autouse=True)
def torch_optimizers_imported():
    """The first torch optimizer of a process imports torch._dynamo (5-10 s on 2 busy cores): pay it once here, not
    inside the first test that builds a Trainer."""
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])


MAX_STEPS = 10


class RecordingIPD(IPD):
    """IPD that keeps, per rollout step, the raw observations, episode steps and its termination decisions."""

    def on_step(self, step):
        out = super().on_step(step)  # None: no episode ended
        ended = np.zeros(len(step.obs), bool) if out is None else out.terminate.copy()
        self.steps.append((step.obs.copy(), step.episode_step.copy(), ended))
        return out


def maze_trainer(refs, r0, num_envs=4, num_steps=40, seed=3, profile=None, iterations=1, **method):
    cfg = preset(MAZE_ID)
    cfg.num_envs, cfg.num_steps, cfg.num_minibatches = num_envs, num_steps, 2
    cfg.total_timesteps = iterations * num_envs * num_steps
    cfg.max_episode_steps, cfg.eval_every, cfg.seed = MAX_STEPS, 0, seed
    ipd = RecordingIPD(ReferenceSet(refs), r0, MethodConfig.of("ipd", **method), MAZE_ID, profile)
    ipd.steps = []
    trainer = Trainer(cfg, ipd, tensorboard=False)
    # the new policy: mean action exactly (0, 0) everywhere (zero weights and biases), std e^-30: it stands still
    with torch.no_grad():
        for p in trainer.agent.actor_mean.parameters():
            p.zero_()
        trainer.agent.actor_logstd.fill_(-30.0)
    resets = []
    original = trainer.envs.reset

    def spy(**kwargs):
        resets.append((len(ipd.steps) - 1, kwargs.get("options", {}).get("reset_mask").copy()))
        return original(**kwargs)

    trainer.envs.reset = spy
    return trainer, ipd, resets


def predicted_episodes(ipd, end_after):
    """From the recorded starts: per env, the (rollout step, forced?) of each episode end, given `end_after(x)`:
    the episode step at which an episode started at x is ended by the constraint (None: never, truncated)."""
    T, N = len(ipd.steps), ipd.steps[0][0].shape[0]
    ends = np.zeros((T, N), bool)
    forced = np.zeros((T, N), bool)
    for i in range(N):
        t = 0
        while t < T:
            x = ipd.steps[t][0][i, 0]
            assert abs(x - 8.0) > 0.05, "a start on the reference's switch: pick another seed"
            length = end_after(x) or MAX_STEPS
            # the agent stands still: the whole episode is at its start position
            for k in range(t, min(t + length, T)):
                np.testing.assert_array_equal(ipd.steps[k][0][i], ipd.steps[t][0][i])
                assert ipd.steps[k][1][i] == k - t + 1
            if t + length - 1 < T:
                ends[t + length - 1, i] = True
                forced[t + length - 1, i] = end_after(x) is not None
            t += length
    return ends, forced


@pytest.mark.parametrize("t_start", [1, 3, 5])
def test_trainer_terminates_resets_and_counts_at_the_predicted_step(t_start, maze_policies):
    # distance to the reference: 0.2 on the left half, 1.0 on the right; r0 = 0.5
    trainer, ipd, resets = maze_trainer([maze_policies.step()], r0=0.5, t_start=t_start)
    buf = trainer.collect_rollout()
    ends, forced = predicted_episodes(ipd, lambda x: t_start + 1 if x < 8 else None)
    assert forced.any() and (ends & ~forced).any()  # both kinds of episode end occur
    np.testing.assert_array_equal(buf.done, ends)
    np.testing.assert_array_equal(buf.terminated, forced)  # the constraint's ends are true terminations
    assert buf.summary.forced_ends == forced.sum()
    # each forced end reset exactly that env, at that step, through reset_mask
    assert [(t, m.tolist()) for t, m in resets] == [(t, forced[t].tolist()) for t in np.flatnonzero(forced.any(1))]
    # an env whose episode was ended starts the next step from a new start position
    for t, i in zip(*np.nonzero(forced[:-1]), strict=True):
        assert not np.array_equal(ipd.steps[t + 1][0][i], ipd.steps[t][0][i])
        assert ipd.steps[t + 1][1][i] == 1
    metrics = ipd.iteration_metrics(buf.summary)
    assert metrics["ipd/terminated"] == forced.sum()
    assert metrics["ipd/terminated_frac"] == pytest.approx(forced.sum() / ends.sum())
    assert metrics["novelty/below_r0_frac"] > 0


def test_forced_ends_are_not_bootstrapped_but_truncations_are(maze_policies):
    trainer, ipd, _ = maze_trainer([maze_policies.step()], r0=0.5, t_start=3)
    buf = trainer.collect_rollout()
    terminated, truncated = buf.terminated, buf.done & ~buf.terminated
    assert terminated.any() and truncated.any()
    base = trainer.compute_advantages(buf).advantages["task"]
    nv = buf.next_values["task"]
    nv[terminated] += 1000.0  # V(s') after a forced end must not matter
    np.testing.assert_array_equal(trainer.compute_advantages(buf).advantages["task"], base)
    nv[truncated] += 1000.0  # while after a time-limit truncation it is bootstrapped
    assert not np.allclose(trainer.compute_advantages(buf).advantages["task"], base)


def test_trainer_with_the_cumulative_rule_ends_when_the_margin_sum_reaches_minus_slack(maze_policies):
    # left half: u = 0.2, margin -0.3 per step after t_S = 3; slack 0.5 -> ended at step 5 (the sum is -0.6);
    # if the sum were not reset between episodes, later episodes would end at step 4
    trainer, ipd, _ = maze_trainer([maze_policies.step()], r0=0.5, t_start=3, ipd_rule="cumulative", ipd_slack=0.5)
    buf = trainer.collect_rollout()
    ends, forced = predicted_episodes(ipd, lambda x: 5 if x < 8 else None)
    assert forced.sum() >= 2
    np.testing.assert_array_equal(buf.terminated, forced)
    np.testing.assert_array_equal(buf.done, ends)


def test_the_new_policys_mean_is_measured_against_every_reference_and_the_nearest_counts(maze_policies):
    # references at distance 0.3 and 0.6 from the new policy's (0, 0): u = 0.3 < r0 = 0.4 -> every episode ends at
    # t_S + 1 = 4, whatever its start
    trainer, ipd, _ = maze_trainer(
        [maze_policies.const([0.6, 0.0]), maze_policies.const([0.0, -0.3])], r0=0.4, t_start=3
    )
    buf = trainer.collect_rollout()
    ends, forced = predicted_episodes(ipd, lambda x: 4)
    np.testing.assert_array_equal(buf.terminated, forced)
    assert forced.sum() == 4 * (40 // 4)
    assert ipd.iteration_metrics(buf.summary)["ipd/terminated_frac"] == 1.0


@pytest.mark.parametrize("rule", ["instant", "cumulative"])
def test_with_a_tiny_r0_nothing_is_ever_terminated(rule, maze_policies):
    trainer, ipd, resets = maze_trainer([maze_policies.step()], r0=1e-3, t_start=1, ipd_rule=rule)
    buf = trainer.collect_rollout()
    assert not buf.terminated.any() and buf.summary.forced_ends == 0 and resets == []
    assert buf.done.sum() == 4 * (40 // MAX_STEPS)  # only truncations
    metrics = ipd.iteration_metrics(buf.summary)
    assert metrics["ipd/terminated_frac"] == 0.0 and metrics["novelty/below_r0_frac"] == 0.0


def test_a_whole_training_iteration_logs_the_ipd_metrics(maze_policies):
    trainer, ipd, _ = maze_trainer([maze_policies.const([0.3, 0.0])], r0=0.5, t_start=2, num_envs=2, num_steps=12)
    result = trainer.train(progress=False)
    (row,) = result.metrics
    assert row["ipd/terminated_frac"] == 1.0 and row["ipd/terminated"] == 2 * 4  # episodes of 3 steps
    assert row["novelty/r0"] == 0.5
    assert row["novelty/running_mean"] == pytest.approx(0.3, rel=1e-5)
    assert row["novelty/episode_mean"] == pytest.approx(0.3, rel=1e-5)
    assert row["novelty/below_r0_frac"] == 1.0
    assert result.policy.metadata["method_config"]["t_start"] == 2


def test_references_of_another_task_are_refused_by_the_trainer(maze_policies):
    other = maze_policies.build([(np.zeros((3, 2)), np.zeros(3))])
    other.action_low, other.action_high = -np.ones(3, np.float32), np.ones(3, np.float32)
    with pytest.raises(NpscoError, match=r"action space Box\(3,\) \[-1, 1\] but npsco/FourRewardMaze-v0 has Box\(2,\)"):
        maze_trainer([other], r0=0.5)


def test_ipd_refuses_a_non_positive_threshold(maze_policies):
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(NpscoError, match="r0 must be a positive number"):
            IPD(ReferenceSet([maze_policies.const([0.0, 0.0])]), bad, MethodConfig.of("ipd"), MAZE_ID)


def test_novelty_metrics_of_an_iteration_on_scripted_values(maze_policies):
    trainer, ipd, _ = maze_trainer([maze_policies.const([0.3, 0.0])], r0=0.5, t_start=1, num_envs=2)
    ipd._reset_stats()
    script = iter([np.array([0.2, 0.9]), np.array([0.4, 0.6]), np.array([0.7, 0.1])])
    ipd.tracker.update = lambda obs, action, std=None: (None, next(script))
    zeros = np.zeros((2, 2), np.float32)
    for steps in ([1, 1], [2, 2], [3, 1]):  # the constraint applies where the episode step is > t_S = 1
        ipd.novelty(
            StepInfo(
                None,
                zeros,
                zeros,
                np.zeros(2),
                np.zeros(2, bool),
                np.zeros(2, bool),
                np.array(steps),
                np.ones(2, np.float32),
            )
        )
    metrics = ipd.iteration_metrics(RolloutSummary())
    assert metrics["novelty/running_mean"] == pytest.approx(2.9 / 6)  # every step of every env
    assert metrics["novelty/running_min"] == pytest.approx(0.4)  # over 0.4, 0.6, 0.7 (the constrained steps)
    assert metrics["novelty/below_r0_frac"] == pytest.approx(1 / 3)
    empty = ipd.iteration_metrics(RolloutSummary())  # the statistics were reset
    assert empty["novelty/running_mean"] == 0.0 and math.isnan(empty["novelty/running_min"])


def test_on_step_answers_none_unless_it_ends_an_episode_past_t_start(maze_policies):
    trainer, ipd, _ = maze_trainer([maze_policies.const([0.3, 0.0])], r0=0.5, t_start=3, num_envs=2)
    zeros = np.zeros((2, 2), np.float32)
    for u, steps, ended in (
        ([0.9, 0.6], [5, 5], None),  # novel enough
        ([0.2, 0.1], [3, 1], None),  # below r0, but not past t_S
        ([0.2, 0.9], [4, 4], [True, False]),
    ):
        ipd.tracker.update = lambda obs, action, std=None, u=u: (None, np.array(u))
        step = StepInfo(
            zeros, zeros, zeros, np.zeros(2), np.zeros(2, bool), np.zeros(2, bool), np.array(steps), zeros[0]
        )
        out = ipd.on_step(step)
        np.testing.assert_array_equal(ipd.constrained, np.array(steps) > 3)
        assert (out is None) if ended is None else out.terminate.tolist() == ended


# ------------------------------------------------------------------ settings that loosen the start of training
def test_warmup_threshold_rises_linearly_to_r0_over_the_warmup_fraction():
    # 10 iterations, warm-up over half of them: progress (it - 1) / 10
    assert [warmup_threshold(2.0, 0.5, it, 10) for it in (1, 2, 3, 6, 7, 10)] == pytest.approx([0, 0.4, 0.8, 2, 2, 2])
    assert warmup_threshold(2.0, 0.0, 1, 10) == 2.0  # no warm-up: r0 from the first iteration
    assert warmup_threshold(2.0, 1.0, 0, 10) == 0.0  # before the first iteration: never negative


def test_profile_at_reads_the_step_and_holds_the_last_value():
    np.testing.assert_array_equal(profile_at(np.array([1.0, 2.0, 3.0]), np.array([1, 3, 5, 2])), [1, 3, 3, 2])


def test_discounted_tracker_matches_the_discounted_running_novelty(maze_policies):
    from npsco.novelty.metrics import running_mean

    np.testing.assert_allclose(running_mean(np.array([[1.0], [0.0], [0.0]]), 0.5)[:, 0], [1, 1 / 3, 1 / 7])
    rng = np.random.default_rng(0)
    d = rng.uniform(0, 2, (30, 2))
    for g in (1.0, 0.9, 0.5):
        refs = ReferenceSet([maze_policies.const([0.0, 0.0]), maze_policies.const([0.0, 0.0])])
        tracker = NoveltyTracker(refs, num_envs=1, discount=g, compiled=False)  # the numpy path calls `distances`
        tracker.references.distances = lambda obs, action, std, metric: action  # feed the scripted distances
        u = [tracker.update(None, row[None])[1][0] for row in d]
        np.testing.assert_allclose(u, running_novelty(d, g), rtol=1e-12)
    with pytest.raises(NpscoError, match="discount"):
        NoveltyTracker(ReferenceSet([maze_policies.const([0.0, 0.0])]), num_envs=1, discount=0.0)


def test_warmup_lets_every_episode_run_until_the_threshold_passes_the_novelty(maze_policies):
    # the reference is 0.3 away everywhere, r0 = 0.5 reached at half of 4 iterations: r0 = 0, 0.25, 0.5, 0.5
    trainer, ipd, _ = maze_trainer([maze_policies.const([0.3, 0.0])], r0=0.5, t_start=2, r0_warmup=0.5, iterations=4)
    forced, r0_logged, below = [], [], []
    for it in (1, 2, 3, 4):
        ipd.begin_iteration(it)
        buf = trainer.collect_rollout()
        forced.append(buf.summary.forced_ends)
        metrics = ipd.iteration_metrics(buf.summary)
        r0_logged.append(metrics["novelty/r0"])
        below.append(metrics["novelty/below_r0_frac"])
    assert forced[0] == forced[1] == 0 and forced[2] > 0 and forced[3] > 0
    assert r0_logged == pytest.approx([0.0, 0.25, 0.5, 0.5])
    # below the threshold the constraint applied, not the full r0: none while it is under 0.3
    assert below[0] == below[1] == 0.0 and below[2] > 0 and below[3] > 0


@pytest.mark.parametrize("profile,end_step", [([1.0, 1.0, 1.0], 2), ([1.0, 0.5, 1.0], 3), ([1.0, 0.5, 0.5], None)])
def test_a_reference_profile_scales_the_threshold_per_episode_step(profile, end_step, maze_policies):
    # the reference is 0.3 away, r0 = 0.5, t_S = 1: the episode ends at the first step t >= 2 with 0.5 rho(t) > 0.3
    trainer, ipd, _ = maze_trainer(
        [maze_policies.const([0.3, 0.0])], r0=0.5, t_start=1, r0_profile="reference", seed=5, profile=np.array(profile)
    )
    buf = trainer.collect_rollout()
    ends, forced = predicted_episodes(ipd, lambda x: end_step)
    np.testing.assert_array_equal(buf.terminated, forced)
    metrics = ipd.iteration_metrics(buf.summary)
    assert metrics["ipd/first_check_frac"] == (1.0 if end_step == 2 else 0.0)
    assert trainer.policy().metadata["method_config"]["r0_profile_values"] == profile


def test_a_profile_is_used_exactly_when_r0_profile_is_reference(maze_policies):
    refs = ReferenceSet([maze_policies.const([0.0, 0.0])])
    with pytest.raises(NpscoError, match="r0_profile=reference needs"):
        IPD(refs, 0.5, MethodConfig.of("ipd", r0_profile="reference"), MAZE_ID)
    with pytest.raises(NpscoError, match="r0_profile=reference needs"):
        IPD(refs, 0.5, MethodConfig.of("ipd"), MAZE_ID, np.ones(3))
    with pytest.raises(NpscoError, match="positive numbers"):
        IPD(refs, 0.5, MethodConfig.of("ipd", r0_profile="reference"), MAZE_ID, np.array([1.0, -1.0]))


@pytest.mark.parametrize(
    "settings,message",
    [
        (dict(novelty_discount=0.0), "novelty_discount"),
        (dict(novelty_discount=1.5), "novelty_discount"),
        (dict(r0_warmup=-0.1), "r0_warmup"),
        (dict(r0_warmup=2.0), "r0_warmup"),
        (dict(r0_profile="x"), "r0_profile"),
        (dict(method="wsr", r0_warmup=0.5), "r0_warmup: not a setting of method wsr"),
        (dict(method="cpo", r0_profile="reference"), "r0_profile: not a setting of method cpo"),
    ],
)
def test_bad_threshold_settings_are_refused(settings, message):
    with pytest.raises(NpscoError, match=message):
        MethodConfig.of(settings.pop("method", "ipd"), **settings).validate()


def test_only_ipd_with_r0_profile_reference_uses_a_threshold_profile(maze_policies):
    from npsco.methods import METHODS, make_method

    assert [m for m in METHODS if METHODS[m].uses_profile(MethodConfig.of(m))] == []
    config = MethodConfig.of("ipd", r0_profile="reference")
    assert METHODS["ipd"].uses_profile(config)
    refs = ReferenceSet([maze_policies.const([0.0, 0.0])])
    ipd = make_method(config, MethodContext(MAZE_ID, refs, 0.5, r0_profile=np.ones(3)))
    assert isinstance(ipd, IPD) and ipd.metadata()["r0_profile_values"] == [1.0, 1.0, 1.0]
