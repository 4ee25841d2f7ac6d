"""Tests of the Four Reward Maze: dynamics, rewards, episode ends, rendering, registration and the batched twin."""

import importlib
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

import npsco.envs
from npsco.envs import MAZE_ID
from npsco.envs.maze import GOALS, MAP_SIZE, STEP_PENALTY, FourRewardMaze, FourRewardMazeVec, goal_of


def started(start: tuple[float, float], **kwargs) -> FourRewardMaze:
    env = FourRewardMaze(**kwargs)
    env.reset(seed=0, options={"start": start})
    return env


# ---------------------------------------------------------------- single environment: dynamics and rewards


def test_a_step_moves_by_the_action_and_costs_the_step_penalty():
    env = started((5.0, 5.0))
    obs, reward, terminated, truncated, info = env.step(np.array([0.5, -0.25], dtype=np.float32))
    assert obs.dtype == np.float32
    np.testing.assert_array_equal(obs, [5.5, 4.75])
    assert reward == STEP_PENALTY == -0.01
    assert (terminated, truncated, info) == (False, False, {"goal": -1})


def test_action_is_clipped_to_unit_box():
    env = started((5.0, 5.0))
    obs, *_ = env.step(np.array([3.0, -7.0]))
    np.testing.assert_array_equal(obs, [6.0, 4.0])


@pytest.mark.parametrize(
    ("start", "action", "corner"),
    [((0.5, 15.5), (-1.0, 1.0), (0.0, 16.0)), ((15.5, 0.5), (1.0, -1.0), (16.0, 0.0))],
)
def test_position_is_clipped_to_the_map(start, action, corner):
    env = started(start)
    for _ in range(2):
        obs, reward, terminated, *_ = env.step(np.array(action))
        np.testing.assert_array_equal(obs, corner)
        assert reward == STEP_PENALTY and not terminated


@pytest.mark.parametrize(
    ("code", "start", "action", "reward"),
    [
        (0, (8.0, 14.5), (0.0, 1.0), 5.0),
        (1, (8.0, 1.5), (0.0, -1.0), 5.0),
        (2, (1.5, 8.0), (-1.0, 0.0), 10.0),
        (3, (14.5, 8.0), (1.0, 0.0), 1.0),
    ],
)
def test_entering_a_region_pays_its_reward_and_terminates(code, start, action, reward):
    assert GOALS[code][2] == reward
    env = started(start)
    obs, r, terminated, truncated, info = env.step(np.array(action))
    assert (r, terminated, truncated, info["goal"]) == (reward, True, False, code)
    assert goal_of(obs) == code


def test_region_border_counts_as_inside():
    env = started((8.0, 14.0))
    obs, reward, terminated, _, info = env.step(np.array([0.0, 1.0]))
    np.testing.assert_array_equal(obs, [8.0, 15.0])  # exactly GOAL_RADIUS from the top centre
    assert (reward, terminated, info["goal"]) == (5.0, True, 0)


def test_truncation_at_max_steps():
    env = started((4.0, 4.0), max_steps=5)
    for _ in range(4):
        assert env.step(np.zeros(2))[2:4] == (False, False)
    _, reward, terminated, truncated, _ = env.step(np.zeros(2))
    assert (reward, terminated, truncated) == (STEP_PENALTY, False, True)


def test_default_max_steps_is_100():
    env = started((4.0, 4.0))
    ends = [env.step(np.zeros(2))[3] for _ in range(100)]
    assert ends == [False] * 99 + [True]


@settings(max_examples=60, deadline=None)
@given(
    start=st.tuples(st.floats(0, MAP_SIZE), st.floats(0, MAP_SIZE)).filter(lambda s: goal_of(np.array(s)) < 0),
    actions=st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)), min_size=1, max_size=30),
)
def test_positions_always_stay_in_the_map(start, actions):
    env = FourRewardMaze()
    env.reset(options={"start": start})
    for action in actions:
        obs, _, terminated, _, info = env.step(np.array(action))
        assert env.observation_space.contains(obs)
        assert info["goal"] == goal_of(obs)
        if terminated:
            break


# ---------------------------------------------------------------- goal_of and starts


def test_goal_of():
    points = np.array([[8.0, 16.0], [8.0, 0.0], [0.0, 8.0], [16.0, 8.0], [8.0, 8.0], [8.0, 15.0], [8.0, 14.99]])
    np.testing.assert_array_equal(goal_of(points), [0, 1, 2, 3, -1, 0, -1])
    assert goal_of(points.reshape(7, 1, 2)).shape == (7, 1)
    assert goal_of(np.array([0.5, 8.5])).shape == () and goal_of(np.array([0.5, 8.5])) == 2


