"""PPO settings an earlier npsco had and this one has not (`npsco.compat.REMOVED_PPO_SETTINGS`): `update_backend`,
until 2026-11-28 the choice between the numpy update and the torch one. A run that recorded the numpy one, the update
that runs today, still resumes, reproduces and evaluates (tested on a committed run of benchmarks/results/); giving
the setting, on the command line, in a config file or to a Python call, is a one-line error that says why."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

import npsco
from npsco.cli import main
from npsco.cli_parser import build_parser
from npsco.compat import current_ppo_settings, removed_ppo_setting
from npsco.errors import NpscoError
from npsco.evaluation.runs import load_run
from npsco.options import PopulationOptions
from npsco.population import Population
from npsco.population_config import configuration_differences
from npsco.ppo.config import PPOConfig
from npsco.report.provenance import population_command

os.environ.setdefault("MUJOCO_GL", "egl")

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks/results/good_and_different/dev/Hopper-v5/lagr-ret-s87000"
"""A committed population run (Lagrangian, 5 borrowed references, 5 novel policies) made before 2026-11-28."""


def test_a_recorded_numpy_backend_reads_as_todays_settings_and_torch_stays_a_difference():
    assert current_ppo_settings({"seed": 1, "update_backend": "numpy"}) == {"seed": 1}
    assert current_ppo_settings({"seed": 1, "update_backend": "torch"}) == {"seed": 1, "update_backend": "torch"}
    assert current_ppo_settings(None) is None
    assert removed_ppo_setting("learning_rate") is None
    assert removed_ppo_setting("update-backend") == removed_ppo_setting("update_backend")
    assert "update_backend is not a setting now: every update runs in numpy" in removed_ppo_setting("update_backend")
    assert PPOConfig.from_dict({**PPOConfig().to_dict(), "update_backend": "numpy"}) == PPOConfig()
    with pytest.raises(NpscoError, match="unknown PPO config field"):
        PPOConfig.from_dict({**PPOConfig().to_dict(), "update_backend": "torch"})


def test_a_committed_run_that_recorded_update_backend_resumes_reproduces_and_evaluates(tmp_path, monkeypatch):
    stored = json.loads((RUN / "config.json").read_text())
    assert stored["ppo"]["update_backend"] == "numpy"  # as every run before 2026-11-28 recorded it
    # a copy, in a checkout's layout: the run borrows its references by paths relative to it and to the repository
    run = tmp_path / RUN.relative_to(ROOT)
    shutil.copytree(RUN, run)
    (tmp_path / "benchmarks/results/paper").symlink_to(ROOT / "benchmarks/results/paper")
    monkeypatch.chdir(tmp_path)
    # the report's reproduce command leaves the setting out, and is this run's configuration
    command = population_command(run, stored)
    assert "update_backend" not in command
    config = PopulationOptions.from_args(build_parser().parse_args(shlex.split(command)[1:])).config().validate()
    assert configuration_differences(stored, config.to_dict()) == []
    assert PPOConfig.from_dict(stored["ppo"]) == config.ppo
    # the run resumes: the same configuration, every member done
    population = Population(run, config)
    population.open()
    population.close()
    assert [m.status for m in population.members] == ["done"] * 10
    # and evaluates
    info = load_run(run)
    assert info.config["ppo"]["update_backend"] == "numpy" and len(info.members) == 10 and info.pending == []


def test_giving_update_backend_is_a_one_line_error_that_says_why(tmp_path, capsys):
    why = "update_backend is not a setting now: every update runs in numpy since 2026-11-28"
    assert main(["train", "--set", "update_backend=numpy", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"npsco train: error: {why}" in err and "leave it out" in err
    config = tmp_path / "old.toml"
    config.write_text('[set]\nupdate_backend = "torch"\n')
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "b")]) == 2
    assert f"npsco train: error: {config}: set: {why}" in capsys.readouterr().err
    with pytest.raises(NpscoError, match=why):
        npsco.make_ppo_config("Hopper-v5", settings={"update_backend": "numpy"})
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
