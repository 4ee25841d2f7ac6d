"""A population run killed with SIGKILL at random moments and resumed each time with the same command ends exactly as a
run that was never interrupted: every policy once in the manifest and on disk, all `done`, finished policies never
trained again, the same returns and the same metrics (the determinism of `npsco population`).

The killed run and the uninterrupted one are real `python -m npsco.cli population ...` processes (the uninterrupted one
runs alongside the killed one, to use both cores)."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from npsco.logger import read_metrics

ARGS = [
    "population",
    "--refs",
    "2",
    "--novel",
    "2",
    "--steps",
    "4096",
    "--set",
    "num_steps=64",
    "--set",
    "eval_every=2",
    "--set",
    "eval_episodes=5",
    "--no-progress",
]
NAMES = ["ref0", "ref1", "ipd-r0x0.5/k0", "ipd-r0x0.5/k1"]
PATHS = ["refs/ref0", "refs/ref1", "novel/ipd-r0x0.5/k0", "novel/ipd-r0x0.5/k1"]
CHILD_ENV = {**os.environ, "MUJOCO_GL": "egl", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
SEED, KILLS, MAX_DELAY = 7, 3, 1.5
TIMEOUT = 300.0


def start(out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "npsco.cli", *ARGS, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=CHILD_ENV,
    )


class Watch:
    """Reads the manifest of a run in progress; remembers each finished policy's file (inode, mtime) when first seen
    `done` and fails if it ever changes (the policy was trained again)."""

    def __init__(self, out: Path):
        self.out, self.stamps = out, {}

    def manifest(self) -> dict | None:
        try:
            text = (self.out / "manifest.json").read_text()
        except FileNotFoundError:
            return None
        data = json.loads(text)  # never torn: the manifest is replaced atomically
        for m in data["members"]:
            if m["status"] == "done":
                st = os.stat(self.out / m["path"] / "policy.safetensors")
                first = self.stamps.setdefault(m["name"], (st.st_ino, st.st_mtime_ns))
                assert (st.st_ino, st.st_mtime_ns) == first, f"{m['name']} was trained again after it was done"
        return data

    def statuses(self) -> dict[str, str]:
        data = self.manifest()
        return {m["name"]: m["status"] for m in data["members"]} if data else {}


@dataclass
class Kill:
    anchor: str | None
    delay: float
    before: dict
    after: dict
    killed: bool


def started_training(out: Path, path: str, since_ns: int) -> bool:
    """True once the policy at `path` has logged a metrics row in this attempt (its file is newer than the attempt)."""
    metrics = out / path / "metrics.jsonl"
    try:
        return metrics.stat().st_mtime_ns > since_ns and bool(read_metrics(metrics))
    except FileNotFoundError:
        return False


def killed_and_resumed(out: Path) -> tuple[list[Kill], Watch, str]:
    """Kill k (k = 0, 1, 2) waits until the first not-yet-done policy among NAMES[k:] has logged an iteration in this
    attempt, then a seeded random delay, then SIGKILLs the process; each attempt is the same command. The last attempt
    runs to the end. Returns the kills, the watch and the last attempt's output."""
    rng = random.Random(SEED)
    watch, kills = Watch(out), []
    for k in range(KILLS):
        before = watch.statuses()
        anchor = next((i for i in range(k, len(NAMES)) if before.get(NAMES[i]) != "done"), None)
        delay = rng.uniform(0.0, MAX_DELAY)
        since = time.time_ns()
        proc = start(out)
        try:
            deadline = time.monotonic() + TIMEOUT
            while anchor is not None and proc.poll() is None and not started_training(out, PATHS[anchor], since):
                watch.manifest()
                assert time.monotonic() < deadline, f"{NAMES[anchor]} did not start training within {TIMEOUT} s"
                time.sleep(0.02)
            kill_at = time.monotonic() + delay
            while proc.poll() is None and time.monotonic() < kill_at:
                watch.manifest()
                time.sleep(0.02)
            killed = proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            output = proc.communicate(timeout=60)[0]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert killed or proc.returncode == 0, output
        after = watch.statuses()
        kills.append(Kill(NAMES[anchor] if anchor is not None else None, delay, before, after, killed))
        assert list(after.values()).count("training") <= 1, after
    proc = start(out)
    output = proc.communicate(timeout=TIMEOUT)[0]
    assert proc.returncode == 0, output
    watch.manifest()
    return kills, watch, output


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("kill")
    uninterrupted = start(root / "uninterrupted")  # alongside the killed run
    try:
        kills, watch, output = killed_and_resumed(root / "killed")
        baseline_output = uninterrupted.communicate(timeout=TIMEOUT)[0]
    finally:
        if uninterrupted.poll() is None:
            uninterrupted.kill()
            uninterrupted.communicate()
    assert uninterrupted.returncode == 0, baseline_output
    return root / "killed", root / "uninterrupted", kills, watch, output


