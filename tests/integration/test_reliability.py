"""Reliability of the `npsco` command (issue 7): crash-safe files, Ctrl-C, safe loading through the CLI, one-line
errors for bad input (the table of docs/errors.md is checked against what the CLI prints), and the NaN guard.

Kill-and-resume of a population run is in test_kill_resume.py. Run this file as a script to print the table of
docs/errors.md from the CLI's actual messages:

    .venv/bin/python tests/integration/test_reliability.py
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import math
import os
import pickle
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from npsco.cli import main  # noqa: E402
from npsco.errors import NpscoError  # noqa: E402
from npsco.fields import apply_overrides  # noqa: E402
from npsco.io import atomic_write_json, atomic_write_text  # noqa: E402
from npsco.logger import MetricsLogger, read_metrics  # noqa: E402
from npsco.methods.base import Method  # noqa: E402
from npsco.policy import load_policy  # noqa: E402
from npsco.ppo.config import preset  # noqa: E402
from npsco.ppo.hooks import StepOutcome  # noqa: E402
from npsco.ppo.learner import Learner  # noqa: E402
from npsco.ppo.trainer import Trainer  # noqa: E402
from npsco.tasks import MAZE_ID  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src" / "npsco"
DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
CHILD_ENV = {**os.environ, "MUJOCO_GL": "egl", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
"""A child process's environment: one BLAS thread (on a loaded 2-core machine OpenBLAS threads make the numpy PPO
update ~100x slower)."""


# ---------------------------------------------------------------------------------------------- inputs for the cases
class _CreatesMarker:
    """Unpickling this object creates the file `path`: the payload of a malicious checkpoint."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


def _untrained_policy(env_id: str, out: Path) -> Path:
    cfg = replace(preset(env_id), num_envs=1, num_steps=64, num_minibatches=1)
    trainer = Trainer(cfg, tensorboard=False)
    trainer.envs.close()
    return trainer.policy().save(out / "policy.safetensors")


