"""`direct_step` gives Gymnasium's own results, bit for bit, for the three tasks it knows, and is not used elsewhere."""

from __future__ import annotations

import os

import gymnasium as gym
import mujoco
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npsco.envs.direct_step import (
    TESTED_GYMNASIUM,
    _kernel_params,
    _numpy_outcome,
    _outcome,
    direct_step,
    gymnasium_release,
)
from npsco.envs.make import make_env

UNTESTED = (
    f"Gymnasium {gym.__version__} is not one the direct step was checked against: run these tests with it and add it "
    "to npsco.envs.direct_step.TESTED_GYMNASIUM if they pass (until then npsco steps with Gymnasium's own)"
)


@pytest.fixture(autouse=True)
def tested_gymnasium():
    """Skip on an untested Gymnasium release; fail instead under CI (`CI=true`: scripts/setup.sh pins the tested one,
    so another there means the pin broke)."""
    if gymnasium_release() not in TESTED_GYMNASIUM:
        if os.environ.get("CI") == "true":
            pytest.fail(UNTESTED)
        pytest.skip(UNTESTED)


# Options of the tasks' own that change their step's arithmetic (weights, and no termination): a task registered by a
# user with them gets the direct step too, so it must follow them.
WALKER_OPTIONS = {
    "terminate_when_unhealthy": False,
    "healthy_reward": 0.3,
    "forward_reward_weight": 1.7,
    "ctrl_cost_weight": 0.37,
}
CHEETAH_OPTIONS = {"forward_reward_weight": 1.7, "ctrl_cost_weight": 0.37}


@pytest.mark.parametrize(
    ("env_id", "options", "action_kind"),
    [
        ("Hopper-v5", None, np.float32),
        ("Walker2d-v5", None, np.float32),
        ("HalfCheetah-v5", None, np.float32),
        ("Hopper-v5", WALKER_OPTIONS, np.float64),
        ("Walker2d-v5", WALKER_OPTIONS, list),
        ("HalfCheetah-v5", CHEETAH_OPTIONS, np.float64),
    ],
)
def test_direct_step_matches_gymnasium_bit_for_bit(env_id, options, action_kind):
    limit = 20  # truncations every 20 steps; the large actions make Hopper and Walker2d fall (terminations)
    if options is None:
        direct, gym_env = make_env(env_id, limit), make_env(env_id, limit)
    else:
        direct, gym_env = (gym.make(env_id, max_episode_steps=limit, **options) for _ in range(2))
    step = direct_step(direct)
    assert step is not None
    rng = np.random.default_rng(3)
    obs_d, _ = direct.reset(seed=11)
    obs_g, _ = gym_env.reset(seed=11)
    np.testing.assert_array_equal(obs_d, obs_g)
    ends = {"terminated": 0, "truncated": 0}
    unhealthy = 0  # steps where Hopper or Walker2d is unhealthy (only ends the episode when it terminates)
    for _ in range(600):
        action = rng.uniform(-1, 1, direct.action_space.shape) * 3
        action = action.tolist() if action_kind is list else action.astype(action_kind)
        obs_d, reward_d, term_d, trunc_d = step(action)
        obs_g, reward_g, term_g, trunc_g, _ = gym_env.step(action)
        np.testing.assert_array_equal(obs_d, obs_g)
        assert obs_d.dtype == obs_g.dtype
        assert reward_d == reward_g and np.float64(reward_d).tobytes() == np.float64(reward_g).tobytes()
        assert (term_d, trunc_d) == (bool(term_g), bool(trunc_g))
        ends["terminated"] += term_g
        ends["truncated"] += trunc_g
        unhealthy += env_id != "HalfCheetah-v5" and not gym_env.unwrapped.is_healthy  # type: ignore[attr-defined]
        if term_g or trunc_g:
            obs_d, _ = direct.reset()
            obs_g, _ = gym_env.reset()
            np.testing.assert_array_equal(obs_d, obs_g)
    assert ends["truncated"] > 0
    if env_id == "HalfCheetah-v5":  # never terminates
        assert ends["terminated"] == 0
    elif options is None:
        assert ends["terminated"] > 0
    else:  # unhealthy steps that did not end their episode: the option was followed
        assert ends["terminated"] == 0 and unhealthy > 0
    assert _state(direct) == _state(gym_env)


def test_direct_step_is_left_to_gymnasium_on_an_unchecked_release(monkeypatch):
    monkeypatch.setattr("npsco.envs.direct_step.TESTED_GYMNASIUM", ())
    assert direct_step(make_env("Hopper-v5")) is None


def _state(env: gym.Env) -> tuple:
    """What a saved training state holds of `env` (its time limit's count, its simulator's integration state), and
    the simulator's accelerations and forces, which the next step reads."""
    model, data = env.unwrapped.model, env.unwrapped.data  # type: ignore[attr-defined]
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    physics = np.empty(mujoco.mj_stateSize(model, spec), np.float64)
    mujoco.mj_getState(model, data, physics, spec)
    return env._elapsed_steps, physics.tobytes(), data.qacc.tobytes(), data.cfrc_ext.tobytes()  # type: ignore[attr-defined]


