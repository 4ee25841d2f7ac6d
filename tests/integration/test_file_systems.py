"""File-system errors (docs/reliability.md, "A full disk, a file too large, a read-only folder"): one line naming the
file and the cause, in the command and in its worker processes and threads, and nothing half-written passed off as
complete."""

from __future__ import annotations

import builtins
import errno
import io
import os
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

import npsco.io  # noqa: E402
from npsco.cli import main  # noqa: E402
from npsco.io import atomic_write_text  # noqa: E402
from npsco.logger import MetricsLogger  # noqa: E402

CHILD_ENV = {**os.environ, "MUJOCO_GL": "egl", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
CAUSES = ("the file system is read-only", "permission denied")
"""What a read-only folder is called: EROFS (a read-only mount), or EACCES where a folder's mode forbids writing."""
TINY = ["--steps", "1024", "--set", "num_steps=32", "--set", "eval_episodes=2", "--no-progress"]


def _writes(flags: int) -> bool:
    return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND))


def read_only(folder: Path, monkeypatch) -> None:
    """Make `folder` read-only: its mode where that stops this process (not root), else every way npsco creates,
    opens for writing or renames into it raises EROFS, as a read-only mount does."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        for sub in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
            sub.chmod(0o555)
        with pytest.raises(OSError):  # control: the folder does refuse a write
            atomic_write_text(folder / "control.txt", "x")
        return
    root = str(folder)

    def under(path) -> bool:
        return isinstance(path, (str, os.PathLike)) and os.path.abspath(os.fspath(path)).startswith(root)

    def refuse(path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))

    real_open, real_os_open, real_mkdir, real_replace = builtins.open, os.open, os.mkdir, os.replace

    def fake_open(file, mode="r", *args, **kwargs):
        if under(file) and any(c in mode for c in "wax+"):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def fake_os_open(path, flags, *args, **kwargs):
        if under(path) and _writes(flags):
            refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    def fake_mkdir(path, *args, **kwargs):
        if under(path):
            refuse(path)
        return real_mkdir(path, *args, **kwargs)

    def fake_replace(src, dst, *args, **kwargs):
        if under(dst):
            refuse(dst)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)
    monkeypatch.setattr(os, "replace", fake_replace)
    with pytest.raises(OSError):  # control: the folder does refuse a write
        atomic_write_text(folder / "control.txt", "x")


def one_line(capsys, argv: list[str]) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, (rc, err)
    return err


@pytest.fixture
def evaluated(planned_run, tmp_path) -> Path:
    """A population run with two trained references (nothing trains)."""
    run = tmp_path / "ro" / "run"
    planned_run(run)
    return run


@pytest.mark.parametrize("command", ["train", "population", "evaluate RUN", "evaluate CHECKPOINT", "report"])
def test_a_read_only_folder_is_one_line_naming_the_file(command, evaluated, tmp_path, monkeypatch, capsys):
    ro = tmp_path / "ro"
    argv = {
        "train": ["train", *TINY, "--out", str(ro / "new")],
        "population": ["population", "--refs", "2", "--novel", "1", *TINY, "--out", str(ro / "new")],
        "evaluate RUN": ["evaluate", str(evaluated), "--episodes", "2"],
        "evaluate CHECKPOINT": ["evaluate", str(evaluated / "refs" / "ref0"), "--episodes", "2"],
        "report": [
            "report",
            str(evaluated),
            "--episodes",
            "2",
            "--no-videos",
            "--no-filmstrips",
            "--out",
            str(ro / "report"),
        ],
    }[command]
    before = sorted(p for p in ro.rglob("*"))
    read_only(ro, monkeypatch)
    try:
        err = one_line(capsys, argv)
    finally:
        for sub in [ro, *(p for p in ro.rglob("*") if p.is_dir())]:
            sub.chmod(0o755)
    assert any(cause in err for cause in CAUSES) and f"while writing {ro}" in err, err
    assert "write elsewhere (--out)" in err
    assert sorted(p for p in ro.rglob("*")) == before  # nothing written


@pytest.mark.parametrize("command", ["train", "population", "evaluate RUN", "evaluate CHECKPOINT", "report"])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT], ids=["full", "quota"])
def test_a_full_disk_names_the_file_whose_write_failed(command, code, evaluated, tmp_path, monkeypatch, capsys):
    """The write of an open file (and its fsync) names no file: npsco names the one it was writing, in every command
    that writes (a quota reached is a full disk for the user)."""

    def full(fd):
        raise OSError(code, os.strerror(code))  # as write(2) on a full disk: no file name

    out = tmp_path / "out"
    argv, first = {
        "train": (["train", *TINY, "--out", str(out)], out / "config.json"),
        "population": (["population", *TINY, "--out", str(out)], out / "config.json"),
        "evaluate RUN": (["evaluate", str(evaluated), "--episodes", "2"], evaluated / "evaluation"),
        "evaluate CHECKPOINT": (
            ["evaluate", str(evaluated / "refs" / "ref0"), "--episodes", "2"],
            evaluated / "refs" / "ref0" / "policy.eval.json",
        ),
        "report": (["report", str(evaluated), "--episodes", "2", "--no-videos", "--out", str(out)], None),
    }[command]
    monkeypatch.setattr(npsco.io.os, "fsync", full)
    err = one_line(capsys, argv)
    assert "the disk is full while writing " in err and ": every file npsco wrote before is whole" in err, err
    if first is not None:
        assert f"while writing {first}" in err, err
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]  # no temporary file left


def run_limited(argv: list[str], limit: int, cwd: Path) -> subprocess.CompletedProcess:
    """`npsco ARGV` in a child process whose files may not grow past `limit` bytes (`ulimit -f`; SIGXFSZ ignored, so
    that a write past it fails with EFBIG)."""

    def limit_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    code = "import sys; from npsco.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        preexec_fn=limit_files,
        env=CHILD_ENV,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


TOO_LARGE = "the file is too large for this system (past the file size limit: `ulimit -f`"


def test_a_file_past_the_size_limit_is_one_line_and_no_policy_is_passed_off_as_trained(tmp_path):
    """In `npsco train` the first file past the limit is TensorBoard's event file, written by its own thread: no
    thread traceback, one line naming it, exit 2 (not 0), and no policy.safetensors."""
    out = tmp_path / "run"
    argv = ["train", "--steps", "16384", "--set", "num_steps=16", "--set", "eval_episodes=2", "--no-progress"]
    r = run_limited([*argv, "--out", str(out)], 15_000, tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and "Exception in thread" not in r.stderr
    assert TOO_LARGE in r.stderr and f"while writing {out / 'tensorboard'}/events.out.tfevents." in r.stderr
    assert not (out / "policy.safetensors").exists()


def test_a_population_past_the_size_limit_is_one_line_naming_the_policy_file(tmp_path):
    out = tmp_path / "pop"
    argv = ["population", "--refs", "2", "--novel", "1", "--steps", "4096", "--set", "num_steps=64"]
    r = run_limited([*argv, "--set", "eval_episodes=2", "--no-progress", "--out", str(out)], 20_000, tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert TOO_LARGE in r.stderr and f"while writing {out / 'refs' / 'ref0' / 'policy.safetensors'}:" in r.stderr
    assert not (out / "refs" / "ref0" / "policy.safetensors").exists()


GRID = """
name = "tiny"
tasks = ["npsco/FourRewardMaze-v0"]
methods = ["ppo", "ipd"]
refs = 2
novel = 1
steps = 16384
eval_episodes = 2
threshold_episodes = 2

