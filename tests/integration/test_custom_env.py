"""Tasks npsco does not know: a package outside npsco (written here into a temporary folder) that registers its task
(`--env-package`), the same task as a `module:Class` entry point, and Gymnasium's Pendulum-v1. Each trains, evaluates
and reports (videos and distance heatmap included) with no change to npsco; worker processes find the task too."""

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from npsco.cli import main
from npsco.policy import load_policy

REACH = '''
"""A point on a plane moves towards a goal: 4 observations (position, goal), 2 actions (a step of at most 0.2)."""
import gymnasium as gym
import numpy as np


class Reach(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}

    def __init__(self, render_mode=None):
        self.observation_space = gym.spaces.Box(-2.0, 2.0, (4,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.render_mode = render_mode

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1, 1, 2)
        self.goal = self.np_random.uniform(-1, 1, 2)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        return np.concatenate([self.pos, self.goal]).astype(np.float32)

    def step(self, action):
        self.pos = np.clip(self.pos + 0.2 * np.clip(action, -1, 1), -2, 2)
        self.t += 1
        distance = float(np.linalg.norm(self.pos - self.goal))
        return self._obs(), -distance, distance < 0.1, self.t >= 40, {}

    def render(self):  # 48 x 64 pixels: the report scales frames of any size
        image = np.full((48, 64, 3), 255, np.uint8)
        for (x, y), colour in ((self.goal, (0, 160, 0)), (self.pos, (200, 0, 0))):
            r, c = int((1 - (y + 2) / 4) * 47), int((x + 2) / 4 * 63)
            image[max(r - 2, 0):r + 3, max(c - 2, 0):c + 3] = colour
        return image
'''

REGISTER = """
import gymnasium as gym

gym.register("Reach-v0", entry_point="mytasks.reach:Reach", max_episode_steps=40)
"""

TINY = [
    "--steps",
    "1024",
    "--set",
    "num_envs=2",
    "--set",
    "num_steps=256",
    "--set",
    "update_epochs=1",
    "--set",
    "eval_episodes=2",
    "--set",
    "eval_every=1",
]


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """`mytasks` in a folder of its own, on sys.path and on PYTHONPATH (for worker processes)."""
    root = tmp_path_factory.mktemp("user")
    (root / "mytasks").mkdir()
    (root / "mytasks" / "__init__.py").write_text(textwrap.dedent(REGISTER))
    (root / "mytasks" / "reach.py").write_text(textwrap.dedent(REACH))
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        mp.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
        yield root
    for name in [m for m in sys.modules if m == "mytasks" or m.startswith("mytasks.")]:
        del sys.modules[name]


def test_a_registered_task_from_another_package_trains_and_evaluates(package, tmp_path, capsys):
    out = tmp_path / "train"
    assert (
        main(
            [
                "train",
                "--env-package",
                "mytasks",
                "--env",
                "Reach-v0",
                *TINY,
                "--no-progress",
                "--no-tensorboard",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    policy = load_policy(out)
    assert policy.metadata["env_id"] == "mytasks:Reach-v0" and policy.obs_dim == 4
    assert main(["evaluate", str(out), "--episodes", "3"]) == 0
    assert "mytasks:Reach-v0: return" in capsys.readouterr().out


def test_a_module_class_task_trains_in_workers_evaluates_and_reports(package, tmp_path, capsys):
    out = tmp_path / "exp"
    assert (
        main(
            [
                "experiment",
                "--env",
                "mytasks.reach:Reach",
                "--refs",
                "2",
                "--novel",
                "1",
                "--methods",
                "ipd",
                "--workers",
                "2",
                "--episodes",
                "4",
                "--out",
                str(out),
                *TINY,
            ]
        )
        == 0
    )
    report = out / "report"
    text = (report / "report.md").read_text()
    assert "## Who is near whom: action distances" in text and "figures/distances_Reach.png" in text
    assert (report / "figures" / "distances_Reach.png").stat().st_size > 1000
    rows = (report / "distances_Reach.csv").read_text().splitlines()
    assert rows[0] == "policy,group,ref0,ref1,ipd-r0x0.5/k0" and len(rows) == 4
    videos = sorted((report / "figures" / "behaviour").glob("*.mp4")) or sorted(
        (report / "figures" / "behaviour").glob("*.gif")
    )
    assert len(videos) == 2 and all(v.stat().st_size > 500 for v in videos)  # a population video per method
    manifest = json.loads((out / "Reach" / "ipd" / "manifest.json").read_text())
    assert manifest["env_id"] == "mytasks.reach:Reach" and all(m["status"] == "done" for m in manifest["members"])
    capsys.readouterr()


def test_pendulum_trains_evaluates_and_reports(tmp_path, capsys):
    run = tmp_path / "pendulum"
    assert (
        main(
            [
                "population",
                "--env",
                "Pendulum-v1",
                "--method",
                "ppo",
                "--refs",
                "2",
                "--novel",
                "0",
                *TINY,
                "--no-progress",
                "--out",
                str(run),
            ]
        )
        == 0
    )
    assert main(["report", str(run), "--out", str(tmp_path / "report"), "--episodes", "2"]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "figures/distances_Pendulum-v1.png" in text
    try:  # Pendulum draws with pygame (gymnasium[classic-control]); without it the report says so and goes on
        import pygame  # noqa: F401

        assert "figures/behaviour/" in text
    except ImportError:
        assert "No pictures of Pendulum-v1: rendering failed (DependencyNotInstalled" in text
    capsys.readouterr()


def test_unusable_tasks_are_refused_with_one_line(package, tmp_path, capsys):
    for env, fragment in [
        ("nosuchmodule:Task", "cannot import module 'nosuchmodule'"),
        ("mytasks.reach:Nothing", "has no environment class of that name"),
        ("CartPole-v1", "Discrete actions are not supported"),
    ]:
        assert main(["train", "--env", env, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and fragment in err, err
    assert main(["train", "--env-package", "mytasks", "--env", "mytasks:Reach-v0", "--out", str(tmp_path / "y")]) == 2
    assert "already names a module" in capsys.readouterr().err