def test_direct_step_keeps_gymnasiums_checks():
    env = make_env("Hopper-v5")
    step = direct_step(env)
    assert step is not None
    with pytest.raises(ResetNeeded):  # OrderEnforcing: no step before a reset
        step(np.zeros(3, np.float32))
    env.reset(seed=0)
    step(np.zeros(3, np.float32))  # the first step runs Gymnasium's passive checks
    assert env.env.env.checked_step  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="Action dimension mismatch"):
        step(np.zeros(2, np.float32))


@pytest.mark.parametrize(
    "make",
    [
        lambda: gym.make("Hopper-v5", render_mode="rgb_array", width=32, height=32),  # renders in its step
        lambda: gym.make("Walker2d-v5", exclude_current_positions_from_observation=False),  # another observation
        lambda: gym.make("Hopper-v5").unwrapped,  # not wrapped as gym.make wraps it
        lambda: gym.make("InvertedPendulum-v5"),  # a task it does not know
        lambda: gym.make("Hopper-v5", disable_env_checker=True),  # another wrapper chain
    ],
)
def test_direct_step_declines_what_it_does_not_know(make):
    assert direct_step(make()) is None


def test_hopper_state_range_ends_episodes_as_gymnasium() -> None:
    """Hopper's third health check (every joint but x and z in range) agrees too: with the height and angle ranges
    opened wide and the state range narrowed, it alone ends the episodes."""
    envs = make_env("Hopper-v5"), make_env("Hopper-v5")
    for env in envs:
        task = env.unwrapped
        task._healthy_z_range, task._healthy_angle_range = (-10.0, 10.0), (-10.0, 10.0)  # type: ignore[attr-defined]
        task._healthy_state_range = (-0.5, 0.5)  # type: ignore[attr-defined]
        env.reset(seed=5)
    step = direct_step(envs[0])
    assert step is not None
    rng, ends = np.random.default_rng(0), 0
    for _ in range(200):
        action = rng.uniform(-1, 1, 3).astype(np.float32)
        obs_d, reward_d, term_d, _ = step(action)
        obs_g, reward_g, term_g, _, _ = envs[1].step(action)
        np.testing.assert_array_equal(obs_d, obs_g)
        assert (reward_d, term_d) == (reward_g, term_g)
        if term_g:
            ends += 1
            envs[0].reset()
            envs[1].reset()
    assert ends > 3


_EDGE_FLOATS = st.one_of(
    st.floats(-12.0, 12.0, width=64),
    st.sampled_from(
        [0.0, -0.0, 10.0, -10.0, 0.7, 0.8, 2.0, 100.0, -100.0, 0.2, -0.2, 1.0, -1.0, np.nan, np.inf, -np.inf]
    ),
)


def _same_reward(a: float, b: float) -> bool:
    """The same float64 bits, or both NaN (a NaN made by arithmetic, inf - inf or 0 x inf, has no defined sign: the
    compiled code and numpy's scalars differ there)."""
    a, b = np.float64(a), np.float64(b)
    return a.tobytes() == b.tobytes() or (np.isnan(a) and np.isnan(b))


_NUMBER_TYPES = st.sampled_from([float, np.float64, np.float32])
"""How a task's weight may be given: the kernels take Python floats, and leave numpy scalars (which promote otherwise
under numpy 2) to the numpy outcome."""


