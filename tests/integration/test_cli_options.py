"""Options of `npsco train` and `npsco population` beyond the settings: a `--config` file (its values are the
defaults, the command line wins), `--track` (Weights & Biases, through a stand-in module and in W&B's offline mode),
and the warning for a threshold that no pair of references reaches. The refusals of bad input are in the table of
test_reliability.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from npsco.cli import main
from npsco.cli_config import as_text, parse_args
from npsco.cli_parser import build_parser
from npsco.errors import NpscoError
from npsco.fields import parse_value
from npsco.logger import NO_WANDB
from npsco.population_jobs import unreached_thresholds
from npsco.ppo.trainer import Trainer
from npsco.settings import ppo_settings
from npsco.tasks import MAZE_ID


def parsed(argv: list[str]):
    """The options of `npsco ARGV` as `npsco.cli.main` reads them, its --config file applied."""
    parser = build_parser()
    return parse_args(parser, argv, parser.parse_args(argv))


# ------------------------------------------------------------------------------------------------------- --config
def test_the_file_gives_the_defaults_and_the_command_line_wins(tmp_path):
    config = tmp_path / "train.toml"
    config.write_text(
        f'env = "{MAZE_ID}"\nseed = 3\nsteps = 4096\nno_progress = true\n'
        "[set]\nlearning_rate = 1e-3\nactor_hidden = [32, 32]\n"
    )
    args = parsed(["train", "--config", str(config), "--seed", "5", "--set", "learning_rate=5e-4"])
    assert (args.env, args.seed, args.steps, args.no_progress, args.no_tensorboard) == (MAZE_ID, 5, 4096.0, True, False)
    assert args.set == ["learning_rate=0.001", "actor_hidden=32,32", "learning_rate=5e-4"]  # the file's first
    cfg = ppo_settings(args.env, args.preset, args.seed, int(args.steps), None, args.set)
    assert (cfg.seed, cfg.total_timesteps, cfg.learning_rate, cfg.actor_hidden) == (5, 4096, 5e-4, (32, 32))


def test_population_options_of_several_values_and_method_settings(tmp_path):
    config = tmp_path / "population.toml"
    config.write_text(
        'method = "wsr"\nr0_scale = [1, 2.5]\nref_checkpoints = ["a", "b"]\nnovel = 2\nworkers = 2\n'
        'mset = ["wsr_weight=2"]\nset = ["num_envs=4"]\n'
    )
    args = parsed(["population", "--config", str(config), "--novel", "3", "--mset", "wsr_weight=5"])
    assert (args.method, args.r0_scale, args.ref_checkpoints) == ("wsr", [1.0, 2.5], ["a", "b"])
    assert (args.novel, args.workers, args.refs, args.mset, args.set) == (
        3,
        2,
        None,
        ["wsr_weight=2", "wsr_weight=5"],
        ["num_envs=4"],
    )


def test_experiment_reads_its_options_from_a_file_too(tmp_path, capsys):
    config = tmp_path / "experiment.toml"
    config.write_text(
        'env = ["Hopper-v5", "Walker2d-v5"]\nmethods = ["ipd", "lagrangian"]\nrefs = 2\nnovel = 2\nsteps = 1e5\n'
        "ablation = [2.0]\nworkers = 4\nno_report = true\n[set]\neval_every = 5\n"
    )
    args = parsed(["experiment", "--config", str(config), "--novel", "3"])
    assert (args.env, args.methods, args.refs, args.novel, args.steps) == (
        ["Hopper-v5", "Walker2d-v5"],
        ["ipd", "lagrangian"],
        2,
        3,
        1e5,
    )
    assert (args.ablation, args.workers, args.no_report, args.set) == ([2.0], 4, True, ["eval_every=5"])
    config.write_text(
        'env = "Hopper-v5"\nablation = []\n'
    )  # one value for a list of one; an empty list where none is the default
    assert (
        parsed(["experiment", "--config", str(config)]).env,
        parsed(["experiment", "--config", str(config)]).ablation,
    ) == (
        ["Hopper-v5"],
        [],
    )
    config.write_text("methods = []\n")  # an empty list where the default is not one: refused
    with pytest.raises(NpscoError, match="methods must be a list of texts"):
        parsed(["experiment", "--config", str(config)])
    config.write_text('methods = ["ipd", "nonesuch"]\n')  # checked as the command line's, before anything is written
    assert main(["experiment", "--config", str(config), "--out", str(tmp_path / "x")]) == 2
    assert "--methods: unknown nonesuch" in capsys.readouterr().err and not (tmp_path / "x").exists()
    config.write_text("[mset]\nwsr_weight = 2.0\n")  # an experiment runs every method: no method settings
    with pytest.raises(NpscoError, match="unknown key 'mset'"):
        parsed(["experiment", "--config", str(config)])


def test_a_method_chosen_on_the_command_line_checks_the_files_method_settings(tmp_path):
    config = tmp_path / "population.toml"
    config.write_text("[mset]\nwsr_weight = 2.0\n")
    assert parsed(["population", "--config", str(config), "--method", "wsr"]).mset == ["wsr_weight=2.0"]
    with pytest.raises(NpscoError, match=r"population.toml: mset wsr_weight: not a setting of method ipd"):
        parsed(["population", "--config", str(config)])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("seed = 3.0", "seed must be a whole number, got 3.0"),
        ('steps = "1e5"', 'steps must be a number, got "1e5"'),
        ('env_backend = "fast"', 'env_backend must be one of auto, sync, async, envpool, got "fast"'),
        ("no_tensorboard = 1", "no_tensorboard must be true or false, got 1"),
        ("force = true", "'force' is not read from a file; give --force on the command line"),
        ('env-package = "pkg"', "unknown key 'env-package' (write 'env_package')"),
        ('set = "num_envs=4"', 'set must be a list of "key=value" texts or a table ([set]), got "num_envs=4"'),
        ("set = {num_envs = 4.5}", "set: bad value for num_envs: 4.5 (expected int)"),
        ("set = {norm_obs = 1}", "set: bad value for norm_obs: 1 (expected bool)"),
        ("set = {learning_rat = 1e-3}", "set: unknown setting 'learning_rat'; known: actor_hidden,"),
        ('set = ["num_envs=two"]', "set: bad value for num_envs: 'two' (expected int)"),
        ("set = {actor_hidden = [[64]]}", "set.actor_hidden must be a number, text, true/false or a list of whole"),
        ("seed = 3\nseed = 4", "not valid TOML"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(tmp_path, body, message):
    config = tmp_path / "train.toml"
    config.write_text(body + "\n")
    with pytest.raises(NpscoError) as e:
        parsed(["train", "--config", str(config)])
    assert str(e.value).startswith(f"{config}: ") and message in str(e.value), str(e.value)


@pytest.mark.parametrize("value", [True, False, 3, -2, 2.5, 1e-3, 1e20, "sync", "none", [64, 64], []])
def test_a_table_value_reads_back_as_the_same_value(value):
    kinds = {bool: bool, int: int, float: float, str: str}
    kind = tuple[int, ...] if isinstance(value, list) else kinds[type(value)]
    text = as_text(Path("f.toml"), "set.x", value)
    expected = tuple(value) if isinstance(value, list) else None if value == "none" else value
    assert parse_value("x", text, kind | None if value == "none" else kind) == expected


def test_a_config_file_trains_as_its_command_line(tmp_path, capsys):
    """The run records the settings of the file with the command line's over them, as the same flags would."""
    config = tmp_path / "train.toml"
    config.write_text(
        f'env = "{MAZE_ID}"\nsteps = 99999\nno_progress = true\nno_tensorboard = true\n'
        f'out = "{tmp_path / "run"}"\n[set]\nnum_steps = 64\neval_every = 0\n'
    )
    assert main(["train", "--config", str(config), "--steps", "1024", "--seed", "2"]) == 0
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["ppo"]
    flags = ["--steps", "1024", "--seed", "2", "--set", "num_steps=64", "--set", "eval_every=0"]
    assert main(["train", "--env", MAZE_ID, *flags, "--no-progress", "--out", str(tmp_path / "run")]) == 0
    assert "already trained with this configuration" in capsys.readouterr().out
    assert (recorded["seed"], recorded["total_timesteps"], recorded["num_steps"]) == (2, 1024, 64)


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