def test_start_option_sets_the_start():
    obs, info = FourRewardMaze().reset(options={"start": (3.0, 12.5)})
    np.testing.assert_array_equal(obs, [3.0, 12.5])
    assert obs.dtype == np.float32 and info == {}


@pytest.mark.parametrize(
    ("start", "message"),
    [
        ((-0.1, 5.0), "outside the map"),
        ((5.0, 16.5), "outside the map"),
        ((float("nan"), 5.0), "outside the map"),
        ((8.0, 15.5), "inside the 'top' reward region"),
        ((0.5, 8.5), "inside the 'left' reward region"),
        ((1.0, 2.0, 3.0), "pair"),
    ],
)
def test_start_option_is_validated(start, message):
    with pytest.raises(ValueError, match=message):
        FourRewardMaze().reset(options={"start": start})


def test_random_starts_are_outside_regions_and_cover_the_map():
    env = FourRewardMaze()
    starts = np.array([env.reset(seed=seed)[0] for seed in range(300)])
    assert (goal_of(starts) == -1).all()
    assert ((starts >= 0) & (starts <= MAP_SIZE)).all()
    assert starts.min() < 1.0 and starts.max() > MAP_SIZE - 1.0


def test_seeded_resets_are_reproducible():
    a, b = FourRewardMaze(), FourRewardMaze()
    np.testing.assert_array_equal(a.reset(seed=7)[0], b.reset(seed=7)[0])
    np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
    assert not np.array_equal(a.reset(seed=7)[0], a.reset(seed=8)[0])


def test_wrong_action_shape_is_rejected():
    with pytest.raises(ValueError, match="shape"):
        started((5.0, 5.0)).step(np.zeros(3))


# ---------------------------------------------------------------- gymnasium API, rendering, registration


def test_check_env_passes_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(MAZE_ID, render_mode="rgb_array").unwrapped)


def test_render_draws_map_regions_and_trajectory():
    env = FourRewardMaze(render_mode="rgb_array")
    env.reset(seed=0, options={"start": (4.0, 4.0)})
    first = env.render()
    assert first.shape == (256, 256, 3) and first.dtype == np.uint8
    region_colours = {tuple(first[128, 2]), tuple(first[128, 253]), tuple(first[2, 128]), tuple(first[253, 128])}
    assert len(region_colours) == 4  # left, right, top, bottom: four distinct colours
    background = tuple(first[128, 128])
    assert background not in region_colours
    env.step(np.array([1.0, 1.0]))
    second = env.render()
    assert not np.array_equal(first, second)
    # the segment (4, 4) -> (5, 5) is drawn: its midpoint pixel is no longer background
    assert tuple(second[256 - 72, 72]) != background


def test_render_size_and_no_render_mode():
    env = FourRewardMaze(render_mode="rgb_array", render_size=64)
    env.reset(seed=0)
    assert env.render().shape == (64, 64, 3)
    env = FourRewardMaze()
    env.reset(seed=0)
    assert env.render() is None


def test_gymnasium_make_and_make_vec():
    env = gym.make(MAZE_ID, max_steps=3)
    assert isinstance(env.unwrapped, FourRewardMaze) and env.spec.max_episode_steps is None
    env.reset(seed=0)
    assert [env.step(np.zeros(2))[3] for _ in range(3)] == [False, False, True]
    vec = gym.make_vec(MAZE_ID, num_envs=3)
    assert isinstance(vec, FourRewardMazeVec) and vec.reset(seed=0)[0].shape == (3, 2)


def test_registration_is_idempotent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(npsco.envs)
    assert gym.spec(MAZE_ID).vector_entry_point == "npsco.envs.maze:FourRewardMazeVec"


# ---------------------------------------------------------------- batched twin


def test_vec_attributes():
    vec = FourRewardMazeVec(4)
    assert vec.num_envs == 4 and vec.max_steps == 100
    assert vec.single_observation_space == FourRewardMaze().observation_space
    assert vec.single_action_space == FourRewardMaze().action_space
    assert vec.observation_space.shape == (4, 2) and vec.action_space.shape == (4, 2)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP


def policy_actions(rng: np.random.Generator, obs: np.ndarray) -> np.ndarray:
    """Even envs head (noisily, too fast: clipped) for a region, odd envs walk at random: both goals and timeouts."""
    targets = np.array([GOALS[i % 4][1] for i in range(len(obs))])
    heading = (targets - obs) / np.linalg.norm(targets - obs, axis=1, keepdims=True)
    actions = rng.uniform(-1.5, 1.5, size=obs.shape)
    actions[::2] += 1.5 * heading[::2]
    return actions.astype(np.float32)


