"""Behaviour descriptors (`npsco.evaluation.descriptors`): the contact statistics on exact numbers, and the feet's
contacts found by putting observations back into MuJoCo's Hopper."""

import json

import gymnasium as gym
import numpy as np
import pytest

from npsco.cli import _print_descriptors
from npsco.evaluation.descriptors import CELLS, cells, describe, duty_factor, step_frequency, touchdowns
from npsco.tasks import MAZE_ID


def test_descriptor_cells_read_like_a_table_row():
    row = {
        "forward_speed": 2.5,
        "step_frequency": None,
        "height_mean": 1.2,
        "height_std": 0.1,
        "pitch_mean": -0.05,
        "pitch_std": 0.09,
        "duty": {},
    }
    assert cells(row) == ["2.50", "-", "1.20 +- 0.10", "-0.05 +- 0.09", "-"] and len(CELLS) == 5


def test_contact_statistics_on_exact_numbers():
    a = np.array([1, 1, 0, 0, 1, 0, 1, 1], bool)  # starts in contact: two touchdowns after that
    b = np.array([0, 1, 0], bool)
    assert touchdowns(a) == 2 and touchdowns(b) == 1 and touchdowns(np.zeros(0, bool)) == 0
    assert duty_factor([a, b]) == pytest.approx(6 / 11)
    # two feet over 11 steps of 0.5 s: 3 and 1 touchdowns in 5.5 s
    assert step_frequency([[a, b], [b, np.zeros(8, bool)]], dt=0.5) == pytest.approx(((3 + 1) / 2) / 5.5)
    assert step_frequency([], dt=0.5) is None


def test_hopper_foot_on_the_floor_when_lowered_and_off_it_when_lifted():
    env = gym.make("Hopper-v5")
    start, _ = env.reset(seed=0)  # the foot starts a few cm above the floor
    env.close()
    obs, lifted = start.copy(), start.copy()
    obs[0] -= 0.1  # 10 cm lower: the foot in the floor
    lifted[0] += 1.0  # a metre higher: the foot in the air
    d = describe("Hopper-v5", [np.stack([obs, lifted, obs, obs])])
    assert d is not None and d.duty == {"foot_geom": 0.75}
    assert d.step_frequency == pytest.approx(1 / (4 * 0.008))  # one touchdown in 4 steps of 8 ms
    assert d.height_mean == pytest.approx((3 * obs[0] + lifted[0]) / 4) and d.forward_speed == pytest.approx(obs[5])
    assert "foot_geom 75%" in d.words()


def test_tasks_other_than_mujoco_locomotion_get_no_descriptors():
    assert describe(MAZE_ID, [np.zeros((3, 2))]) is None
    assert describe("Hopper-v5", [np.zeros((3, 4))]) is None  # not the task's observation layout


def test_evaluate_describe_prints_a_line_per_described_policy(tmp_path, capsys):
    row = {
        "name": "lagrangian/k0",
        "task": "Hopper",
        "forward_speed": 2.5,
        "step_frequency": 1.7,
        "height_mean": 1.2,
        "height_std": 0.1,
        "pitch_mean": 0.05,
        "pitch_std": 0.09,
        "duty": {"foot_geom": 0.35},
    }
    (tmp_path / "evaluation.json").write_text(json.dumps({"policies": [row, {"name": "maze", "forward_speed": None}]}))
    _print_descriptors([tmp_path / "evaluation.json"])
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and "touchdowns/s" in out[1]
    assert out[2].split()[2:] == ["2.50", "1.7", "1.20", "+-", "0.10", "+0.05", "+-", "0.09", "foot_geom", "35%"]
