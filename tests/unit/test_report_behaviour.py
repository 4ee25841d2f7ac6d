"""Behaviour pictures of MuJoCo tasks: the camera follows the body (it stays in frame wherever it goes, the physics
unchanged), filmstrips span the whole episode, and the video and body track of the same episode. Frames are small
(48-64 px) and episodes short; MuJoCo renders offscreen with MUJOCO_GL=egl."""

import os
import re

import gymnasium as gym
import mujoco
import numpy as np
import pytest

from npsco.report import behaviour
from npsco.report.behaviour import (
    FollowCamera,
    body_position,
    clip_every,
    episode_frames,
    spread_steps,
    time_limit,
)
from npsco.tasks import MAZE_ID

os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture(scope="module")
def in_frame(load_script):
    """benchmarks/report_in_frame.py: `robot_pixels(frame)` finds the robot by its colour (orange to pink, unlike the
    green, white and black floor and the grey-blue sky); `main(checkpoints)` checks whole episodes."""
    return load_script("benchmarks/report_in_frame.py")


def teleported_frame(env: gym.Env, x: float) -> np.ndarray:
    """A frame of `env` with its root body moved `x` metres along the floor."""
    env.unwrapped.data.qpos[0] = x
    mujoco.mj_forward(env.unwrapped.model, env.unwrapped.data)
    return env.render()


def test_spread_steps_cover_the_whole_episode():
    assert spread_steps(1000, 8) == [0, 143, 286, 429, 571, 714, 857, 1000]
    assert spread_steps(290, 8) == [0, 41, 83, 124, 166, 207, 249, 290]
    assert spread_steps(3, 8) == [0, 1, 2, 3]  # a short episode: every state once
    assert spread_steps(0, 8) == [0]
    assert spread_steps(524, 1) == [524]  # one frame: the final state
    with pytest.raises(ValueError):
        spread_steps(10, 0)


def test_the_constants_are_mujocos():
    assert behaviour.PLANE == mujoco.mjtGeom.mjGEOM_PLANE
    assert behaviour.REFLECTION == mujoco.mjtRndFlag.mjRND_REFLECTION


@pytest.mark.parametrize("env_id", ["Hopper-v5", "HalfCheetah-v5"])
def test_the_camera_follows_the_body_wherever_it_goes(env_id, in_frame):
    followed = FollowCamera(gym.make(env_id, render_mode="rgb_array", width=64, height=64))
    followed.reset(seed=0)
    try:
        for x in (0.0, 30.0, 150.0):  # past the 20 m (Hopper) or 40 m (HalfCheetah) of floor the models draw
            frame = teleported_frame(followed, x)
            camera = followed.unwrapped.mujoco_renderer.viewer.cam
            np.testing.assert_array_equal(camera.lookat[:2], body_position(followed)[:2])
            assert body_position(followed)[0] == x
            body = in_frame.robot_pixels(frame)
            assert body.sum() > 20, x  # the body is in the frame...
            assert not body[[0, -1], :].any() and not body[:, [0, -1]].any(), x  # ...whole, off the edges
            floor = frame[40:].astype(int)
            assert (floor.min(axis=-1) > 150).mean() > 0.2, x  # light checks of the floor below it, not the void
            assert camera.elevation == behaviour.CAMERA_ELEVATION
    finally:
        followed.close()
    fixed = gym.make(env_id, render_mode="rgb_array", width=64, height=64)  # the task's own camera
    fixed.reset(seed=0)
    assert in_frame.robot_pixels(teleported_frame(fixed, 0.0)).sum() > 20
    assert not in_frame.robot_pixels(teleported_frame(fixed, 30.0)).any()  # has lost it
    fixed.close()


def test_the_camera_leaves_the_episode_as_it_is():
    # the floor drawn larger (a plane collides as an infinite one whatever its size): the same states, bit for bit
    actions = np.random.default_rng(0).uniform(-1, 1, (60, 6)).astype(np.float32)
    tracks = []
    for env in (gym.make("HalfCheetah-v5"), FollowCamera(gym.make("HalfCheetah-v5", render_mode="rgb_array"))):
        env.reset(seed=3)
        tracks.append([env.step(a)[0] for a in actions])
        env.close()
    np.testing.assert_array_equal(np.array(tracks[0]), np.array(tracks[1]))


def test_a_filmstrip_spans_the_whole_episode_and_the_video_every_tenth_step(constant_policy):
    policy = constant_policy("Hopper-v5", 1.0)  # falls within a few dozen steps
    frames = episode_frames(policy, 5, seed=0, size=48, video=True)
    assert frames.ended and frames.terminated and 5 < frames.length < 200
    assert frames.steps == spread_steps(frames.length, 5) and frames.steps[-1] == frames.length
    assert len(frames.images) == 5 and frames.images[0].shape == (48, 48, 3)
    assert frames.clip_every == 10 and frames.clip_steps[-1] == frames.length
    assert frames.clip_steps[:-1] == list(range(0, frames.length, 10))
    assert frames.body is not None and frames.body.shape == (frames.length + 1, 3)
    assert frames.body[0, 2] == pytest.approx(1.25, abs=0.01)  # the torso's height after the reset
    assert np.abs(frames.body[-1] - frames.body[0]).max() > 0.05  # and it moved before it fell
    # with --every: the first steps only, as before
    first = episode_frames(policy, 3, every=2, seed=0, size=48)
    assert first.steps == [0, 2, 4] and not first.ended and first.length == 4


def test_time_limits_and_video_steps():
    hopper = gym.make("Hopper-v5")
    assert time_limit(hopper) == 1000 and clip_every(time_limit(hopper)) == 10
    from npsco.envs.make import make_env

    maze = make_env(MAZE_ID)
    assert time_limit(maze) == 100 and clip_every(100) == 1  # the maze's own cut
    assert time_limit(make_env("Hopper-v5", 250)) == 250 and clip_every(250) == 3
    assert behaviour.follow_body(maze) is maze  # only MuJoCo gets the camera


def test_the_in_frame_check_films_whole_episodes(tmp_path, in_frame, capsys, constant_policy):
    checkpoint = constant_policy("Hopper-v5", -1.0).save(tmp_path / "hopper.safetensors")
    assert in_frame.main([str(checkpoint)]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"hopper.safetensors: \d+ steps, \d+ frames, fewest robot pixels [1-9]\d*, on edges 0: in frame", out
    )
    assert out.endswith("1 of 1 policies in frame for their whole episode\n")