def assert_same_step(ours, theirs):
    obs, rewards, terminations, truncations, infos = ours
    s_obs, s_rewards, s_terminations, s_truncations, s_infos = theirs
    np.testing.assert_array_equal(obs, s_obs)
    np.testing.assert_array_equal(rewards, s_rewards)
    np.testing.assert_array_equal(terminations, s_terminations)
    np.testing.assert_array_equal(truncations, s_truncations)
    dones = terminations | truncations
    np.testing.assert_array_equal(infos["_final_obs"], dones)
    np.testing.assert_array_equal(infos["_goal"], True)
    if dones.any():
        np.testing.assert_array_equal(s_infos["_final_obs"], dones)
        np.testing.assert_array_equal(infos["final_obs"][dones], np.stack(s_infos["final_obs"][dones]))
        np.testing.assert_array_equal(infos["goal"][dones], s_infos["final_info"]["goal"][dones])
        np.testing.assert_array_equal(infos["final_info"]["goal"][dones], s_infos["final_info"]["goal"][dones])
    np.testing.assert_array_equal(infos["goal"][~dones], s_infos["goal"][~dones])


def test_vec_matches_sync_vector_env():
    n, max_steps = 8, 15
    ours = FourRewardMazeVec(n, max_steps=max_steps)
    theirs = SyncVectorEnv([lambda: FourRewardMaze(max_steps=max_steps)] * n, autoreset_mode=AutoresetMode.SAME_STEP)
    rng = np.random.default_rng(0)
    obs, _ = ours.reset(seed=42)
    np.testing.assert_array_equal(obs, theirs.reset(seed=42)[0])
    n_terminated = n_truncated = 0
    for t in range(400):
        if t == 150:
            mask = rng.random(n) < 0.5
            obs, _ = ours.reset(seed=1000, options={"reset_mask": mask})
            np.testing.assert_array_equal(obs, theirs.reset(seed=1000, options={"reset_mask": mask})[0])
        if t == 300:
            seeds = [None, 3, None, 5, 6, None, 8, 9]
            obs, _ = ours.reset(seed=seeds)
            np.testing.assert_array_equal(obs, theirs.reset(seed=seeds)[0])
        actions = policy_actions(rng, obs)
        step = ours.step(actions)
        assert_same_step(step, theirs.step(actions))
        obs = step[0]
        n_terminated += step[2].sum()
        n_truncated += step[3].sum()
    assert n_terminated > 50 and n_truncated > 50  # both kinds of episode end were exercised


def test_vec_reset_mask_keeps_the_other_environments():
    vec = FourRewardMazeVec(3, max_steps=3)
    vec.reset(seed=0)
    for _ in range(2):
        obs, *_ = vec.step(np.zeros((3, 2)))
    mask = np.array([True, False, False])
    new_obs, _ = vec.reset(seed=5, options={"reset_mask": mask})
    np.testing.assert_array_equal(new_obs[1:], obs[1:])
    np.testing.assert_array_equal(new_obs[0], FourRewardMaze().reset(seed=5)[0])
    _, _, _, truncations, _ = vec.step(np.zeros((3, 2)))
    np.testing.assert_array_equal(truncations, [False, True, True])  # the step counters of the others kept going


@pytest.mark.parametrize(
    "mask", [np.zeros(3, dtype=bool), np.ones(2, dtype=bool), np.ones(3, dtype=int)], ids=["none", "shape", "dtype"]
)
def test_vec_reset_mask_is_validated(mask):
    with pytest.raises(ValueError, match="reset_mask"):
        FourRewardMazeVec(3).reset(options={"reset_mask": mask})


def test_vec_start_option():
    vec = FourRewardMazeVec(2)
    np.testing.assert_array_equal(vec.reset(options={"start": (3.0, 4.0)})[0], [[3.0, 4.0], [3.0, 4.0]])
    starts = np.array([[3.0, 4.0], [12.0, 2.5]])
    np.testing.assert_array_equal(vec.reset(options={"start": starts})[0], starts)
    with pytest.raises(ValueError, match="'right' reward region"):
        vec.reset(options={"start": [[3.0, 4.0], [15.5, 8.0]]})
    with pytest.raises(ValueError, match="shape"):
        vec.reset(options={"start": np.zeros((3, 2))})


def test_vec_unseeded_resets_differ_and_seeded_ones_repeat():
    first, second = FourRewardMazeVec(4).reset()[0], FourRewardMazeVec(4).reset()[0]
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(FourRewardMazeVec(4).reset(seed=3)[0], FourRewardMazeVec(4).reset(seed=3)[0])


def test_vec_misuse_is_rejected():
    vec = FourRewardMazeVec(2)
    with pytest.raises(RuntimeError, match="reset"):
        vec.step(np.zeros((2, 2)))
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        vec.step(np.zeros(2))
    with pytest.raises(ValueError, match="seeds"):
        vec.reset(seed=[1, 2, 3])