def _with_header(path: Path, edit) -> bytes:
    """The checkpoint at `path` with its safetensors JSON header replaced by `edit(header)` (data appended as
    needed)."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header, data = json.loads(raw[8 : 8 + n]), raw[8 + n :]
    header, data = edit(header, data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data


def make_inputs(root: Path) -> None:
    """The files the bad-input cases refer to, under `root` (written as DIR in docs/errors.md)."""
    maze = _untrained_policy(MAZE_ID, root / "maze")
    _untrained_policy("Hopper-v5", root / "hopper")
    # a finished maze population (one reference) to borrow references from
    (root / "maze_pop" / "refs" / "ref0").mkdir(parents=True)
    shutil.copy(maze, root / "maze_pop" / "refs" / "ref0" / "policy.safetensors")
    atomic_write_json(
        root / "maze_pop" / "manifest.json",
        {
            "format": "npsco-population",
            "format_version": 1,
            "env_id": MAZE_ID,
            "method": "ppo",
            "r0_default": None,
            "members": [
                {"name": "ref0", "role": "reference", "method": "ppo", "seed": 0, "path": "refs/ref0", "status": "done"}
            ],
        },
    )
    # run directories holding another configuration, and a folder that is not a run directory
    other = apply_overrides(preset(MAZE_ID), ["total_timesteps=2048", "eval_episodes=2", "learning_rate=5e-4"])
    atomic_write_json(
        root / "other_train" / "config.json", {"command": "train", "preset": "default", "ppo": other.to_dict()}
    )
    atomic_write_json(root / "other_pop" / "config.json", {"refs": 7})
    atomic_write_text(root / "notes" / "notes.txt", "my notes\n")
    # a pickle renamed .safetensors whose unpickling would create DIR/pwned
    (root / "pickle").mkdir()
    (root / "pickle" / "policy.safetensors").write_bytes(
        pickle.dumps({"actor.0.weight": _CreatesMarker(root / "pwned")})
    )

    # hand-written safetensors headers: an extra tensor the architecture does not have, and an extra non-tensor entry
    def extra_tensor(header, data):
        header["actor.extra"] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
        return header, data + np.float32(1).tobytes()

    def extra_entry(header, data):
        header["__code__"] = "__import__('os').system('touch pwned')"
        return header, data

    (root / "extra_tensor.safetensors").write_bytes(_with_header(maze, extra_tensor))
    (root / "extra_entry.safetensors").write_bytes(_with_header(maze, extra_entry))

    # forged and unbounded inputs (docs/reliability.md): manifests, a task id naming a module, a FIFO, a grid
    def forged_pop(name: str, edit) -> None:
        shutil.copytree(root / "maze_pop", root / name)
        manifest = json.loads((root / name / "manifest.json").read_text())
        (root / name / "manifest.json").write_text(edit(manifest))

    novel = {"name": "ipd/k0", "role": "novel", "method": "ipd", "seed": 1000, "chain": "ipd", "index": 0}
    forged_pop("outside_pop", lambda m: json.dumps({**m, "members": [*m["members"], {**novel, "path": "../victim"}]}))
    forged_pop("typed_pop", lambda m: json.dumps({**m, "members": [{**m["members"][0], "path": None}]}))
    forged_pop("deep_pop", lambda m: '{"members": ' + "[" * 100 + "]" * 100 + "}")
    forged = load_policy(maze)
    forged.metadata["env_id"] = "this:Zen"
    forged.save(root / "forged_task.safetensors")
    os.mkfifo(root / "fifo.safetensors")
    atomic_write_text(root / "big_grid.toml", 'tasks = ["npsco/FourRewardMaze-v0"]\nmethods = ["ppo"]\nrefs = 1e9\n')
    # numbers and sizes past what the machine can hold (issue 36): a manifest number read as infinity, a format
    # version below 1, a config.json past its kind's size limit (sparse), a checkpoint listing more layers than it
    # holds, a grid of too many policies
    forged_pop("inf_pop", lambda m: json.dumps(m).replace('"r0_default": null', '"r0_default": 1e400'))
    forged_pop("version_pop", lambda m: json.dumps({**m, "format_version": -1}))
    forged_pop("big_config_pop", lambda m: json.dumps(m))
    with open(root / "big_config_pop" / "config.json", "wb") as f:
        f.truncate(4 * 2**20 + 1)
    raw = maze.read_bytes()
    header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
    meta = json.loads(header["__metadata__"]["npsco"])
    meta["architecture"]["actor_hidden"] = [2] * 100_000
    (root / "layers.safetensors").write_bytes(
        _with_header(maze, lambda h, d: ({**h, "__metadata__": {"npsco": json.dumps(meta)}}, d))
    )
    scales = ", ".join(str(1 + i / 100) for i in range(20))
    atomic_write_text(
        root / "huge_grid.toml",
        f'tasks = ["npsco/FourRewardMaze-v0"]\nmethods = ["ppo", "ipd"]\nrefs = 1000\nnovel = 1000\n'
        f"[method.ipd]\nr0_scales = [{scales}]\n",
    )
    # symbolic links below run folders to a folder outside (npsco.paths), and manifests whose done reference lies
    # outside the run (DIR/maze, a real policy) though its config.json borrows none
    outside = root / "outside"
    (outside / "tensorboard").mkdir(parents=True)
    (outside / "state.safetensors").write_bytes(b"not a state")
    shutil.copytree(root / "other_train", root / "linked_train")
    os.symlink(outside, root / "linked_train" / "checkpoints")
    shutil.copytree(root / "maze_pop", root / "linked_pop")
    atomic_write_json(root / "linked_pop" / "config.json", {"refs": 1})
    os.symlink(outside / "tensorboard", root / "linked_pop" / "refs" / "ref0" / "tensorboard")
    shutil.copytree(root / "maze_pop", root / "report_pop")
    os.symlink(outside, root / "report_pop" / "report")
    ref0 = json.loads((root / "maze_pop" / "manifest.json").read_text())["members"][0]
    forged_pop("up_pop", lambda m: json.dumps({**m, "members": [{**ref0, "path": "../maze"}]}))
    forged_pop("abs_pop", lambda m: json.dumps({**m, "members": [{**ref0, "path": str(root / "maze")}]}))
    # --config files with an unknown key, a value of the wrong type, a value outside the option's choices
    atomic_write_text(root / "key.toml", 'env = "npsco/FourRewardMaze-v0"\nsed = 3\n')
    atomic_write_text(root / "type.toml", "seed = true\n")
    atomic_write_text(root / "choice.toml", 'method = "ipdd"\n')
    atomic_write_text(root / "mset.toml", 'method = "ipd"\n[mset]\nwsr_weight = 5\n')


# ------------------------------------------------------------------------------------------------------ the cases
@dataclass
class Case:
    name: str
    """What is wrong (the first column of docs/errors.md)."""
    argv: str
    """The command line after `npsco`; DIR is the folder of `make_inputs`."""
    fragment: str
    """A part of the message that names the problem."""
    argparse: bool = False
    """Refused by argparse (usage line + error line, exit 2) rather than by npsco."""
    creates: str | None = None
    """A path (under DIR) that must not exist afterwards: the refusal wrote nothing."""
    unchanged: str | None = None
    """A folder (under DIR) whose files must be left as they were."""

    def args(self, root: Path) -> list[str]:
        return [a.replace("DIR", str(root)) for a in self.argv.split()]


TINY = "--steps 2048 --set eval_episodes=2 --no-progress --out DIR/out"
CASES = [
    Case(
        "unknown environment id",
        "train --env NoSuchEnv-v0 --out DIR/out",
        "unknown environment id 'NoSuchEnv-v0'",
        creates="out",
    ),
    Case("a MuJoCo -v3 environment id", "population --env Hopper-v3 --out DIR/out", "use Hopper-v5", creates="out"),
    Case(
        "reference checkpoints of another task (maze policy, Hopper run)",
        "population --env Hopper-v5 --ref-checkpoints DIR/maze --novel 1 --out DIR/out",
        "trained on npsco/FourRewardMaze-v0, not Hopper-v5",
        creates="out",
    ),
    Case(
        "reference checkpoints of another task (Hopper policy, maze run)",
        "population --ref-checkpoints DIR/hopper --novel 1 --out DIR/out",
        "trained on Hopper-v5, not npsco/FourRewardMaze-v0",
        creates="out",
    ),
    Case(
        "references borrowed from a run on another task",
        "population --env Hopper-v5 --refs-from DIR/maze_pop --novel 1 --out DIR/out",
        "its references were trained on npsco/FourRewardMaze-v0, not Hopper-v5",
        creates="out",
    ),
    Case("threshold 0", "population --r0 0 --out DIR/out", "r0 must be a positive number, got 0.0", creates="out"),
    Case(
        "negative threshold",
        "population --r0 -1 --out DIR/out",
        "r0 must be a positive number, got -1.0",
        creates="out",
    ),
    Case("threshold nan", "population --r0 nan --out DIR/out", "--r0 must be a finite number, got nan", creates="out"),
    Case(
        "steps infinite", "train --steps inf --out DIR/out", "--steps must be a finite number, got inf", creates="out"
    ),
    Case("threshold inf", "population --r0 inf --out DIR/out", "--r0 must be a finite number, got inf", creates="out"),
    Case(
        "threshold not a number",
        "population --r0 abc --out DIR/out",
        "argument --r0: invalid float value: 'abc'",
        argparse=True,
        creates="out",
    ),
    Case(
        "threshold scale nan",
        "population --r0-scale 1 nan --out DIR/out",
        "--r0-scale must be a finite number, got [1.0, nan]",
        creates="out",
    ),
    Case(
        "--refs-from a folder that does not exist",
        "population --refs-from DIR/nothing --out DIR/out",
        "no population manifest there",
        creates="out",
    ),
    Case("`npsco threshold` of a folder that does not exist", "threshold DIR/nothing", "no such checkpoint"),
    Case("`npsco evaluate` of a folder that does not exist", "evaluate DIR/nothing", "no such checkpoint"),
    Case(
        "--refs-from together with --ref-checkpoints",
        "population --refs-from DIR/maze_pop --ref-checkpoints DIR/maze --out DIR/out",
        "--refs-from and --ref-checkpoints are alternatives",
        creates="out",
    ),
    Case(
        "--r0 together with --r0-scale",
        "population --r0 0.5 --r0-scale 2 --out DIR/out",
        "--r0 (an absolute threshold) and --r0-scale (multiples of the default) are alternatives",
        creates="out",
    ),
    Case(
        "`npsco train` into a run directory of another configuration",
        f"train {TINY.replace('DIR/out', 'DIR/other_train')}",
        "holds a run with a different configuration",
        unchanged="other_train",
    ),
    Case(
        "`npsco population` into a run directory of another configuration",
        f"population {TINY.replace('DIR/out', 'DIR/other_pop')}",
        "holds a population with a different configuration",
        unchanged="other_pop",
    ),
    Case(
        "`npsco population` into a folder that is not a run directory",
        f"population {TINY.replace('DIR/out', 'DIR/notes')}",
        "exists and is not a population run directory",
        unchanged="notes",
    ),
    Case(
        "unknown --set key",
        "population --set learning_rat=1e-3 --out DIR/out",
        "unknown setting 'learning_rat'",
        creates="out",
    ),
    Case(
        "a --set key of an earlier npsco",
        "population --set update_backend=numpy --out DIR/out",
        "update_backend is not a setting now",
        creates="out",
    ),
    Case(
        "bad --set value", "population --set num_envs=two --out DIR/out", "bad value for num_envs: 'two'", creates="out"
    ),
    Case("--steps 0 (train)", "train --steps 0 --out DIR/out", "total_timesteps must be > 0", creates="out"),
    Case("--steps 0 (population)", "population --steps 0 --out DIR/out", "total_timesteps must be > 0", creates="out"),
    Case(
        "--refs 1 with the default threshold",
        "population --refs 1 --out DIR/out",
        "the default threshold needs at least 2 references",
        creates="out",
    ),
    Case(
        "a pickle renamed .safetensors (evaluate)",
        "evaluate DIR/pickle/policy.safetensors",
        "not a valid safetensors checkpoint",
        creates="pwned",
    ),
    Case(
        "a pickle renamed .safetensors (reference checkpoint)",
        "population --ref-checkpoints DIR/pickle --novel 1 --out DIR/out",
        "not a valid safetensors checkpoint",
        creates="pwned",
    ),
    Case("a checkpoint with an extra tensor", "evaluate DIR/extra_tensor.safetensors", "unexpected ['actor.extra']"),
    Case(
        "a checkpoint header with an extra non-tensor entry",
        "evaluate DIR/extra_entry.safetensors",
        "not a valid safetensors checkpoint",
    ),
    Case(
        "a manifest whose member lies outside the run",
        "evaluate DIR/outside_pop",
        "its path '../victim' is not where this run keeps it (novel/ipd/k0)",
    ),
    Case(
        "`npsco train` resuming a run whose checkpoints/ is a symbolic link",
        "train --steps 2048 --set eval_episodes=2 --no-progress --out DIR/linked_train",
        "linked_train/checkpoints: a symbolic link inside",
        unchanged="outside",
    ),
    Case(
        "`npsco population` resuming a run whose member's tensorboard/ is a symbolic link",
        "population --steps 2048 --set eval_episodes=2 --no-progress --out DIR/linked_pop",
        "linked_pop/refs/ref0/tensorboard: a symbolic link inside",
        unchanged="outside",
    ),
    Case(
        "`npsco report --out` a folder of the run that is a symbolic link",
        "report DIR/report_pop --out DIR/report_pop/report",
        "report_pop/report: a symbolic link inside",
        unchanged="outside",
    ),
    Case(
        "`npsco threshold --out` a file below a folder of the run that is a symbolic link",
        "threshold DIR/report_pop --out DIR/report_pop/report/threshold.json",
        "report_pop/report is a symbolic link inside",
        unchanged="outside",
    ),
    Case(
        "a done reference whose path leaves the run (evaluate)",
        "evaluate DIR/up_pop",
        "its path '../maze' is not where this run's config.json says it borrows",
        creates="up_pop/evaluation",
    ),
    Case(
        "a done reference whose path leaves the run (report)",
        "report DIR/up_pop --out DIR/out",
        "its path '../maze' is not where this run's config.json says it borrows",
        creates="out",
    ),
    Case(
        "a done reference at an absolute path (threshold)",
        "threshold DIR/abs_pop",
        "is not where this run's config.json says it borrows",
    ),
    Case(
        "a done reference at an absolute path (--refs-from)",
        "population --refs-from DIR/abs_pop --novel 1 --out DIR/out",
        "is not where this run's config.json says it borrows",
        creates="out",
    ),
    Case("a manifest field of the wrong type", "evaluate DIR/typed_pop", "members[0].path must be a string, got null"),
    Case("a manifest nested too deeply", "evaluate DIR/deep_pop", "nested deeper than 64 levels"),
    Case(
        "a checkpoint whose task id names a Python module",
        "evaluate DIR/forged_task.safetensors",
        "this:Zen: this task id comes from a checkpoint",
    ),
    Case("a FIFO where a checkpoint should be", "evaluate DIR/fifo.safetensors", "a FIFO, not a regular file"),
    Case("a grid value past npsco's limit", "sweep DIR/big_grid.toml --dry-run", "past npsco's limit of 1,000"),
    Case(
        "a network past npsco's memory limit",
        "train --set actor_hidden=65536,65536 --out DIR/out",
        "makes a network of 4,295,229,441 parameters",
        creates="out",
    ),
    Case(
        "a population of more policies than npsco's limit",
        "population --refs 1000 --novel 1000 --r0-scale 1 2 3 4 5 6 7 8 9 10 --out DIR/out",
        "the population trains 11,000 policies, past npsco's limit of 10,000",
        creates="out",
    ),
    Case(
        "a grid of more policies than npsco's limit",
        "sweep DIR/huge_grid.toml --dry-run",
        "policies, past npsco's limit of 10,000",
    ),
    Case(
        "a manifest number too large for a float",
        "evaluate DIR/inf_pop",
        "the number 1e400 is too large (it would be read as infinity)",
    ),
    Case(
        "a manifest number out of its range", "evaluate DIR/version_pop", "format_version must be a whole number >= 1"
    ),
    Case(
        "a config.json past its size limit",
        "evaluate DIR/big_config_pop",
        "4,194,305 bytes, past npsco's limit of 4,194,304 for this file",
    ),
    Case(
        "a checkpoint listing more layers than it holds",
        "evaluate DIR/layers.safetensors",
        "100,000 hidden layers, but the file holds",
    ),
    Case(
        "--refs past npsco's limit",
        "population --refs 100000 --out DIR/out",
        "--refs = 100,000 is past npsco's limit of 1,000",
        creates="out",
    ),
    Case(
        "`npsco evaluate --episodes 0`",
        "evaluate DIR/maze --episodes 0",
        "--episodes must be >= 1, got 0",
        creates="maze/policy.eval.json",
    ),
    Case(
        "`npsco evaluate --episodes -3`",
        "evaluate DIR/maze --episodes -3",
        "--episodes must be >= 1, got -3",
        creates="maze/policy.eval.json",
    ),
    Case(
        "`npsco report --episodes 0`",
        "report DIR/maze_pop --episodes 0 --out DIR/out",
        "--episodes must be >= 1, got 0",
        creates="out",
        unchanged="maze_pop",
    ),
    Case(
        "`npsco train --out` a file",
        "train --steps 2048 --no-progress --out DIR/notes/notes.txt",
        "notes.txt is a file, not a folder; choose another --out",
        unchanged="notes",
    ),
    Case(
        "`npsco train --out` inside a file",
        "train --steps 2048 --no-progress --out DIR/notes/notes.txt/run",
        "notes.txt/run: ",
        unchanged="notes",
    ),
    Case(
        "`npsco population --out` a file",
        "population --steps 2048 --no-progress --out DIR/notes/notes.txt",
        "notes.txt is a file, not a folder; choose another --out",
        unchanged="notes",
    ),
    Case(
        "`npsco report --out` a file",
        "report DIR/maze_pop --out DIR/notes/notes.txt",
        "notes.txt is a file, not a folder; choose another --out",
        unchanged="maze_pop",  # nothing evaluated either
    ),
    Case(
        "`npsco report --out` a folder of other files",
        "report DIR/maze_pop --out DIR/notes",
        "notes holds other files (notes.txt) and no report.md; choose a new or empty folder for --out",
        unchanged="notes",
    ),
    Case(
        "`npsco import --out` a population run",
        "import DIR/notes/notes.txt --env npsco/FourRewardMaze-v0 --out DIR/maze_pop",
        "holds an npsco run (manifest.json, refs); import into another --out",
        unchanged="maze_pop",
    ),
    Case(
        "`npsco evaluate RUN --out` a file",
        "evaluate DIR/maze_pop --out DIR/notes/notes.txt",
        "notes.txt is a file, not a folder; choose another --out",
        unchanged="maze_pop",
    ),
    Case(
        "`npsco import` of a text file",
        "import DIR/notes/notes.txt --env npsco/FourRewardMaze-v0 --out DIR/out",
        "not a PyTorch or Stable-Baselines3 checkpoint (a text file)",
        creates="out",
    ),
    Case(
        "`npsco import` of an npsco checkpoint",
        "import DIR/maze/policy.safetensors --env npsco/FourRewardMaze-v0 --out DIR/out",
        "an npsco checkpoint is used as it is, without import",
        creates="out",
    ),
    Case(
        "--refs together with --refs-from",
        "population --refs 5 --refs-from DIR/maze_pop --out DIR/out",
        "--refs 5 does not apply with --refs-from",
        creates="out",
    ),
    Case(
        "--refs together with --ref-checkpoints",
        "population --refs 2 --ref-checkpoints DIR/maze --r0 0.5 --out DIR/out",
        "--refs 2 does not apply with --ref-checkpoints",
        creates="out",
    ),
    Case(
        "--mset of another method",
        "population --method ipd --mset wsr_weight=5 --out DIR/out",
        "--mset wsr_weight: not a setting of method ipd (its settings: r0,",
        creates="out",
    ),
    Case(
        "--wandb-project without --track",
        "train --wandb-project demo --out DIR/out",
        "--wandb-project applies with --track",
        creates="out",
    ),
    Case(
        "--config with an unknown key",
        "train --config DIR/key.toml --out DIR/out",
        "key.toml: unknown key 'sed'; npsco train reads env, preset, seed,",
        creates="out",
    ),
    Case(
        "--config with a value of the wrong type",
        "train --config DIR/type.toml --out DIR/out",
        "type.toml: seed must be a whole number, got true",
        creates="out",
    ),
    Case(
        "--config with a value outside the choices",
        "population --config DIR/choice.toml --out DIR/out",
        "choice.toml: method must be one of ppo,",
        creates="out",
    ),
    Case(
        "--config with a setting of another method",
        "population --config DIR/mset.toml --out DIR/out",
        "mset.toml: mset wsr_weight: not a setting of method ipd",
        creates="out",
    ),
    Case(
        "--config that does not exist",
        "population --config DIR/nothing.toml --out DIR/out",
        "nothing.toml: file not found",
        creates="out",
    ),
]


def run_case(case: Case, root: Path) -> tuple[int, str, str]:
    """Run the case in-process through `npsco.cli.main`; returns (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(case.args(root))
        except SystemExit as e:  # argparse
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def shown(stderr: str, root: Path) -> str:
    """The message line the user sees, with the inputs' folder written DIR."""
    return stderr.strip().splitlines()[-1].replace(str(root), "DIR")


def md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def table_rows(root: Path) -> list[str]:
    rows = ["| Bad input | Command | Exit | What the user sees (stderr) |", "|---|---|---|---|"]
    for case in CASES:
        rc, _, err = run_case(case, root)
        rows.append(
            f"| {md_escape(case.name)} | `npsco {md_escape(case.argv)}` | {rc} | `{md_escape(shown(err, root))}` |"
        )
    return rows


def documented_messages() -> dict[str, tuple[int, str]]:
    """{bad input: (exit code, message)} from the table in docs/errors.md."""
    table = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 4 and cells[2].isdigit():
            table[cells[0]] = (int(cells[2]), cells[3].strip("`"))
    return table


# ------------------------------------------------------------------------------------------------ bad input tests
@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inputs")
    make_inputs(root)
    return root


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_a_one_line_error_as_documented(case, inputs, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("a command with bad input started training")

    monkeypatch.setattr(Trainer, "train", no_training)  # (a regression fails here at once, not after a long run)
    before = snapshot(inputs / case.unchanged) if case.unchanged else None
    rc, out, err = run_case(case, inputs)
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in out + err
    command = case.argv.split()[0]
    lines = err.strip().splitlines()
    if case.argparse:
        assert len(lines) >= 2 and lines[0].startswith(f"usage: npsco {command}"), err
    else:
        assert err.count("\n") == 1, err  # one line, nothing else on stderr
    assert lines[-1].startswith(f"npsco {command}: error: ") and case.fragment in lines[-1], err
    if case.creates:
        assert not (inputs / case.creates).exists(), f"{case.creates} was created"
    if before is not None:
        assert snapshot(inputs / case.unchanged) == before
    # docs/errors.md shows exactly this message
    documented = documented_messages()
    assert case.name in documented, f"docs/errors.md has no row for {case.name!r}: regenerate it (see the docstring)"
    assert documented[case.name] == (rc, shown(err, inputs))


def test_every_documented_bad_input_is_tested():
    assert set(documented_messages()) == {c.name for c in CASES}


def test_debug_shows_the_traceback_instead(inputs, capsys):
    with pytest.raises(NpscoError, match="unknown environment id 'NoSuchEnv-v0'"):
        main(["--debug", "train", "--env", "NoSuchEnv-v0", "--out", str(inputs / "out")])
    assert capsys.readouterr().err == ""  # not the one-line message: the exception (and its traceback) propagates


def test_the_pickle_payload_of_the_cases_is_live(inputs):
    """Control for the pickle cases above (which check that DIR/pwned is never created): unpickling does create it."""
    pickle.loads((inputs / "pickle" / "policy.safetensors").read_bytes())  # control: the payload does work
    assert (inputs / "pwned").exists()
    (inputs / "pwned").unlink()


def test_train_into_an_interrupted_run_with_the_same_configuration_trains_it(tmp_path, capsys):
    args = [
        "train",
        "--steps",
        "1024",
        "--set",
        "eval_episodes=2",
        "--no-progress",
        "--no-tensorboard",
        "--out",
        str(tmp_path / "run"),
    ]
    assert main(args) == 0
    (tmp_path / "run" / "policy.safetensors").unlink()  # as if the first run had been killed before the end
    config = (tmp_path / "run" / "config.json").read_text()
    capsys.readouterr()
    assert main(args) == 0
    assert "training PPO" in capsys.readouterr().out
    assert load_policy(tmp_path / "run").metadata["training"]["global_step"] == 1024
    assert (tmp_path / "run" / "config.json").read_text() == config


# ------------------------------------------------------------------------------------------------- crash safety
# Every file in src/npsco that a later step reads is written through npsco.io (temp file, fsync, rename). The scan
# below finds every call that can write a file; these are the only ones allowed outside npsco.io, and why.
WRITERS_ALLOWED = {
    "io.py:atomic_write_bytes: os.fdopen(fd, 'wb')": "the atomic writer itself (a mkstemp file, then os.replace)",
    "io.py:fresh_dir: os.rename(path / name, trash / name)": (
        "moves a run folder's entries into its trash (the policy first, config.json last), then deletes the trash"
    ),
    "locks.py:FolderLock.acquire: os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 420)": (
        "the lock file: holds no state, only the holder's pid and command for the message of a second command"
    ),
    "logger.py:MetricsLogger.__init__: open(path, mode, encoding='utf-8')": (
        "metrics.jsonl is append-only, one flushed line per iteration; read_metrics skips a torn last line; a "
        "resumed run first rewrites it atomically with the rows its saved state had seen"
    ),
    "report/figures.py:save_figure: open(temp, 'xb')": "renders into a fresh temp file, then os.replace",
    "report/figures.py:save_figure: fig.savefig(handle, format=fmt, dpi=dpi)": "(into that temp file)",
}
_MODULE_WRITERS = {
    ("json", "dump"),
    ("pickle", "dump"),
    ("np", "save"),
    ("np", "savez"),
    ("numpy", "save"),
    ("torch", "save"),
    ("shutil", "copy"),
    ("shutil", "copyfile"),
    ("shutil", "copy2"),
    ("shutil", "copytree"),
    ("shutil", "move"),
    ("os", "rename"),
    ("os", "fdopen"),
}
_METHOD_WRITERS = {"write_text", "write_bytes", "savefig", "to_csv", "save_file"}


def _mode(call: ast.Call) -> str:
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return "r" if mode is None else mode.value if isinstance(mode, ast.Constant) else "?"


def _write_calls(calls) -> list[str]:
    """'function: call' for every call of `module_calls` that may write a file."""
    return [
        f"{c.scope}: {c.text}"
        for c in calls
        if (c.name == "open" and c.owner is None and set(_mode(c.call)) & set("wax+?"))
        or (c.name == "open" and c.owner == "os" and "O_RDONLY" not in c.text)
        or (c.owner, c.name) in _MODULE_WRITERS
        or c.name in _METHOD_WRITERS
    ]


def test_every_file_write_in_the_package_goes_through_npsco_io_or_is_allowed(module_calls):
    found = [
        f"{path.relative_to(SRC)}:{call}"
        for path in sorted(SRC.rglob("*.py"))
        for call in _write_calls(module_calls(ast.parse(path.read_text(encoding="utf-8"))))
    ]
    assert set(WRITERS_ALLOWED) <= set(found), "the scan no longer sees the allowed writers: it is broken"
    assert [c for c in found if c not in WRITERS_ALLOWED] == [], "write these files with npsco.io"


def test_the_write_scan_sees_plain_writes(module_calls):
    code = """
def f(run, fig, rows):
    (run / "config.json").write_text("{}")
    with open(run / "m.json", "w") as fh:
        json.dump(rows, fh)
    fig.savefig(run / "a.png")
    open(run / "x").read()
"""
    assert _write_calls(module_calls(ast.parse(code))) == [
        "f: (run / 'config.json').write_text('{}')",
        "f: open(run / 'm.json', 'w')",
        "f: json.dump(rows, fh)",
        "f: fig.savefig(run / 'a.png')",
    ]


def test_an_interrupted_atomic_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"
    atomic_write_json(target, {"members": [1, 2]})

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_json(target, {"members": [1, 2, 3]})
    assert json.loads(target.read_text()) == {"members": [1, 2]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_metrics_are_read_back_without_a_torn_last_line(tmp_path):
    logger = MetricsLogger(tmp_path, tensorboard=False)
    for step in (1024, 2048):
        logger.log(step, {"charts/episodic_return": step / 1000, "losses/value_loss": float("nan")})
    # a crash in the middle of the third row: the line is cut short (no newline)
    with open(tmp_path / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"global_step": 3072, "charts/episodic_return": 3.0})[:17])
    logger.close()
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert rows == [
        {"global_step": 1024, "charts/episodic_return": 1.024, "losses/value_loss": None},
        {"global_step": 2048, "charts/episodic_return": 2.048, "losses/value_loss": None},
    ]


@pytest.mark.parametrize("damage", ["not json", "[1, 2]", ""])
def test_a_malformed_line_before_the_last_is_an_error_naming_the_file_and_line(tmp_path, damage):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"global_step": 1024}\n' + damage + '\n{"global_step": 2048}\n')
    with pytest.raises(NpscoError, match=r"metrics.jsonl, line 2: not a JSON object"):
        read_metrics(path)


