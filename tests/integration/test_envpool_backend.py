"""The optional envpool backend (`npsco.envs.envpool_backend`): the same vector-env protocol as the Gymnasium backends.

envpool draws its initial states with its own generator, so the same seed gives other starts than Gymnasium. The
dynamics are the same, though: the tests put the Gymnasium env in the state envpool starts from (the observation holds
the whole state but the root's x, which neither the dynamics nor the reward depend on) and then both follow the same
trajectory, episode ends and rewards included. Skipped when envpool is not installed (`pip install "npsco[envpool]"`),
except the tests of the refusals; an installed envpool that does not import fails them."""

import json
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest

from npsco.cli import main
from npsco.cli_parser import build_parser
from npsco.envs.make import final_observations, make_vector_env
from npsco.errors import NpscoError
from npsco.logger import read_metrics
from npsco.options import PopulationOptions

TASKS = ["Hopper-v4", "Hopper-v5", "Walker2d-v4", "Walker2d-v5", "HalfCheetah-v4", "HalfCheetah-v5"]


def import_envpool():
    """envpool, or a skip when it is not installed. An installed envpool that fails to import (a broken install of the
    pinned dev extra) fails the tests instead of hiding behind a skip."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("envpool")
    except PackageNotFoundError:
        pytest.skip("envpool is not installed (pip install 'npsco[envpool]')")
    import envpool

    return envpool


@pytest.fixture(scope="module")
def envpool():
    return import_envpool()


def test_an_installed_envpool_that_does_not_import_fails_instead_of_skipping(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.2.5")
    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool raises ImportError
    with pytest.raises(ImportError):
        import_envpool()


def envpool_env(env_id: str, num_envs: int, max_episode_steps: int | None = None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # -v4 ids
        return make_vector_env(env_id, num_envs, "envpool", max_episode_steps)


def put_in_state(env: gym.Env, obs: np.ndarray) -> None:
    """Set a MuJoCo env to the state of an observation (qpos without the root's x, then qvel)."""
    u = env.unwrapped
    nq = u.model.nq
    u.set_state(np.concatenate([u.init_qpos[:1], obs[: nq - 1]]), obs[nq - 1 :])


def hopper_actions(rng: np.random.Generator, n: int) -> np.ndarray:
    """Full random actions for the even envs (they fall within ~30 steps), small ones for the odd (they don't)."""
    a = rng.uniform(-1.0, 1.0, (n, 3)).astype(np.float32)
    a[1::2] *= 0.05
    return a


# ------------------------------------------------------------------------------------------------------ the spaces
@pytest.mark.parametrize("env_id", TASKS)
def test_spaces_and_options_are_gymnasiums(envpool, env_id):
    env = envpool_env(env_id, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ref = gym.make(env_id)
    assert env.single_observation_space == ref.observation_space and env.single_action_space == ref.action_space
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    assert env.max_episode_steps == 1000 and env._make_kwargs["num_threads"] == 1
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2, *ref.observation_space.shape) and obs.dtype == np.float64
    obs, reward, terminated, truncated, _ = env.step(np.zeros((2, *ref.action_space.shape), np.float32))
    assert obs.dtype == np.float64 and reward.dtype == np.float64 and terminated.dtype == truncated.dtype == bool
    env.close()


# ------------------------------------------------------------------------------- the same episodes as Gymnasium's
def test_the_same_transitions_as_the_gymnasium_backend_from_the_same_states(envpool):
    """Both backends driven with the same actions, the Gymnasium envs put in envpool's start states: the same
    observations, rewards, terminations, truncations (at max_episode_steps=30) and final observations."""
    n, limit = 4, 30
    pool, sync = envpool_env("Hopper-v5", n, limit), make_vector_env("Hopper-v5", n, "sync", limit)
    obs, _ = pool.reset(seed=0)
    sync.reset(seed=0)
    for i in range(n):
        put_in_state(sync.envs[i], obs[i])
    rng = np.random.default_rng(0)
    ends = {"terminated": 0, "truncated": 0}
    for _ in range(100):
        actions = hopper_actions(rng, n)
        obs, reward, terminated, truncated, infos = pool.step(actions)
        g_obs, g_reward, g_terminated, g_truncated, g_infos = sync.step(actions)
        np.testing.assert_array_equal(terminated, g_terminated)
        np.testing.assert_array_equal(truncated, g_truncated)
        np.testing.assert_allclose(reward, g_reward, rtol=1e-6, atol=1e-6)  # envpool returns float32 rewards
        done = terminated | truncated
        # The same up to rounding (1e-15, which a contact can amplify for a few steps to ~1e-8: the root's x, not in
        # the observations, differs by up to reset_noise_scale between the two)
        np.testing.assert_allclose(obs[~done], g_obs[~done], rtol=0, atol=1e-6)
        np.testing.assert_allclose(
            final_observations(infos, done, obs), final_observations(g_infos, done, g_obs), rtol=0, atol=1e-5
        )  # (final_observations gives float32)
        for i in np.flatnonzero(done):
            np.testing.assert_allclose(infos["final_obs"][i], g_infos["final_obs"][i], rtol=0, atol=1e-6)
        for i in np.flatnonzero(done):
            put_in_state(sync.envs[i], obs[i])  # the next episode starts where envpool's does
        ends["terminated"] += int(terminated.sum())
        ends["truncated"] += int(truncated.sum())
    assert ends["terminated"] >= 3 and ends["truncated"] >= 3, ends
    pool.close()
    sync.close()


def test_a_fall_at_the_time_limit_is_terminated_and_truncated_as_in_gymnasium(envpool):
    """envpool itself reports such a step as truncated only; the adapter reports both, as Gymnasium's TimeLimit."""
    actions = np.ones((1, 3), np.float32)
    env = envpool_env("Hopper-v5", 1)
    env.reset(seed=3)
    for fall in range(1, 200):  # noqa: B007  (the step it falls at, used after the loop)
        *_, terminated, truncated, _ = env.step(actions)
        if terminated[0]:
            break
    assert terminated[0] and not truncated[0] and fall < 200
    env = envpool_env("Hopper-v5", 1, max_episode_steps=fall)
    start, _ = env.reset(seed=3)
    sync = make_vector_env("Hopper-v5", 1, "sync", fall)
    sync.reset(seed=0)
    put_in_state(sync.envs[0], start[0])
    for step in range(1, fall + 1):
        _, _, terminated, truncated, _ = env.step(actions)
        _, _, g_terminated, g_truncated, _ = sync.step(actions)
        assert (terminated[0], truncated[0]) == (g_terminated[0], g_truncated[0]) == (step == fall, step == fall)


def test_episodes_end_when_envpools_own_episodes_end_and_restart_from_its_reset_states(envpool):
    """The adapter against a bare envpool (next-step autoreset) with the same seeds and actions: the same episode
    ends, final_obs is the bare pool's last observation, and the observation returned at a done step is the start
    the bare pool resets that env to."""
    n, limit = 4, 30
    env = envpool_env("Hopper-v5", n, limit)
    bare = envpool.make("Hopper-v5", env_type="gymnasium", num_envs=n, seed=7, num_threads=1, max_episode_steps=limit)
    obs, _ = env.reset(seed=7)
    b_obs, _ = bare.reset()
    np.testing.assert_array_equal(obs, b_obs)
    rng = np.random.default_rng(1)
    elapsed = np.zeros(n, int)
    n_done = 0
    for _ in range(100):
        actions = hopper_actions(rng, n)
        obs, reward, terminated, truncated, infos = env.step(actions)
        b_obs, b_reward, b_terminated, b_truncated, b_info = bare.step(actions.astype(np.float64))
        np.testing.assert_array_equal(b_info["env_id"], np.arange(n))
        elapsed += 1
        done = terminated | truncated
        np.testing.assert_array_equal(done, b_terminated | b_truncated)
        np.testing.assert_array_equal(truncated, elapsed == limit)  # the time limit, counted from each start
        np.testing.assert_array_equal(terminated[~truncated], b_terminated[~truncated])
        np.testing.assert_array_equal(reward, b_reward.astype(np.float64))
        np.testing.assert_array_equal(np.asarray(infos["final_obs"])[done], b_obs[done])
        np.testing.assert_array_equal(obs[~done], b_obs[~done])
        if done.any():
            ids = np.flatnonzero(done).astype(np.int32)
            start, *_ = bare.step(np.zeros((len(ids), 3)), ids)  # envpool resets them on their next step
            np.testing.assert_array_equal(obs[done], start)
            elapsed[done] = 0
            n_done += int(done.sum())
    assert n_done >= 6
    env.close()
    bare.close()


# ---------------------------------------------------------------------------------------------- seeds, reset_mask
def test_seeds_give_sub_env_i_seed_s_plus_i_and_reproduce(envpool):
    a, _ = envpool_env("Walker2d-v5", 3).reset(seed=5)
    b, _ = envpool_env("Walker2d-v5", 2).reset(seed=6)
    np.testing.assert_array_equal(a[1:], b)
    env = envpool_env("Walker2d-v5", 3)
    first, _ = env.reset(seed=5)
    env.step(np.zeros((3, 6), np.float32))
    again, _ = env.reset(seed=5)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, a)
    with pytest.raises(ValueError, match="int32"):
        env.reset(seed=2**31 - 2)
    with pytest.raises(ValueError, match="resets them all"):
        env.reset(seed=1, options={"reset_mask": np.array([True, False, False])})