def members(out: Path) -> dict[str, dict]:
    return {m["name"]: m for m in json.loads((out / "manifest.json").read_text())["members"]}


def test_every_policy_is_there_once_done_and_never_retrained(runs):
    out, _, kills, watch, output = runs
    story = "\n".join(
        f"kill after {k.anchor} started + {k.delay:.2f} s (killed: {k.killed}): {k.before} -> {k.after}" for k in kills
    )
    print(story)
    # the kills interrupted running processes, and at least one of them a run that already had finished policies
    assert kills[0].killed, story
    assert any(k.killed and "done" in k.before.values() for k in kills), story

    manifest = json.loads((out / "manifest.json").read_text())
    assert [m["name"] for m in manifest["members"]] == NAMES
    assert [m["path"] for m in manifest["members"]] == PATHS
    assert all(m["status"] == "done" for m in manifest["members"]), story
    on_disk = sorted(str(p.parent.relative_to(out)) for p in out.rglob("policy.safetensors"))
    assert on_disk == sorted(PATHS)
    run_dirs = sorted(
        str(p.relative_to(out)) for p in [*(out / "refs").iterdir(), *(out / "novel" / "ipd-r0x0.5").iterdir()]
    )
    assert run_dirs == sorted(PATHS)
    # every finished policy was seen, and its file never changed from the moment it was first seen done
    assert set(watch.stamps) == set(NAMES)
    for name, path in zip(NAMES, PATHS, strict=True):
        st = os.stat(out / path / "policy.safetensors")
        assert (st.st_ino, st.st_mtime_ns) == watch.stamps[name], name
    # the last attempt trained only what was not done when it started
    undone = [n for n in NAMES if kills[-1].after.get(n) != "done"]
    trained = re.findall(r"^\[\d+/4\] (\S+):", output, re.M)
    assert trained == undone, output


def test_the_resumed_run_ends_as_the_uninterrupted_one(runs):
    out, baseline, *_ = runs
    got, expected = members(out), members(baseline)
    for name in NAMES:
        a, b = got[name], expected[name]
        assert (a["seed"], a["threshold"], a["references"], a["final_eval"], a["eval_curve"]) == (
            b["seed"],
            b["threshold"],
            b["references"],
            b["final_eval"],
            b["eval_curve"],
        ), name
    assert json.loads((out / "threshold.json").read_text()) == json.loads((baseline / "threshold.json").read_text())


def test_the_same_population_command_gives_the_same_metrics_and_policies(runs, timing):
    """Determinism of `npsco population` (same command, same seeds, same machine), in separate processes."""
    out, baseline, *_ = runs
    for path in PATHS:
        rows, expected = read_metrics(out / path / "metrics.jsonl"), read_metrics(baseline / path / "metrics.jsonl")
        assert len(rows) == 4 and timing.keys <= rows[0].keys()
        assert timing.removed(rows) == timing.removed(expected), path
        a, b = load_file(out / path / "policy.safetensors"), load_file(baseline / path / "policy.safetensors")
        assert a.keys() == b.keys()
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"{path}: {name}")
    returns = {n: m["final_eval"]["return_mean"] for n, m in members(out).items()}
    assert len(set(returns.values())) > 1  # (the policies differ: equal results are not all the same number)