# ------------------------------------------------------------------------------------------------------- Ctrl-C
def interruptible() -> None:
    """In the child before it starts: SIGINT back to its default action, as for a command in a terminal's foreground.
    A shell starts a background job (`cmd &`, without job control) with SIGINT ignored, its children inherit that and
    Python then installs no KeyboardInterrupt handler: the child ignored the test's SIGINT and trained on. That was the
    hang once seen under `pytest -n 2` (tests/integration/test_reliability.py run from a background job)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_once(command: list[str], metrics: Path) -> tuple[int, str, str]:
    """Run `npsco COMMAND` in a child, send it SIGINT once `metrics` has a row; (exit code, stdout, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "npsco.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=CHILD_ENV,
        preexec_fn=interruptible,
    )
    try:
        deadline = time.monotonic() + 180
        while not read_metrics_if_any(metrics):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no metrics row within 180 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, stdout, stderr


def test_ctrl_c_saves_the_policy_in_training_and_exits_130_without_a_traceback(tmp_path):
    out = tmp_path / "run"
    command = ["train", "--steps", "100000000", "--set", "eval_every=1", "--set", "eval_episodes=2", "--no-progress"]
    code, stdout, stderr = interrupt_once([*command, "--no-tensorboard", "--out", str(out)], out / "metrics.jsonl")
    assert code == 130, (stdout, stderr)
    saved = out / "checkpoints" / "interrupted.safetensors"
    assert f"interrupted: the policy in training is saved at {saved}" in stdout
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    policy = load_policy(saved)
    steps = policy.metadata["training"]["global_step"]
    assert steps >= 1024 and steps % 1024 == 0
    assert all(np.all(np.isfinite(w)) and np.all(np.isfinite(b)) for w, b in policy.weights)
    assert not (out / "policy.safetensors").exists()  # the run did not finish
    rows = read_metrics(out / "metrics.jsonl")
    assert rows and rows[-1]["global_step"] >= steps