[ppo]
eval_every = 0
num_steps = 16
"""


def test_a_sweep_past_the_size_limit_is_one_line_without_worker_tracebacks(tmp_path):
    grid = tmp_path / "tiny.toml"
    grid.write_text(GRID)
    r = run_limited(["sweep", str(grid), "--workers", "2", "--out", str(tmp_path / "sweep")], 15_000, tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and "Exception in thread" not in r.stderr, r.stderr
    assert lines[0].startswith("npsco sweep: error: ref") and TOO_LARGE in lines[0] and "tensorboard" in lines[0]
    assert not list((tmp_path / "sweep").rglob("policy.safetensors"))


def test_tensorboards_thread_error_is_raised_where_the_logger_writes_naming_the_event_file(tmp_path, monkeypatch):
    """TensorBoard writes in a thread of its own: its OSError prints no traceback there, and the logger raises it,
    naming the event file, at its next write or at `close` (a run never ends as if its metrics were whole)."""
    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_value))
    logger = MetricsLogger(tmp_path, tensorboard=True)
    assert threading.excepthook is not seen.append  # the logger's hook, which passes other errors to ours
    writer = logger._tb.file_writer.event_writer._general_file_writer  # type: ignore[union-attr]

    def too_large(data):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    monkeypatch.setattr(writer, "write", too_large)
    logger.log(1, {"a": 1.0})
    with pytest.raises(OSError) as raised:
        for step in range(2, 200):  # the thread fails on its first write; a later log or close raises it here
            logger.log(step, {"a": 1.0})
        logger.close()
    assert raised.value.errno == errno.EFBIG and "events.out.tfevents" in str(raised.value.filename)
    assert seen == []  # the writer thread printed nothing
    threading.excepthook(threading.ExceptHookArgs([ValueError, ValueError("other"), None, None]))
    assert [type(e) for e in seen] == [ValueError]  # any other thread error goes on as before


def test_a_metrics_file_that_cannot_be_written_ends_the_training_without_a_policy(tmp_path, monkeypatch, capsys):
    """metrics.jsonl's write fails once the disk fills after its first rows: one line naming it, exit code 2, and no
    policy.safetensors (a run whose metrics were not all written does not end as complete)."""
    import npsco.logger

    class FillsUp:
        """metrics.jsonl as opened by the logger, whose third write finds the disk full (as write(2): no file name)."""

        def __init__(self, handle):
            self.handle, self.rows = handle, 0

        def write(self, text: str) -> int:
            self.rows += 1
            if self.rows > 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.handle.write(text)

        def flush(self) -> None:
            self.handle.flush()

        def close(self) -> None:
            self.handle.close()

    opened = lambda *a, **k: FillsUp(builtins.open(*a, **k))  # noqa: E731, SIM115  (the logger closes it)
    monkeypatch.setattr(npsco.logger, "open", opened, raising=False)
    out = tmp_path / "run"
    err = one_line(capsys, ["train", *TINY, "--set", "num_envs=1", "--no-tensorboard", "--out", str(out)])
    assert f"the disk is full while writing {out / 'metrics.jsonl'}" in err, err
    assert not (out / "policy.safetensors").exists()
