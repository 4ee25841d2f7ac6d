"""A sweep dies whole (issue 28, item 4): SIGKILL of `npsco sweep` leaves no worker, forkserver or resource tracker
alive; SIGTERM records `interrupted` and stops the workers; a worker that raises anything ends the sweep in one line
with exit code 2, at once; no temp file of a killed write survives a resume."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import pytest

import npsco.population
from npsco.cli import main
from npsco.errors import NpscoError
from npsco.parallel import InlineExecutor, Job, LocalExecutor, Scheduler
from npsco.sweep import Sweep, parse_grid

LONG_GRID = """
name = "long"
tasks = ["npsco/FourRewardMaze-v0"]
methods = ["ppo"]
refs = 2
novel = 0
steps = 20000000
"""
SHORT = {"tasks": ["npsco/FourRewardMaze-v0"], "methods": ["ppo"], "refs": 2, "novel": 0, "steps": 1024}


@pytest.fixture
def running_sweep(tmp_path, children, process_tree) -> Iterator[SimpleNamespace]:
    """`npsco sweep` of two long references on two workers, once both train (their metrics files exist): `proc`,
    `out`, and `family`, its processes (workers, forkserver, resource tracker). None of them outlives the test."""
    grid, out = tmp_path / "long.toml", tmp_path / "sweep"
    grid.write_text(LONG_GRID)
    argv = ["-m", "npsco.cli", "sweep", str(grid), "--workers", "2", "--out", str(out)]
    proc = children.start(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    refs = out / "FourRewardMaze-v0" / "ppo" / "refs"
    deadline = time.monotonic() + 300
    while not all((refs / f"ref{i}" / "metrics.jsonl").exists() for i in range(2)):
        assert proc.poll() is None, "the sweep ended"
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.1)
    family = process_tree.descendants(proc.pid)
    yield SimpleNamespace(proc=proc, out=out, family=family)
    for pid in process_tree.alive(family):  # what the sweep left, if the test failed
        os.kill(pid, signal.SIGKILL)


def test_sigkill_of_the_sweep_leaves_no_process_of_it_alive(running_sweep, process_tree):
    proc, family = running_sweep.proc, running_sweep.family
    assert len(family) >= 4, family
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    survivors = process_tree.wait_gone(family, 30)
    assert survivors == set(), {p: Path(f"/proc/{p}/cmdline").read_bytes()[:120] for p in survivors}
    assert proc.stdout.read() is not None  # the pipe ends: no survivor holds it open (`| tee` ends too)


def test_sigterm_records_interrupted_and_stops_the_workers(running_sweep, process_tree):
    proc = running_sweep.proc
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 130, output
    assert "npsco sweep: interrupted; run the same command again to resume: npsco sweep" in output, output
    assert "Traceback" not in output, output
    assert json.loads((running_sweep.out / "sweep.json").read_text())["status"] == "interrupted"
    assert process_tree.wait_gone(running_sweep.family, 30) == set()


def fail_with_oserror(*args):
    raise OSError(errno.EIO, "Input/output error", "somewhere/metrics.jsonl")


def fail_with_full_disk(*args):
    raise OSError(errno.ENOSPC, "No space left on device", "refs/ref0/policy.safetensors")


@pytest.mark.parametrize(
    "job, message",
    [
        (fail_with_oserror, ": OSError: [Errno 5] Input/output error: 'somewhere/metrics.jsonl'"),
        (fail_with_full_disk, ": the disk is full while writing refs/ref0/policy.safetensors: every file npsco"),
    ],
)
def test_a_worker_that_raises_ends_the_sweep_in_one_line(job, message, tmp_path, monkeypatch, capsys):
    grid = tmp_path / "short.toml"
    grid.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in SHORT.items()))
    monkeypatch.setattr(npsco.population, "train_member_job", job)  # what the workers run (pickled by name)
    start = time.monotonic()
    assert main(["sweep", str(grid), "--workers", "2", "--out", str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and message in err, err
    assert err.startswith(("npsco sweep: error: ref0: ", "npsco sweep: error: ref1: ")), err
    assert time.monotonic() - start < 120
    assert json.loads((tmp_path / "sweep" / "sweep.json").read_text())["status"] == "failed"


def test_debug_shows_the_workers_traceback(tmp_path, monkeypatch):
    """`npsco --debug sweep`: the error is raised, not cut to a line, and its chain holds the worker's own traceback
    (the function that raised in the worker process)."""
    grid = tmp_path / "short.toml"
    grid.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in SHORT.items()))
    monkeypatch.setattr(npsco.population, "train_member_job", fail_with_oserror)
    with pytest.raises(Exception) as info:
        main(["--debug", "sweep", str(grid), "--workers", "2", "--out", str(tmp_path / "sweep")])
    chain, error = [], info.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    shown = "\n".join("".join(traceback.format_exception(e)) for e in chain)
    assert "fail_with_oserror" in shown and "Input/output error" in shown, shown


def test_the_scheduler_turns_any_job_error_into_one_line_naming_the_job(tmp_path):
    class Source:
        def __init__(self, fn):
            self.fn, self.done = fn, False

        def ready(self, busy):
            return [] if self.done or "j" in busy else [Job("j", self.fn, (), label="ref3")]

        def started(self, job):
            pass

        def finished(self, job, result):
            self.done = True

    with LocalExecutor(1) as executor, pytest.raises(NpscoError, match=r"^ref3: OSError: \[Errno 5\]"):
        Scheduler(executor).run(Source(fail_with_oserror))

    class CrashingRay(InlineExecutor):  # what Ray's future says once its retries are used up
        def submit(self, fn, *args):
            from ray.exceptions import WorkerCrashedError

            future: Future = Future()
            future.set_exception(WorkerCrashedError())
            return future

    pytest.importorskip("ray")
    with pytest.raises(NpscoError, match=r"^ref3: its worker process died \(WorkerCrashedError, after Ray's"):
        Scheduler(CrashingRay()).run(Source(fail_with_oserror))


def test_no_temp_file_of_a_killed_write_survives_a_resume(tmp_path):
    out = tmp_path / "sweep"
    Sweep(parse_grid(SHORT, "short"), out, log=lambda _: None).open()  # plans and writes, trains nothing
    stale = [out / ".sweep.json.k2j_8x0q.tmp", out / "FourRewardMaze-v0" / "ppo" / ".manifest.json.ab_c1234.tmp"]
    for path in stale:
        path.write_text("{")
    sweep = Sweep(parse_grid(SHORT, "short"), out, log=lambda _: None)
    sweep.open()
    sweep.close()
    assert [p for p in stale if p.exists()] == []
    assert json.loads((out / "sweep.json").read_text())["name"] == "short"
