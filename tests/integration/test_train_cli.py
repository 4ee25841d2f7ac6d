"""End-to-end tests of `npsco train` and `npsco evaluate` with tiny budgets: in-process through `npsco.cli.main`, and
once through the installed console script in a real subprocess."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from npsco.cli import main
from npsco.logger import read_metrics
from npsco.policy import load_policy

os.environ.setdefault("MUJOCO_GL", "egl")

MAZE = "npsco/FourRewardMaze-v0"
TINY_MAZE = ["--steps", "2048", "--set", "eval_every=1", "--set", "eval_episodes=5", "--no-progress"]


def train(out: Path, *extra: str) -> int:
    return main(["train", *TINY_MAZE, "--out", str(out), *extra])


@pytest.fixture(scope="module")
def maze_run(tmp_path_factory) -> Path:
    """A maze run of 2 iterations of 1024 steps, evaluated (5 episodes) after each."""
    out = tmp_path_factory.mktemp("maze") / "run"
    assert train(out) == 0
    return out


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# -------------------------------------------------------------------------------------------------- the run folder
def test_train_writes_config_metrics_tensorboard_and_policy(maze_run):
    config = json.loads((maze_run / "config.json").read_text())
    assert (config["command"], config["preset"]) == ("train", "default")
    ppo = config["ppo"]
    assert (ppo["env_id"], ppo["seed"], ppo["total_timesteps"], ppo["eval_every"], ppo["eval_episodes"]) == (
        MAZE,
        0,
        2048,
        1,
        5,
    )

    rows = read_metrics(maze_run / "metrics.jsonl")
    assert [r["global_step"] for r in rows] == [1024, 2048]
    for row in rows:
        for key in (
            "charts/SPS",
            "charts/learning_rate",
            "charts/episodic_return",
            "charts/episodes",
            "losses/policy_loss",
            "losses/value_loss",
            "losses/entropy",
            "losses/approx_kl",
            "losses/clipfrac",
            "losses/explained_variance",
            "eval/return_mean",
            "eval/return_std",
            "eval/length_mean",
        ):
            assert key in row and math.isfinite(row[key]), key
        assert row["charts/SPS"] > 0 and -1.01 <= row["eval/return_mean"] <= 10.0
    assert rows[0]["charts/learning_rate"] == 1e-3 and rows[1]["charts/learning_rate"] == pytest.approx(5e-4)

    events = list((maze_run / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1 and events[0].stat().st_size > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(maze_run / "tensorboard"))
    acc.Reload()
    assert {"charts/SPS", "losses/policy_loss", "eval/return_mean"} <= set(acc.Tags()["scalars"])
    assert [e.step for e in acc.Scalars("eval/return_mean")] == [1024, 2048]

    policy = load_policy(maze_run / "policy.safetensors")
    assert policy.metadata["env_id"] == MAZE and policy.metadata["method"] == "ppo" and policy.metadata["seed"] == 0
    assert policy.metadata["training"] == {"global_step": 2048, "iteration": 2}
    assert policy.metadata["config"] == ppo
    assert policy.mean_action(np.array([3.0, 8.0])).shape == (2,)
    assert not (maze_run / "checkpoints").exists()  # the maze preset has checkpoint_every=0


def test_train_prints_what_it_does_and_the_final_evaluation(tmp_path, capsys):
    assert train(tmp_path / "run", "--no-tensorboard") == 0
    out = capsys.readouterr().out
    assert f"training PPO on {MAZE} (preset default, seed 0, 2,048 steps) -> {tmp_path / 'run'}" in out
    assert "final deterministic evaluation: " in out and "(5 episodes)" in out
    assert not (tmp_path / "run" / "tensorboard").exists()


def test_periodic_checkpoint_is_the_final_policy(tmp_path):
    assert train(tmp_path / "run", "--set", "checkpoint_every=1", "--no-tensorboard") == 0
    last, final = (
        load_file(tmp_path / "run" / name) for name in ("checkpoints/last.safetensors", "policy.safetensors")
    )
    assert last.keys() == final.keys()
    for name in final:
        np.testing.assert_array_equal(last[name], final[name])


# -------------------------------------------------------------------------------------------------------- evaluate
def test_evaluate_prints_mean_and_std_and_writes_json(maze_run, capsys):
    assert main(["evaluate", str(maze_run), "--episodes", "6", "--seed", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    summary = json.loads((maze_run / "policy.eval.json").read_text())
    assert summary["episodes"] == 6 and summary["seed"] == 3 and summary["deterministic"] is True
    assert summary["env_id"] == MAZE and summary["checkpoint"] == str(maze_run / "policy.safetensors")
    returns = np.array(summary["returns"])
    assert len(returns) == 6
    assert summary["return_mean"] == pytest.approx(returns.mean()) and summary["return_std"] == pytest.approx(
        returns.std()
    )
    assert sum(summary["goals"].values()) == 6
    assert lines[0].startswith(
        f"{MAZE}: return {summary['return_mean']:.2f} +- {summary['return_std']:.2f} over 6 deterministic episodes"
    )
    assert lines[1] == f"written: {maze_run / 'policy.eval.json'}"


def test_evaluate_is_deterministic_and_honours_out(maze_run, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["evaluate", str(maze_run / "policy.safetensors"), "--episodes", "4", "--out", str(a)]) == 0
    assert main(["evaluate", str(maze_run / "policy.safetensors"), "--episodes", "4", "--out", str(b)]) == 0
    assert json.loads(a.read_text())["returns"] == json.loads(b.read_text())["returns"]


def test_evaluate_a_valid_checkpoint_without_training_config(maze_run, tmp_path, capsys):
    from safetensors.numpy import save

    raw = (maze_run / "policy.safetensors").read_bytes()
    meta = json.loads(json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])["__metadata__"]["npsco"])
    del meta["config"]
    path = tmp_path / "policy.safetensors"
    path.write_bytes(save(load_file(maze_run / "policy.safetensors"), metadata={"npsco": json.dumps(meta)}))
    load_policy(path)  # a valid checkpoint
    assert main(["evaluate", str(path), "--episodes", "2"]) == 0


def test_evaluate_a_missing_checkpoint_is_a_one_line_error(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path / "nothing")]) == 2
    assert "no such checkpoint" in one_line_error(capsys)


# ---------------------------------------------------------------------------------------------------------- MuJoCo
def test_train_and_evaluate_hopper_end_to_end(tmp_path, capsys):
    out = tmp_path / "hopper"
    args = [
        "train",
        "--env",
        "Hopper-v5",
        "--steps",
        "4096",
        "--set",
        "num_steps=2048",
        "--set",
        "update_epochs=1",
        "--set",
        "eval_episodes=1",
        "--no-progress",
        "--no-tensorboard",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["global_step"] for r in rows] == [2048, 4096]
    assert "eval/return_mean" in rows[-1] and rows[-1]["charts/episodes"] > 0
    policy = load_policy(out)
    assert (policy.obs_dim, policy.action_dim) == (11, 3)
    assert policy.metadata["env_id"] == "Hopper-v5" and policy.metadata["config"]["num_steps"] == 2048
    assert not np.allclose(policy.obs_var, 1.0)  # the normaliser's statistics travel with the policy
    assert main(["evaluate", str(out), "--episodes", "1"]) == 0
    assert "Hopper-v5: return " in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ re-runs and errors
def test_rerun_with_the_same_config_does_not_retrain(maze_run, capsys):
    before = {name: (maze_run / name).read_bytes() for name in ("policy.safetensors", "metrics.jsonl", "config.json")}
    assert train(maze_run) == 0
    assert "already trained" in capsys.readouterr().out
    assert {name: (maze_run / name).read_bytes() for name in before} == before


def test_rerun_with_a_different_config_is_refused(maze_run, capsys):
    config = (maze_run / "config.json").read_text()
    assert main(["train", *TINY_MAZE, "--set", "learning_rate=5e-4", "--out", str(maze_run)]) == 2
    err = one_line_error(capsys)
    assert err.startswith("npsco train: error: ") and "different configuration" in err and "--force" in err
    assert "ppo.learning_rate: 0.001 in the run, 0.0005 now" in err  # the difference is named
    assert (maze_run / "config.json").read_text() == config


def old_run(maze_run: Path, out: Path, ppo: dict) -> Path:
    """A copy of `maze_run` at `out` whose config.json's PPO settings are updated with `ppo` (`None`: removed), as
    an earlier npsco may have recorded them."""
    out.mkdir()
    for name in ("policy.safetensors", "metrics.jsonl"):
        (out / name).write_bytes((maze_run / name).read_bytes())
    config = json.loads((maze_run / "config.json").read_text())
    config["ppo"] = {k: v for k, v in {**config["ppo"], **ppo}.items() if v is not None}
    (out / "config.json").write_text(json.dumps(config))
    return out


def test_a_run_made_before_a_setting_existed_matches_at_its_default(maze_run, tmp_path, capsys):
    """A config.json written by an npsco without `state_every`: the rerun finds it trained, unless the new setting
    is given another value than its default."""
    old = old_run(maze_run, tmp_path / "old", {"state_every": None})
    capsys.readouterr()
    assert train(old) == 0
    assert "already trained" in capsys.readouterr().out
    assert train(old, "--set", "state_every=5") == 2
    assert "ppo.state_every: not recorded in the run, 5.0 now" in one_line_error(capsys)


def test_a_run_that_recorded_the_removed_update_backend(maze_run, tmp_path, capsys):
    """An npsco before 2026-11-28 recorded `update_backend`: `numpy` (its default) is the update that runs today, so
    the rerun finds the run trained; `torch` was another update, a difference; giving the setting is refused, with
    why."""
    numpy_run = old_run(maze_run, tmp_path / "numpy", {"update_backend": "numpy"})
    capsys.readouterr()
    assert train(numpy_run) == 0
    assert "already trained" in capsys.readouterr().out
    assert train(old_run(maze_run, tmp_path / "torch", {"update_backend": "torch"})) == 2
    assert "ppo.update_backend: 'torch' in the run, not a setting now" in one_line_error(capsys)
    assert train(numpy_run, "--set", "update_backend=numpy") == 2
    err = one_line_error(capsys)
    assert "update_backend is not a setting now: every update runs in numpy" in err and "leave it out" in err


@pytest.mark.parametrize(
    ("env_id", "fragments"),
    [
        ("NoSuchEnv-v0", ["unknown environment id 'NoSuchEnv-v0'"]),
        ("Hopper-v3", ["mujoco-py", "Hopper-v5", "Hopper-v4"]),
        ("Walker2d-v3", ["mujoco-py", "Walker2d-v5"]),
        ("HalfCheetah-v3", ["mujoco-py", "HalfCheetah-v5"]),
        ("Hopper-v2", ["mujoco-py", "Hopper-v5"]),
    ],
)
def test_unsupported_env_ids_are_one_line_errors(tmp_path, capsys, env_id, fragments):
    assert main(["train", "--env", env_id, "--no-progress", "--out", str(tmp_path / "run")]) == 2
    err = one_line_error(capsys)
    assert err.startswith("npsco train: error: ")
    for fragment in fragments:
        assert fragment in err
    assert not (tmp_path / "run").exists()  # nothing written


@pytest.mark.parametrize(
    ("setting", "fragment"),
    [
        ("learning_rat=1", "unknown setting 'learning_rat'"),
        ("num_envs=two", "bad value for num_envs"),
        ("num_minibatches=3", "must divide the batch size"),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path, capsys, setting, fragment):
    assert main(["train", "--set", setting, "--out", str(tmp_path / "run")]) == 2
    assert fragment in one_line_error(capsys)


# ----------------------------------------------------------------------------------------------------- determinism
def test_same_seed_gives_identical_metrics_and_policy_and_another_seed_differs(maze_run, tmp_path, timing):
    assert train(tmp_path / "again", "--no-tensorboard") == 0
    assert train(tmp_path / "seed1", "--seed", "1", "--no-tensorboard") == 0
    first = read_metrics(maze_run / "metrics.jsonl")
    again, other = (
        read_metrics(tmp_path / "again" / "metrics.jsonl"),
        read_metrics(tmp_path / "seed1" / "metrics.jsonl"),
    )
    assert timing.removed(again) == timing.removed(first)
    assert first[0].keys() == again[0].keys() and timing.keys <= first[0].keys()
    assert timing.removed(other) != timing.removed(first)

    tensors = load_file(maze_run / "policy.safetensors")
    same, different = (
        load_file(tmp_path / "again" / "policy.safetensors"),
        load_file(tmp_path / "seed1" / "policy.safetensors"),
    )
    for name in tensors:
        np.testing.assert_array_equal(same[name], tensors[name])
    assert not np.array_equal(different["actor.0.weight"], tensors["actor.0.weight"])


# ------------------------------------------------------------------------------------------------ the console script
def console_script() -> str:
    script = Path(sys.executable).parent / "npsco"
    assert script.exists(), f"no npsco console script next to {sys.executable}; run scripts/setup.sh"
    return str(script)


def test_console_script_trains_and_reports_errors(tmp_path):
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    out = tmp_path / "run"
    done = subprocess.run(
        [
            console_script(),
            "train",
            "--steps",
            "1024",
            "--set",
            "eval_episodes=2",
            "--no-progress",
            "--no-tensorboard",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "final deterministic evaluation" in done.stdout
    assert (out / "policy.safetensors").exists() and (out / "metrics.jsonl").exists()

    failed = subprocess.run(
        [console_script(), "train", "--env", "Hopper-v3", "--out", str(tmp_path / "v3")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert failed.returncode == 2
    assert failed.stderr.count("\n") == 1 and "mujoco-py" in failed.stderr and "Traceback" not in failed.stderr
