"""The Python API (`npsco.train`, `npsco.train_population`, `npsco.make_ppo_config`,
`npsco.make_population_config`): the same configurations, run directories and one-line errors as the commands."""

from __future__ import annotations

import json
import re

import pytest

import npsco
from npsco.errors import NpscoError
from npsco.tasks import MAZE_ID

TINY = {"eval_every": 0, "num_steps": 32}


def test_train_writes_the_run_directory_of_npsco_train_and_finds_it_trained(tmp_path):
    out = tmp_path / "run"
    result = npsco.train(MAZE_ID, out=out, steps=1024, seed=3, settings=TINY, progress=False)
    assert result is not None and (out / "policy.safetensors").exists()
    record = json.loads((out / "config.json").read_text())
    assert record["command"] == "train" and record["ppo"]["seed"] == 3 and record["ppo"]["num_steps"] == 32
    assert npsco.train(MAZE_ID, out=out, steps=1024, seed=3, settings=TINY, progress=False) is None


def test_configurations_are_typed_and_checked():
    cfg = npsco.make_ppo_config("Hopper-v5", steps=2048, settings={"learning_rate": 1e-4, "actor_hidden": [32, 32]})
    assert cfg.learning_rate == 1e-4 and cfg.actor_hidden == (32, 32) and cfg.total_timesteps == 2048
    pop = npsco.make_population_config(MAZE_ID, "lagrangian", refs=3, novel=2, method_settings={"lagrangian_lr": 0.5})
    assert pop.method.options.lagrangian_lr == 0.5 and pop.r0_scales == (1.0,)
    for call, message in (
        (lambda: npsco.make_ppo_config(MAZE_ID, settings={"learning_rat": 1.0}), "unknown setting 'learning_rat'"),
        (lambda: npsco.make_ppo_config(MAZE_ID, settings={"num_envs": 1.5}), "bad value for num_envs: 1.5"),
        (lambda: npsco.make_population_config(MAZE_ID, "ipd", method_settings={"wsr_weight": 1.0}), "not a setting of"),
    ):
        with pytest.raises(NpscoError, match=message) as info:
            call()
        assert "\n" not in str(info.value)


def test_train_population_returns_the_manifests_members(tmp_path):
    members = npsco.train_population(
        MAZE_ID, "wsr", refs=2, novel=1, steps=1024, settings=TINY, out=tmp_path / "pop", progress=False
    )
    assert [m.name for m in members] == ["ref0", "ref1", "wsr-r0x0.5/k0"] and all(m.status == "done" for m in members)
    policy = npsco.load_policy(tmp_path / "pop" / members[-1].path)
    assert policy.metadata["method"] == "wsr"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: npsco.train("Hopper-v5", out="unused", seed="a"), "bad value for seed: 'a' (expected int)"),
        (lambda: npsco.train(MAZE_ID, steps=1.5), "bad value for steps: 1.5"),
        (lambda: npsco.train_population(MAZE_ID, novel="two", out="unused"), "bad value for novel: 'two'"),
        (lambda: npsco.make_ppo_config(3), "bad value for env: 3"),
    ],
)
def test_a_wrongly_typed_argument_is_npscos_one_line_error(call, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NpscoError, match=re.escape(message)):
        call()
    assert not (tmp_path / "unused").exists()
