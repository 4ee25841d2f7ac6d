"""`npsco train --force` killed with SIGKILL at several moments never leaves a run directory that a later `npsco train`
accepts as finished with a configuration other than its policy's; every training starts in an empty folder."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npsco.cli import main
from npsco.io import read_json
from npsco.policy import load_policy

TINY = ["train", "--steps", "4096", "--set", "eval_episodes=2", "--no-progress"]
A = TINY + ["--seed", "1"]
B = TINY + ["--seed", "2", "--set", "learning_rate=1e-3"]
CHILD_ENV = {**os.environ, "MUJOCO_GL": "egl", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def accepted_policy_matches(out: Path) -> None:
    """The invariant: a folder with a config.json and a policy.safetensors holds a policy of that configuration."""
    if (out / "config.json").exists() and (out / "policy.safetensors").exists():
        assert load_policy(out / "policy.safetensors").metadata["config"] == read_json(out / "config.json")["ppo"]


def emptying(out: Path) -> bool:
    """The old run's files are on their way into the folder's trash (`npsco.io.fresh_dir`)."""
    return any(out.glob(".npsco-trash-*"))


def config_of_b(out: Path) -> bool:
    try:
        return json.loads((out / "config.json").read_text())["ppo"]["seed"] == 2
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return False


def training(out: Path) -> bool:
    return config_of_b(out) and (out / "metrics.jsonl").exists() and (out / "metrics.jsonl").stat().st_size > 0


def kill_when(cmd: list[str], ready, timeout: float = 120.0) -> int | None:
    """Start `cmd`, SIGKILL it as soon as `ready(seconds since the start)` holds; returns its exit code if it ended
    before that."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=CHILD_ENV)
    start = time.monotonic()
    deadline = start + timeout
    try:
        while proc.poll() is None and not ready(time.monotonic() - start):
            assert time.monotonic() < deadline, "the child neither reached the moment nor ended"
            time.sleep(0.001)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        code = proc.wait()
    return None if code == -signal.SIGKILL else code


def test_force_killed_at_any_moment_never_leaves_a_policy_of_another_configuration(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(A + ["--out", str(out)]) == 0
    start = time.monotonic()
    assert kill_when([sys.executable, "-m", "npsco.cli", *B, "--force", "--out", str(out)], lambda t: False) == 0
    full = time.monotonic() - start  # a whole forced run, interpreter start included
    assert main(A + ["--force", "--out", str(out)]) == 0  # back to a finished run of A
    rng = random.Random(16)
    delays = [rng.uniform(0.2, full) for _ in range(3)]  # random moments of a whole forced run
    moments = [lambda t: emptying(out), lambda t: config_of_b(out), lambda t: training(out)] + [
        lambda t, d=d: t > d for d in delays
    ]
    for moment in moments:
        kill_when([sys.executable, "-m", "npsco.cli", *B, "--force", "--out", str(out)], moment)
        accepted_policy_matches(out)
        capsys.readouterr()
        for args in (A, B):  # what a later plain `npsco train` makes of the folder
            code = main(args + ["--out", str(out)])
            text = capsys.readouterr()
            assert code in (0, 2), text
            accepted_policy_matches(out)
            if "already trained" in text.out:
                assert load_policy(out / "policy.safetensors").metadata["seed"] == int(args[args.index("--seed") + 1])
        assert main(A + ["--force", "--out", str(out)]) == 0  # the next kill replaces a finished run of A again
    assert not list(out.glob(".npsco-trash-*"))  # what a killed deletion left was cleaned up


def test_every_training_starts_in_an_empty_folder(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(A + ["--out", str(out)]) == 0
    (out / "checkpoints").mkdir(exist_ok=True)
    (out / "checkpoints" / "interrupted.safetensors").write_bytes(b"an earlier attempt")
    assert main(B + ["--force", "--out", str(out)]) == 0
    assert not (out / "checkpoints" / "interrupted.safetensors").exists()
    assert len(list((out / "tensorboard").iterdir())) == 1  # the earlier run's event file is gone
    assert load_policy(out / "policy.safetensors").metadata["seed"] == 2
    # an interrupted run (config.json, no policy) is restarted in an empty folder as well
    (out / "policy.safetensors").unlink()
    (out / "stale.txt").write_text("left by the interrupted attempt")
    assert main(B + ["--out", str(out)]) == 0
    assert not (out / "stale.txt").exists() and (out / "policy.safetensors").exists()


@pytest.mark.parametrize("what", ["a folder without config.json", "a population run"])
def test_train_never_empties_a_folder_that_is_not_a_train_run(tmp_path, capsys, what):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    if what == "a population run":
        (out / "config.json").write_text(json.dumps({"ppo": {}, "method": {"method": "ipd"}}))
    assert main(A + ["--force", "--out", str(out)]) == 2
    assert "is not an npsco train run directory" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "keep me"
