"""`LeanSyncVectorEnv` steps exactly as Gymnasium's `SyncVectorEnv` (same-step autoreset): same observations,
rewards, ends and final observations, through terminations, truncations and masked resets; and npsco's `auto`
backend trains bit for bit as `sync`."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from npsco.envs.lean import LeanSyncVectorEnv
from npsco.envs.make import final_observations, make_env, make_vector_env
from npsco.envs.state import capture
from npsco.ppo.config import preset
from npsco.ppo.trainer import Trainer


def _pair(n: int, limit: int) -> tuple[gym.vector.VectorEnv, gym.vector.VectorEnv]:
    fns = [lambda: make_env("Hopper-v5", limit) for _ in range(n)]
    return LeanSyncVectorEnv(fns), gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)


def test_lean_steps_as_sync_through_ends_and_masked_resets():
    n, limit = 3, 40  # short episodes: truncations at 40 steps; the large actions make Hopper fall (terminations)
    lean, sync = _pair(n, limit)
    rng = np.random.default_rng(0)
    obs_l, _ = lean.reset(seed=7)
    obs_s, _ = sync.reset(seed=7)
    np.testing.assert_array_equal(obs_l, obs_s)
    terminations = truncations = 0
    for t in range(400):
        action = rng.uniform(-1, 1, (n, 3)).astype(np.float32) * 3
        out_l, out_s = lean.step(action), sync.step(action)
        for a, b in zip(out_l[:4], out_s[:4], strict=True):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
        done = out_s[2] | out_s[3]
        terminations += int(out_s[2].sum())
        truncations += int(out_s[3].sum())
        np.testing.assert_array_equal(
            final_observations(out_l[4], done, out_l[0]), final_observations(out_s[4], done, out_s[0])
        )
        if done.any():
            np.testing.assert_array_equal(out_l[4]["_final_obs"], out_s[4]["_final_obs"])
        if t % 17 == 5:  # end envs' episodes now, as IPD does
            mask = np.array([False, True, t % 2 == 0])
            options_l, options_s = {"reset_mask": mask.copy(), "x": 1}, {"reset_mask": mask.copy(), "x": 1}
            (obs_l, info_l), (obs_s, info_s) = lean.reset(options=options_l), sync.reset(options=options_s)
            np.testing.assert_array_equal(obs_l, obs_s)
            assert obs_l.dtype == obs_s.dtype and obs_l is not lean._observations  # a copy, as Gymnasium's
            assert info_l.keys() == info_s.keys() and options_l == options_s == {"x": 1}
            for key in info_s:
                np.testing.assert_array_equal(info_l[key], info_s[key])
    assert terminations > 0 and truncations > 0  # both kinds of end were compared
    assert capture(lean) == capture(sync)  # a training state saved on one restores on the other


def test_resets_the_lean_one_does_not_take_are_gymnasiums():
    lean, sync = _pair(2, 1000)
    for envs in (lean, sync):  # a masked reset before any reset leaves env 0 without an observation
        with pytest.raises(ValueError):
            envs.reset(options={"reset_mask": np.array([False, True])})
    lean.reset(seed=0)
    sync.reset(seed=0)
    for bad in (np.array([False, False]), np.array([1, 0]), np.array([True])):  # Gymnasium's own errors
        with pytest.raises((ValueError, TypeError)) as lean_error:
            lean.reset(options={"reset_mask": bad})
        with pytest.raises((ValueError, TypeError)) as sync_error:
            sync.reset(options={"reset_mask": bad})
        assert str(lean_error.value) == str(sync_error.value)
    mask = np.array([True, False])  # with seeds: Gymnasium's reset, the same observations
    np.testing.assert_array_equal(
        lean.reset(seed=[3, None], options={"reset_mask": mask})[0],
        sync.reset(seed=[3, None], options={"reset_mask": mask})[0],
    )


def test_lean_returns_no_infos_when_no_episode_ends():
    lean, _ = _pair(2, 1000)
    lean.reset(seed=0)
    assert lean.step(np.zeros((2, 3), np.float32))[4] == {}


class _DictObs(gym.Env):
    """A tiny env with a Dict observation: the lean step hands it to Gymnasium's own."""

    observation_space = gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (2,))})
    action_space = gym.spaces.Box(-1, 1, (1,))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {"x": np.zeros(2, np.float32)}, {}

    def step(self, action):
        return {"x": np.full(2, float(action[0]), np.float32)}, 1.0, False, True, {}


def test_non_flat_observations_take_gymnasiums_step():
    lean = LeanSyncVectorEnv([_DictObs, _DictObs])
    lean.reset(seed=0)
    obs, reward, _, truncated, infos = lean.step(np.array([[0.5], [-0.5]], np.float32))
    np.testing.assert_array_equal(obs["x"], [[0, 0], [0, 0]])  # autoreset: the new episodes' first observation
    np.testing.assert_array_equal(infos["final_obs"][0]["x"], [0.5, 0.5])
    assert truncated.all() and reward.tolist() == [1.0, 1.0]


def test_auto_backend_is_lean_and_sync_is_gymnasiums():
    assert type(make_vector_env("Hopper-v5", 1)) is LeanSyncVectorEnv
    assert type(make_vector_env("Hopper-v5", 1, "sync")) is gym.vector.SyncVectorEnv