def test_ctrl_c_of_a_population_says_the_command_that_resumes_it(tmp_path):
    out = tmp_path / "pop"
    command = ["population", "--refs", "2", "--novel", "1", "--steps", "100000000", "--no-progress", "--out", str(out)]
    code, stdout, stderr = interrupt_once(command, out / "refs" / "ref0" / "metrics.jsonl")
    assert code == 130, (stdout, stderr)
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert f"npsco population: interrupted; run the same command again to resume: npsco {shlex.join(command)}" in stderr


def read_metrics_if_any(path: Path) -> list:
    return read_metrics(path) if path.exists() else []


# ----------------------------------------------------------------------------------------------- numerical guards
class NaNRewardAfter(Method):
    """Plain PPO whose training reward turns NaN after `after` vectorised steps."""

    name = "nan-reward"

    def __init__(self, after: int):
        self.after, self.calls = after, 0

    def on_step(self, step):
        self.calls += 1
        if self.calls > self.after:
            return StepOutcome(train_reward=np.full(step.reward.shape, np.nan))
        return None


def tiny_maze(iterations: int):
    cfg = preset(MAZE_ID)  # 16 envs x 64 steps = 1024 transitions per iteration
    return replace(cfg, total_timesteps=iterations * cfg.batch_size, eval_every=0)