def test_reset_mask_resets_only_those_envs_and_restarts_their_time_limit(envpool):
    env = envpool_env("HalfCheetah-v5", 3, max_episode_steps=30)  # HalfCheetah never terminates
    env.reset(seed=0)
    actions = np.full((3, 6), 0.3, np.float32)
    for _ in range(10):
        before, *_ = env.step(actions)
    mask = np.array([False, True, False])
    obs, _ = env.reset(options={"reset_mask": mask})
    np.testing.assert_array_equal(obs[~mask], before[~mask])
    assert not np.allclose(obs[1], before[1])
    assert np.abs(obs[1, :8]).max() <= 0.1  # a start: qpos within reset_noise_scale of the initial pose
    truncations = []
    for step in range(11, 41):
        obs, _, terminated, truncated, infos = env.step(actions)
        assert not terminated.any()
        truncations += [(step, i) for i in np.flatnonzero(truncated)]
        if truncated.any():
            assert not np.allclose(infos["final_obs"][truncated], obs[truncated])
    assert truncations == [(30, 0), (30, 2), (40, 1)]
    with pytest.raises(ValueError, match="at least one"):
        env.reset(options={"reset_mask": np.zeros(3, bool)})
    with pytest.raises(ValueError, match="bool array"):
        env.reset(options={"reset_mask": np.array([1, 0, 0])})