@pytest.mark.parametrize("num_envs", [1, 2])
def test_training_on_auto_is_bit_for_bit_training_on_sync(num_envs):
    def weights(backend: str) -> list[np.ndarray]:
        cfg = dataclasses.replace(
            preset("Hopper-v5"),
            seed=3,
            eval_every=0,
            num_envs=num_envs,
            num_steps=256,
            env_backend=backend,
            max_episode_steps=100,
        )
        trainer = Trainer(cfg, tensorboard=False)
        for _ in range(2):
            buf = trainer.collect_rollout()
            trainer.hooks.update(trainer.learner, trainer.compute_advantages(buf))
        trainer.envs.close()
        return [p.detach().numpy().copy() for p in trainer.agent.parameters()] + [trainer.agent.obs_rms.mean]

    for a, b in zip(weights("auto"), weights("sync"), strict=True):
        np.testing.assert_array_equal(a, b)


class _WrongShape(gym.Env):
    """Says its observations have 2 values, returns them as a (1, 2) array."""

    observation_space = gym.spaces.Box(-1, 1, (2,))
    action_space = gym.spaces.Box(-1, 1, (1,))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros((1, 2), np.float32), 0.0, False, False, {}


class _WrongShapeOnReset(_WrongShape):
    """Resets to a (1, 2) observation after its first reset."""

    resets = 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        obs, info = super().reset(seed=seed)
        return (obs if self.resets == 1 else obs[None]), info


def test_an_observation_of_another_shape_than_its_space_is_refused_as_gymnasium_does():
    for envs in (LeanSyncVectorEnv([_WrongShape]), gym.vector.SyncVectorEnv([_WrongShape])):
        envs.reset(seed=0)
        with pytest.raises(ValueError):
            envs.step(np.zeros((1, 1), np.float32))
    for envs in (LeanSyncVectorEnv([_WrongShapeOnReset]), gym.vector.SyncVectorEnv([_WrongShapeOnReset])):
        envs.reset(seed=0)
        with pytest.raises(ValueError):  # a masked reset too
            envs.reset(options={"reset_mask": np.array([True])})


def test_a_masked_reset_without_seeds_takes_the_lean_path(monkeypatch):
    lean, _ = _pair(2, 1000)
    lean.reset(seed=0)
    calls = []
    monkeypatch.setattr(gym.vector.SyncVectorEnv, "reset", lambda self, **kw: calls.append(kw))
    obs, _ = lean.reset(options={"reset_mask": np.array([False, True])})
    assert calls == [] and obs.shape == (2, 11)
    lean.reset(seed=[1, 2], options={"reset_mask": np.array([False, True])})  # seeded: Gymnasium's
    assert len(calls) == 1


@pytest.mark.parametrize("deterministic", [True, False])
def test_evaluation_steps_only_running_episodes_and_returns_the_same(monkeypatch, deterministic):
    """run_episodes stops stepping an episode that is over (LeanSyncVectorEnv.step_some): the same returns, lengths
    and states, bit for bit, as when every sub-env is stepped to the end of the longest episode (the `sync`
    backend), in fewer env steps."""
    from tests.conftest import box_policy

    import npsco.episodes as episodes

    env = gym.make("Hopper-v5")
    rng = np.random.default_rng(1)
    weights = [(rng.normal(0, 0.05, (8, 11)), rng.normal(0, 0.05, 8)), (rng.normal(0, 0.05, (3, 8)), np.zeros(3))]
    policy = box_policy("Hopper-v5", env.observation_space, env.action_space, weights)
    made = episodes.make_vector_env
    steps = {"n": 0}

    class Counted(gym.Wrapper):
        def step(self, action):
            steps["n"] += 1
            return self.env.step(action)

    def counted(backend):
        def make(env_id, num_envs, max_episode_steps=None):
            fns = [lambda: Counted(make_env(env_id, max_episode_steps)) for _ in range(num_envs)]
            if backend == "auto":
                return LeanSyncVectorEnv(fns)
            return gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)

        return make

    out, counts = {}, {}
    for backend in ("auto", "sync"):
        steps["n"] = 0
        monkeypatch.setattr(episodes, "make_vector_env", counted(backend))
        out[backend] = episodes.run_episodes(policy, 6, seed=3, deterministic=deterministic, record_states=True)
        counts[backend] = steps["n"]
    monkeypatch.setattr(episodes, "make_vector_env", made)
    a, b = out["auto"], out["sync"]
    np.testing.assert_array_equal(a.returns, b.returns)
    np.testing.assert_array_equal(a.lengths, b.lengths)
    np.testing.assert_array_equal(a.final_obs, b.final_obs)
    for x, y in zip(a.states, b.states, strict=True):
        np.testing.assert_array_equal(x, y)
    assert len(set(a.lengths.tolist())) > 1  # episodes of different lengths: the case that saves steps
    assert counts["auto"] == a.lengths.sum() < counts["sync"] == 6 * a.lengths.max()


def test_auto_takes_gymnasiums_own_vector_env_on_an_untested_release(monkeypatch):
    """The lean env writes SyncVectorEnv's private fields: on a Gymnasium release it was not checked against, `auto`
    steps with Gymnasium's own SyncVectorEnv instead."""
    import gymnasium as gym

    from npsco.envs.lean import LeanSyncVectorEnv
    from npsco.envs.make import make_vector_env

    env = make_vector_env("Hopper-v5", 2)
    assert isinstance(env, LeanSyncVectorEnv)
    env.close()
    monkeypatch.setattr("npsco.envs.make.TESTED_GYMNASIUM", ())
    env = make_vector_env("Hopper-v5", 2)
    assert type(env) is gym.vector.SyncVectorEnv
    env.close()