def assert_finite_checkpoint(path: Path, iteration: int) -> None:
    policy = load_policy(path)  # (the loader refuses NaN or inf tensors)
    assert policy.metadata["training"] == {"global_step": iteration * 1024, "iteration": iteration}
    for w, b in policy.weights:
        assert np.all(np.isfinite(w)) and np.all(np.isfinite(b))


def test_a_nan_reward_stops_training_and_keeps_the_last_good_policy(tmp_path):
    cfg = tiny_maze(4)
    trainer = Trainer(cfg, NaNRewardAfter(after=2 * cfg.num_steps), run_dir=tmp_path, tensorboard=False)
    with pytest.raises(NpscoError, match=r"training diverged at iteration 3 \(non-finite losses/"):
        trainer.train(progress=False)
    assert [r["global_step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1024, 2048]
    assert_finite_checkpoint(tmp_path / "checkpoints" / "last_good.safetensors", iteration=2)
    assert not (tmp_path / "policy.safetensors").exists()


def test_a_nan_parameter_stops_npsco_train_with_a_one_line_error(tmp_path, capsys, monkeypatch):
    update, updates = Learner.ppo_update, []

    def corrupting(self, batch, *args, **kwargs):
        metrics = update(self, batch, *args, **kwargs)
        updates.append(1)
        if len(updates) == 2:  # the second iteration's update
            with torch_no_grad():
                self.agent.actor_mean[0].weight[0, 0] = math.nan
        return metrics

    monkeypatch.setattr(Learner, "ppo_update", corrupting)
    out = tmp_path / "run"
    rc = main(
        ["train", "--steps", "3072", "--set", "eval_every=0", "--no-progress", "--no-tensorboard", "--out", str(out)]
    )
    err = capsys.readouterr().err
    assert rc == 2
    last_good = out / "checkpoints" / "last_good.safetensors"
    assert err == (
        f"npsco train: error: training diverged at iteration 2 (non-finite parameters); the last good "
        f"policy is saved at {last_good}\n"
    )
    assert_finite_checkpoint(last_good, iteration=1)
    assert not (out / "policy.safetensors").exists()


def torch_no_grad():
    import torch

    return torch.no_grad()


# -------------------------------------------------------------------------------------- the table of docs/errors.md
if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        make_inputs(Path(tmp))
        print("\n".join(table_rows(Path(tmp))))
