"""Experiment tracking with Weights & Biases (`--track`, `Tracking`): every logged row reaches W&B at its step, the
run is finished, and W&B's offline mode writes a run without a network."""

from __future__ import annotations

import sys

import pytest

from npsco.errors import NpscoError
from npsco.logger import MetricsLogger, Tracking
from npsco.ppo.train import train


def test_every_row_goes_to_wandb_at_its_step(fake_wandb, tmp_path, tiny_maze):
    cfg = tiny_maze(total_timesteps=3 * 64)
    result = train(cfg, run_dir=tmp_path / "run", progress=False, tensorboard=False, tracking=Tracking(group="g"))
    (run,) = fake_wandb
    assert run.finished and run.init["project"] == "npsco" and run.init["group"] == "g"
    assert run.init["config"]["ppo"]["seed"] == cfg.seed and run.init["dir"] == str(tmp_path / "run")
    assert [step for step, _ in run.logged] == [row["global_step"] for row in result.metrics] == [64, 128, 192]
    assert all("global_step" not in values and "charts/SPS" in values for _, values in run.logged)


def test_without_wandb_installed_the_message_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    with pytest.raises(NpscoError, match=r"pip install 'npsco\[wandb\]'"):
        MetricsLogger(tmp_path, tensorboard=False, tracking=Tracking())


def test_offline_mode_writes_a_run_without_a_network(monkeypatch, tmp_path, tiny_maze):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    train(tiny_maze(total_timesteps=2 * 64), run_dir=tmp_path, progress=False, tensorboard=False, tracking=Tracking())
    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    assert run_file.stat().st_size > 0