# ------------------------------------------------------------------------------------------------------- refusals
def test_the_maze_and_other_tasks_are_refused_naming_the_backends_that_work():
    for env_id in ("npsco/FourRewardMaze-v0", "Ant-v5"):
        with pytest.raises(NpscoError, match="use env_backend auto, sync or async"):
            make_vector_env(env_id, 2, "envpool")


def test_a_missing_envpool_is_refused_with_the_pip_command(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool raises ImportError
    with pytest.raises(NpscoError, match=r"pip install .*envpool"):
        make_vector_env("Hopper-v5", 2, "envpool")
    out = tmp_path / "run"
    assert main(["train", "--env", "Hopper-v5", "--env-backend", "envpool", "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install" in err and "Traceback" not in err
    assert not out.exists()  # refused before anything is written


# ------------------------------------------------------------------------------------------------------------ CLI
def test_npsco_train_with_the_envpool_backend(envpool, tmp_path):
    out = tmp_path / "hopper"
    args = [
        "train",
        "--env",
        "Hopper-v5",
        "--env-backend",
        "envpool",
        "--steps",
        "1024",
        "--set",
        "num_steps=512",
        "--set",
        "update_epochs=1",
        "--set",
        "eval_every=0",
        "--no-progress",
        "--no-tensorboard",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert json.loads((out / "config.json").read_text())["ppo"]["env_backend"] == "envpool"
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["global_step"] for r in rows] == [512, 1024] and rows[-1]["charts/episodes"] > 0


def test_env_backend_option_of_population_and_set_still_works():
    parser = build_parser()
    args = parser.parse_args(["population", "--env", "Hopper-v5", "--env-backend", "sync"])
    assert PopulationOptions.from_args(args).config().ppo.env_backend == "sync"
    args = parser.parse_args(["population", "--env", "Hopper-v5", "--set", "env_backend=async"])
    assert PopulationOptions.from_args(args).config().ppo.env_backend == "async"
    args = parser.parse_args(
        ["population", "--env", "Hopper-v5", "--env-backend", "sync", "--set", "env_backend=async"]
    )
    # --set wins, as for every other option
    assert PopulationOptions.from_args(args).config().ppo.env_backend == "async"
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--env-backend", "threads"])