@pytest.mark.parametrize("command", ["train", "population", "experiment"])
def test_track_without_wandb_says_what_to_install_and_writes_nothing(tmp_path, monkeypatch, capsys, command):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError, find_spec finds nothing
    quiet = [] if command == "experiment" else ["--no-progress"]
    assert main([command, "--steps", "1024", *quiet, "--out", str(tmp_path / "out"), "--track"]) == 2
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


@pytest.mark.parametrize("value", ["inf", "nan", "1e400"])
def test_infinite_numbers_are_refused_in_one_line_on_the_command_line_and_in_files(value, tmp_path, capsys):
    for command in ("train", "population"):
        assert main([command, "--steps", value, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert f"npsco {command}: error: --steps must be a finite number, got " in err and len(err.splitlines()) == 1
    (tmp_path / "c.toml").write_text(f'env = "{MAZE_ID}"\nsteps = {value}\n')  # TOML reads 1e400 as inf
    assert main(["train", "--config", str(tmp_path / "c.toml"), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "steps must be a finite number" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_a_mistyped_option_is_said_with_the_commands_own_usage(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["population", "--env", MAZE_ID, "--novl", "1"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "usage: npsco population" in err
    assert "npsco population: error: unrecognized arguments: --novl 1" in err


def test_a_population_at_a_train_run_says_what_the_folder_holds(tmp_path, capsys):
    common = ["--env", MAZE_ID, "--steps", "1024", "--set", "eval_every=0", "--no-progress", "--out", str(tmp_path)]
    assert main(["train", *common]) == 0
    capsys.readouterr()
    assert main(["population", "--refs", "2", "--novel", "1", *common]) == 2
    out = capsys.readouterr()
    assert "holds an `npsco train` run (one policy), not a population" in out.err
    assert "1 novel ipd policy per chain" in out.out  # one policy, said so


def test_things_that_exist_are_not_called_missing(tmp_path, capsys):
    """A folder without a policy yet, a population run where one policy is wanted, a folder or a device where an
    import wants a file: each said for what it is (all were "no such checkpoint" or "no such file")."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "pop").mkdir()
    (tmp_path / "pop" / "manifest.json").write_text("{}")
    cases = [
        (["evaluate", str(tmp_path / "empty")], "is a folder without policy.safetensors: no finished policy there"),
        (["export", str(tmp_path / "pop"), "--onnx"], "is a population run, not one policy"),
        (["import", str(tmp_path / "empty"), "--env", MAZE_ID, "--out", str(tmp_path / "i")], "is a folder: give"),
        (["import", "/dev/zero", "--env", MAZE_ID, "--out", str(tmp_path / "j")], "is not a regular file: give"),
        (["evaluate", str(tmp_path / "gone")], "gone: no such checkpoint"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--frames", "100000"], "--frames = 100,000 is past npsco's limit of 2,000"),
        (["--size", "1000000"], "--size = 1,000,000 is past npsco's limit of 4,096"),
        (["--frames", "2000", "--size", "1000"], "--frames 2000 x --size 1000 is 5.6 GiB of frames"),
        (["--frames", "0"], "--frames must be >= 1"),
    ],
)
def test_render_sizes_are_bounded_before_anything_is_read(flags, message, tmp_path, capsys):
    """Refused before the checkpoint is read (this one does not exist) and before any frame is allocated."""
    assert main(["render", str(tmp_path / "none.safetensors"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1
