"""Options of `npsco train` and `npsco population` beyond the settings: `--track` (Weights & Biases, through a
stand-in module and in W&B's offline mode), and the warning for a threshold that no pair of references reaches. The
refusals of bad input are in the table of test_reliability.py."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from npsco.cli import main
from npsco.logger import NO_WANDB
from npsco.population_jobs import unreached_thresholds
from npsco.ppo.trainer import Trainer


# ---------------------------------------------------------------------------------------------------------- --track
def test_track_logs_every_policy_of_a_population_as_a_run_of_its_group(tmp_path, planned_run, fake_wandb):
    out = tmp_path / "pop"
    argv = planned_run(out)
    assert main([*argv, "--track", "--wandb-project", "novelty", "--wandb-entity", "lab"]) == 0
    (run,) = fake_wandb  # the references were trained before: only ipd/k0 trains
    assert {k: run.init[k] for k in ("project", "entity", "group", "name", "dir")} == {
        "project": "novelty",
        "entity": "lab",
        "group": str(out),
        "name": f"{out}/ipd/k0",
        "dir": str(out / "novel" / "ipd" / "k0"),
    }
    assert run.init["config"]["method"] == "ipd" and run.finished
    rows = [json.loads(line) for line in (out / "novel" / "ipd" / "k0" / "metrics.jsonl").read_text().splitlines()]
    assert [step for step, _ in run.logged] == [row["global_step"] for row in rows] and rows


def test_track_on_train_names_the_run_after_its_folder(tmp_path, fake_wandb):
    out = tmp_path / "run"
    tiny = ["--steps", "1024", "--set", "num_steps=64", "--set", "eval_every=0", "--no-progress", "--no-tensorboard"]
    assert main(["train", *tiny, "--out", str(out), "--track"]) == 0
    (run,) = fake_wandb
    assert (run.init["project"], run.init["entity"], run.init["name"], run.init["group"]) == (
        "npsco",
        None,
        str(out),
        None,
    )
    assert run.init["config"]["ppo"]["total_timesteps"] == 1024 and run.finished
    assert [step for step, _ in run.logged] == [1024]  # one iteration of 16 envs x 64 steps


@pytest.mark.parametrize("command", ["train", "population"])
def test_track_without_wandb_says_what_to_install_and_writes_nothing(tmp_path, monkeypatch, capsys, command):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError, find_spec finds nothing
    assert main([command, "--steps", "1024", "--no-progress", "--out", str(tmp_path / "out"), "--track"]) == 2
    err = capsys.readouterr().err
    assert err == f"npsco {command}: error: {NO_WANDB}\n" and "pip install 'npsco[wandb]'" in NO_WANDB
    assert not (tmp_path / "out").exists()


def test_track_in_wandb_offline_mode_writes_a_run_beside_the_policy(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    tiny = ["--steps", "1024", "--set", "num_steps=64", "--set", "eval_every=0", "--no-progress", "--no-tensorboard"]
    assert main(["train", *tiny, "--out", str(out), "--track", "--wandb-project", "offline-test"]) == 0
    (run_file,) = out.glob("wandb/offline-run-*/run-*.wandb")
    assert run_file.stat().st_size > 0 and (out / "policy.safetensors").exists()


# ------------------------------------------------------------------------------------------ unreachable thresholds
def test_a_threshold_above_every_reference_distance_is_named():
    distances = np.array([[0.0, 0.4, 0.2], [0.6, 0.0, 0.3], [0.1, 0.5, 0.0]])
    assert unreached_thresholds({"ipd": 0.6}, distances, absolute=True) is None  # ref1 -> ref0 reaches it
    warning = unreached_thresholds({"ipd-r0x1": 0.3, "ipd-r0x3": 0.9}, distances, absolute=False)
    assert warning is not None and warning.startswith(
        "warning: r0 = 0.9 (ipd-r0x3) is above the largest distance between two references (0.6): no reference pair "
        "reaches it"
    )
    assert warning.endswith("consider a smaller --r0-scale")
    assert unreached_thresholds({"ipd": 0.61}, distances, absolute=True).startswith("warning: r0 = 0.61 is above")


def stop_training(monkeypatch):
    """Training raises Ctrl-C at once: what a command printed before it trains is what is checked."""

    def interrupted(self, progress=True):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "train", interrupted)


@pytest.mark.parametrize(
    ("threshold", "warned"),
    [
        (["--r0", "0.6"], "warning: r0 = 0.6 is above the largest distance between two references (0.5)"),
        (["--r0", "0.3"], None),
        (["--r0-scale", "1", "3"], "warning: r0 = 1.5 (ipd-r0x3) is above the largest distance"),
    ],
)
def test_population_warns_before_training_a_threshold_no_reference_pair_reaches(
    tmp_path, planned_run, monkeypatch, capsys, threshold, warned
):
    argv = planned_run(tmp_path / "pop", threshold)  # references acting (-1, 0) and (-1, 0.5): 0.5 apart
    stop_training(monkeypatch)
    assert main(argv) == 130
    out = capsys.readouterr().out
    if warned is None:
        assert "warning" not in out
    else:
        assert warned in out and out.count("warning") == 1
        assert out.index("warning") < out.index("/k0:")  # before the novel policy trains