@pytest.mark.parametrize("env_id", ["Hopper-v5", "Walker2d-v5", "HalfCheetah-v5"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_compiled_outcome_matches_numpys_and_gymnasiums_bit_for_bit(env_id, dtype, data):
    """The compiled outcome (observation, reward, health) equals the numpy one and Gymnasium's own `_get_obs`,
    `_get_rew` and `is_healthy` on any simulator state and action: NaN and infinite values, the health ranges' own
    bounds, -0.0, the velocity clip's +-10; and a task's options (weights given as Python floats or numpy scalars,
    negative healthy reward, no termination)."""
    env = make_env(env_id)
    env.reset(seed=0)
    task = env.unwrapped
    if data.draw(st.booleans(), "options"):
        kind = data.draw(_NUMBER_TYPES, "weights' type")
        task._forward_reward_weight = kind(data.draw(_EDGE_FLOATS, "forward weight"))  # type: ignore[attr-defined]
        task._ctrl_cost_weight = kind(data.draw(_EDGE_FLOATS, "ctrl weight"))  # type: ignore[attr-defined]
        if env_id != "HalfCheetah-v5":
            task._healthy_reward = kind(data.draw(_EDGE_FLOATS, "healthy reward"))  # type: ignore[attr-defined]
            task._terminate_when_unhealthy = data.draw(st.booleans(), "terminate")  # type: ignore[attr-defined]
    qpos, qvel = task.data.qpos, task.data.qvel  # type: ignore[attr-defined]
    qpos[:] = data.draw(st.lists(_EDGE_FLOATS, min_size=qpos.size, max_size=qpos.size), "qpos")
    qvel[:] = data.draw(st.lists(_EDGE_FLOATS, min_size=qvel.size, max_size=qvel.size), "qvel")
    nu = env.action_space.shape[0]
    action = np.array(data.draw(st.lists(_EDGE_FLOATS, min_size=nu, max_size=nu), "action"), dtype)
    x_before = np.float64(data.draw(_EDGE_FLOATS, "x before"))
    with np.errstate(all="ignore"):
        compiled = _outcome(task)(x_before, action)
        numpy = _numpy_outcome(task)(x_before, action)
        gym_obs = task._get_obs()  # type: ignore[attr-defined]
        gym_reward = task._get_rew((qpos[0] - x_before) / task.dt, action)[0]  # type: ignore[attr-defined]
        gym_healthy = True if env_id == "HalfCheetah-v5" else task.is_healthy  # type: ignore[attr-defined]
    assert compiled[0].dtype == numpy[0].dtype == gym_obs.dtype == np.float64
    assert compiled[0].tobytes() == numpy[0].tobytes() == gym_obs.tobytes()
    assert _same_reward(compiled[1], numpy[1]) and _same_reward(compiled[1], gym_reward)
    stops = env_id != "HalfCheetah-v5" and task._terminate_when_unhealthy  # type: ignore[attr-defined]
    assert bool(compiled[2]) == bool(numpy[2]) == bool(stops and not gym_healthy)


@pytest.mark.parametrize(
    "setting",
    [
        {"ctrl_cost_weight": np.float64(1e-3)},  # promotes a float32 control cost to float64
        {"healthy_reward": np.float32(1.0)},
        {"healthy_reward": 1},  # an int: no -0.0 where the float gives one
        {"healthy_state_range": (np.full(10, -100.0), np.full(10, 100.0))},  # per-coordinate bounds
    ],
)
def test_settings_the_kernels_would_round_otherwise_take_the_numpy_outcome(setting):
    env = gym.make("Hopper-v5", **setting)
    assert _kernel_params(env.unwrapped) is None  # type: ignore[arg-type]
    step = direct_step(env)
    assert step is not None
    gym_env = gym.make("Hopper-v5", **setting)
    env.reset(seed=4)
    gym_env.reset(seed=4)
    rng = np.random.default_rng(1)
    for _ in range(30):
        action = rng.uniform(-1, 1, 3).astype(np.float32)
        obs, reward, terminated, _ = step(action)
        obs_g, reward_g, terminated_g, _, _ = gym_env.step(action)
        assert obs.tobytes() == obs_g.tobytes() and _same_reward(reward, reward_g) and terminated == terminated_g
        if terminated:
            break


def test_action_sizes_outside_the_kernels_sum_take_the_numpy_outcome(monkeypatch):
    task = make_env("Walker2d-v5").unwrapped  # six actions
    assert _kernel_params(task) is not None  # type: ignore[arg-type]
    monkeypatch.setattr("npsco.envs.direct_step.MAX_ACTION_SIZE", 5)
    assert _kernel_params(task) is None  # type: ignore[arg-type]


def test_an_integer_action_takes_the_numpy_outcome():
    env = make_env("Hopper-v5")
    env.reset(seed=0)
    task = env.unwrapped
    action = np.array([1, -1, 0])
    x_before = np.float64(task.data.qpos[0] - 0.01)  # type: ignore[attr-defined]
    compiled, numpy = _outcome(task)(x_before, action), _numpy_outcome(task)(x_before, action)
    assert compiled[0].tobytes() == numpy[0].tobytes() and compiled[1:] == numpy[1:]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("where", "value", "healthy"),
    [
        ("z", 0.7, False),  # each health range is open: its bounds are unhealthy
        ("z", 0.70001, True),
        ("angle", 0.2, False),
        ("angle", -0.19999, True),
        ("joint", -100.0, False),
        ("joint", 99.999, True),
        ("velocity", 100.0, False),
        ("velocity", -99.999, True),
        ("velocity", np.nan, False),
    ],
)
def test_compiled_outcome_follows_hoppers_health_ranges_at_their_bounds(dtype, where, value, healthy):
    env = make_env("Hopper-v5")
    env.reset(seed=0)
    task = env.unwrapped
    qpos, qvel = task.data.qpos, task.data.qvel  # type: ignore[attr-defined]
    qpos[:], qvel[:] = [0.0, 1.25, 0.0, 0.1, -0.1, 0.2], [0.5, -0.5, 1.0, 2.0, -3.0, 4.0]  # a healthy state
    {"z": qpos[1:2], "angle": qpos[2:3], "joint": qpos[4:5], "velocity": qvel[3:4]}[where][0] = value
    action, x_before = np.array([0.3, -0.2, 0.1], dtype), np.float64(-0.01)
    compiled, numpy = _outcome(task)(x_before, action), _numpy_outcome(task)(x_before, action)
    assert compiled[0].tobytes() == numpy[0].tobytes() and compiled[1] == numpy[1]
    assert compiled[2] == numpy[2] == (not healthy)
