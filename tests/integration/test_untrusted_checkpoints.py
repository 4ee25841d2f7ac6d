"""A checkpoint never chooses code to run (issue 28, item 2): a policy whose metadata names a module as its task
(`this:Zen`, `os:abort`, `tempfile:mkdtemp`) makes no npsco command import or call it; the task comes from the run's
config.json or the command line only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from npsco.cli import main
from npsco.policy import Policy, load_policy

ZEN = "Beautiful is better than ugly"


def forged(maze_policies, action: tuple[float, float], env_id: str, **metadata) -> Policy:
    """A maze policy whose metadata names `env_id` as its task."""
    policy = maze_policies.const(action, **metadata)
    policy.metadata["env_id"] = env_id
    return policy


@pytest.fixture
def forged_run(planned_run, maze_policies, tmp_path) -> Path:
    """A maze population run whose two references' checkpoints say their task is `this:Zen`."""
    out = tmp_path / "run"
    planned_run(out)
    for i in range(2):
        forged(maze_policies, (-1.0, 0.5 * i), "this:Zen", seed=i).save(out / f"refs/ref{i}/policy.safetensors")
    return out


def refused_without_importing(argv: list[str], capsys) -> str:
    assert "this" not in sys.modules
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "this" not in sys.modules and ZEN not in captured.out, captured.out
    assert captured.err.count("\n") == 1, captured.err
    return captured.err


@pytest.mark.parametrize(
    "command",
    [
        "evaluate RUN",
        "report RUN --out REPORT --no-videos",
        "render RUN/refs/ref0",
        "threshold RUN",
        "evaluate LONE",
        "threshold LONE LONE",
        "render LONE",
    ],
)
def test_a_task_id_from_a_checkpoint_is_never_imported(command, forged_run, maze_policies, tmp_path, capsys):
    lone = forged(maze_policies, (0.5, 0.5), "this:Zen").save(tmp_path / "lone" / "forged.safetensors")
    words = command.replace("RUN", str(forged_run)).replace("REPORT", str(tmp_path / "report"))
    err = refused_without_importing(words.replace("LONE", str(lone)).split(), capsys)
    assert "this:Zen: this task id comes from a checkpoint" in err, err


def test_a_checkpoint_cannot_call_a_function_of_a_loaded_module(forged_run, maze_policies, tmp_path, children):
    """`os:abort` would end the process, `tempfile:mkdtemp` create a folder: neither is called (run as a child)."""
    forged(maze_policies, (-1.0, 0.0), "os:abort").save(forged_run / "refs/ref0/policy.safetensors")
    lone = forged(maze_policies, (0.5, 0.5), "tempfile:mkdtemp").save(tmp_path / "lone" / "policy.safetensors")
    temp = tmp_path / "tmp"
    temp.mkdir()
    for argv in (["evaluate", str(forged_run)], ["evaluate", str(lone)]):
        proc = subprocess.run(
            [sys.executable, "-m", "npsco.cli", *argv],
            capture_output=True,
            text=True,
            env={**children.env, "TMPDIR": str(temp)},
            timeout=300,
        )
        assert proc.returncode == 2, (proc.returncode, proc.stderr)
        assert "comes from a checkpoint" in proc.stderr and list(temp.iterdir()) == []


def test_a_module_task_is_made_when_the_command_line_names_it(tmp_path, capsys, constant_policy):
    """The same id given with --env is the user's choice: the policy is evaluated on it."""
    env_id = "gymnasium.envs.classic_control.pendulum:PendulumEnv"
    policy = constant_policy("Pendulum-v1", 0.0)
    policy.metadata.update(env_id=env_id, config={"max_episode_steps": 20})
    path = policy.save(tmp_path / "pendulum.safetensors")
    assert main(["evaluate", str(path), "--episodes", "2"]) == 2
    assert "comes from a checkpoint" in capsys.readouterr().err
    assert main(["evaluate", str(path), "--episodes", "2", "--env", env_id]) == 0
    assert f"{env_id}: return" in capsys.readouterr().out
    assert type(load_policy(path).metadata["env_id"]).__name__ == "CheckpointTaskId"
