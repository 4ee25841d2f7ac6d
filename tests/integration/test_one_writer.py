"""One writer per run folder (issue 28, item 3): `train`, `population`, `sweep`, `experiment` and `import` hold the
folder's lock while they write it; a second command fails at once in one line naming the process that holds it; the
lock of a killed process never blocks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npsco.cli import main
from npsco.errors import NpscoError
from npsco.ppo.trainer import Trainer

GRID = """
name = "locked"
tasks = ["npsco/FourRewardMaze-v0"]
methods = ["ppo"]
refs = 1
novel = 0
steps = 1024
"""


def holder(path: Path) -> tuple[int, str]:
    pid, _, command = path.read_text().strip().partition(" ")
    return int(pid), command


def wait_for(condition, seconds: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc is None or proc.poll() is None, "the first command ended"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def command_lines(tmp_path: Path, sb3: Path) -> dict[str, list[str]]:
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    out = str(tmp_path / "out")
    tiny = ["--steps", "1024", "--set", "num_steps=32", "--set", "eval_episodes=2"]
    return {
        "train": ["train", *tiny, "--no-progress", "--out", out],
        "population": ["population", "--method", "ppo", "--refs", "1", "--novel", "0", *tiny, "--out", out],
        "sweep": ["sweep", str(grid), "--workers", "1", "--out", out],
        "experiment": ["experiment", "--refs", "2", "--novel", "1", "--methods", "ipd", *tiny, "--out", out],
        "import": ["import", str(sb3), "--env", "Pendulum-v1", "--out", out],
    }


@pytest.mark.parametrize("command", ["train", "population", "sweep", "experiment", "import"])
def test_a_command_on_a_folder_another_process_writes_fails_at_once_naming_it(command, tmp_path, sb3_zip, capsys):
    from npsco.locks import FolderLock

    argv = command_lines(tmp_path, sb3_zip)[command]
    with FolderLock(tmp_path / "out", command="npsco train --out elsewhere"):  # held by this process: another open
        start = time.monotonic()
        assert main(argv) == 2
        err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"is being written by another npsco process (pid {os.getpid()}: npsco train --out elsewhere)" in err, err
    assert time.monotonic() - start < 60
    assert not (tmp_path / "out" / "config.json").exists() and not (tmp_path / "out" / "policy.safetensors").exists()


def test_two_population_commands_on_one_folder_one_fails_at_once_and_a_killed_holder_blocks_nothing(
    tmp_path, capsys, monkeypatch, children
):
    out = tmp_path / "pop"
    argv = ["population", "--method", "ppo", "--refs", "1", "--novel", "0", "--steps", "2000000", "--no-progress"]
    argv += ["--out", str(out)]
    first = children.start(["-m", "npsco.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wait_for(lambda: (out / "refs" / "ref0" / "metrics.jsonl").exists(), 240, first)  # it holds the lock
    assert holder(out / ".npsco.lock") == (first.pid, "npsco " + " ".join(argv))
    manifest = (out / "manifest.json").read_bytes()
    second = subprocess.run(
        [sys.executable, "-m", "npsco.cli", *argv], capture_output=True, text=True, env=children.env, timeout=240
    )
    assert second.returncode == 2, second.stderr
    assert second.stderr.count("\n") == 1 and f"(pid {first.pid}: npsco population" in second.stderr
    assert (out / "manifest.json").read_bytes() == manifest  # the second wrote nothing
    assert first.poll() is None  # and the first goes on
    first.send_signal(signal.SIGKILL)
    first.wait()
    # the killed process's lock is gone with it: the same command resumes (here, up to where it would train)
    started = []
    monkeypatch.setattr(Trainer, "train", lambda self, **kwargs: started.append(self.run_dir) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(argv)
    assert started == [out / "refs" / "ref0"]


def test_the_lock_is_released_by_the_end_of_its_process_however_it_ends(tmp_path, children):
    from npsco.locks import FolderLock

    folder = tmp_path / "run"
    code = (
        "import os, sys, time; from npsco.locks import FolderLock; "
        f"lock = FolderLock({str(folder)!r}, command='child').acquire(); print('held', flush=True); time.sleep(600)"
    )
    child = children.start(["-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    with pytest.raises(NpscoError, match=rf"pid {child.pid}: child\)"):
        FolderLock(folder).acquire()
    child.send_signal(signal.SIGKILL)
    child.wait()
    lock = FolderLock(folder, command="me").acquire()
    assert holder(folder / ".npsco.lock") == (os.getpid(), "me")
    lock.release()
    with FolderLock(folder):  # released: taken again at once
        pass


def test_a_refused_command_leaves_no_lock_file_in_a_folder_that_is_not_its_own(tmp_path, capsys):
    """The configuration and the folder are checked before the lock is taken: a refusal writes nothing."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    assert main(["population", "--out", str(notes)]) == 2
    assert "is not a population run directory" in capsys.readouterr().err
    assert sorted(p.name for p in notes.iterdir()) == ["notes.txt"]
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.json").write_text(json.dumps({"grid": {"name": "other"}}))
    (tmp_path / "grid.toml").write_text(GRID)
    assert main(["sweep", str(tmp_path / "grid.toml"), "--out", str(tmp_path / "sweep")]) == 2
    assert "holds a sweep of another grid" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir()) == ["sweep.json"]
