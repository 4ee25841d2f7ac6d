"""Helpers shared by the test files, as fixtures; and a test-session hook: the closing summary names the tests marked
slow and how each ended, so that a CI log shows that they ran (pytest's dots do not name tests)."""

import dataclasses
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from npsco.policy import Policy, space_metadata
from npsco.ppo.config import PPOConfig, preset
from npsco.tasks import MAZE_ID

MAZE_OBS = gym.spaces.Box(0.0, 16.0, (2,), np.float32)
MAZE_ACT = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def maze_policy(weights, **metadata) -> Policy:
    """A maze policy from its layers' (weight, bias) lists: no observation normalisation, std 1. Its metadata are
    what a checkpoint needs (method `ppo`, seed 0 unless `metadata` says otherwise), and `metadata`."""
    return Policy(
        weights=[(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in weights],
        log_std=np.zeros(2, np.float32),
        obs_mean=np.zeros(2, np.float32),
        obs_var=np.ones(2, np.float32),
        obs_clip=10.0,
        norm_obs=False,
        action_low=MAZE_ACT.low,
        action_high=MAZE_ACT.high,
        metadata={
            "env_id": MAZE_ID,
            "observation_space": space_metadata(MAZE_OBS),
            "action_space": space_metadata(MAZE_ACT),
            "method": "ppo",
            "seed": 0,
            **metadata,
        },
    )


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def load_script() -> Callable[[str], object]:
    """`load_script("benchmarks/ppo_learning.py")`: a script of the repository as a module (registered in
    sys.modules once, as its dataclasses need)."""

    def load(path: str):
        name = "script_" + path.replace("/", "_").removesuffix(".py")
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, REPO / path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]  # no half-loaded module for the next caller
                raise
        return sys.modules[name]

    return load


@pytest.fixture
def maze_policies() -> SimpleNamespace:
    """Hand-built maze policies whose mean actions are known: `const(action)` acts `action` everywhere; `step()` acts
    (0.4 tanh(100 (x - 8)) + 0.6, 0): (0.2, 0) on the left half of the map, (1, 0) on the right. Keyword arguments
    are metadata (`const(action, method="ipd", seed=3)`)."""
    return SimpleNamespace(
        build=maze_policy,
        const=lambda action, **metadata: maze_policy([(np.zeros((2, 2)), action)], **metadata),
        step=lambda: maze_policy([([[100.0, 0.0]], [-800.0]), ([[0.4], [0.0]], [0.6, 0.0])]),
    )


@pytest.fixture(scope="session")
def tiny_maze() -> Callable[..., PPOConfig]:
    """`tiny_maze(**settings)`: the maze's PPO preset at a tiny budget, `settings` over it: 4 envs x 16 steps, one
    minibatch, one epoch, no evaluation, no checkpoint; the budget is one iteration unless `total_timesteps` says."""
    tiny = dict(num_envs=4, num_steps=16, num_minibatches=1, update_epochs=1, eval_every=0, checkpoint_every=0)

    def make(**settings) -> PPOConfig:
        cfg = dataclasses.replace(preset(MAZE_ID), **{**tiny, **settings})
        return cfg if "total_timesteps" in settings else dataclasses.replace(cfg, total_timesteps=cfg.batch_size)

    return make


@pytest.fixture(scope="session")
def hopper_tiny() -> list[str]:
    """`npsco train`/`population` arguments for Hopper-v5 at a tiny budget: 1024 steps in rollouts of 512 steps on one
    env, one epoch, one evaluation episode, no progress bar."""
    return [
        "--env",
        "Hopper-v5",
        "--steps",
        "1024",
        "--set",
        "num_steps=512",
        "--set",
        "num_envs=1",
        "--set",
        "update_epochs=1",
        "--set",
        "eval_episodes=1",
        "--no-progress",
    ]


@pytest.fixture
def timing() -> SimpleNamespace:
    """The wall-clock metrics of a `metrics.jsonl` row (`keys`), and `removed(rows)`: the rows without them, which two
    runs on the same seed must then match exactly."""
    keys = {"charts/SPS", "charts/rollout_seconds", "charts/update_seconds"}
    return SimpleNamespace(
        keys=keys, removed=lambda rows: [{k: v for k, v in r.items() if k not in keys} for r in rows]
    )


@pytest.fixture
def planned_run(maze_policies) -> Callable[..., list[str]]:
    """`planned_run(out)`: a maze population run directory as `npsco population` leaves it after its two PPO
    references were trained (hand-made constant policies, marked done) and before its novel policy `ipd/k0` (absolute
    r0 0.3) starts; returns the command line that resumes it. Nothing trains."""
    from npsco.cli import population_config
    from npsco.cli_parser import build_parser
    from npsco.population import Population

    def make(out: Path) -> list[str]:
        argv = [
            "population",
            "--method",
            "ipd",
            "--refs",
            "2",
            "--novel",
            "1",
            "--r0",
            "0.3",
            "--steps",
            "1024",
            "--set",
            "num_steps=32",
            "--set",
            "update_epochs=1",
            "--set",
            "eval_episodes=2",
            "--no-progress",
            "--out",
            str(out),
        ]
        args = build_parser().parse_args(argv)
        args.steps = int(args.steps)  # as `npsco.cli.main` reads it
        pop = Population(out, population_config(args), progress=False, log=lambda _: None)
        pop.open()
        pop.close()
        manifest = json.loads((out / "manifest.json").read_text())
        for i, m in enumerate(manifest["members"][:2]):
            maze_policies.const((-1.0, 0.5 * i), seed=m["seed"]).save(out / m["path"] / "policy.safetensors")
            m.update(status="done", final_eval={"episodes": 2, "return_mean": 1.0, "return_std": 0.0})
        (out / "manifest.json").write_text(json.dumps(manifest))
        return argv

    return make


@pytest.fixture(scope="session")
def sb3_zip(tmp_path_factory) -> Path:
    """An untrained Stable-Baselines3 PPO model of Pendulum-v1 saved with `model.save()` (skips without SB3)."""
    sb3 = pytest.importorskip("stable_baselines3", reason="stable-baselines3 (the dev extra) builds the model")
    out = tmp_path_factory.mktemp("sb3") / "pendulum_ppo.zip"
    sb3.PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu").save(out)
    return out


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process, from /proc."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:  # ended meanwhile
                continue
            state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]  # the command name may hold spaces
            found[int(name)] = (int(ppid), state)
    return found


@pytest.fixture
def process_tree() -> SimpleNamespace:
    """/proc without psutil: `descendants(pid)` (every process below pid, now), `alive(pids)` (those still running:
    not ended, not zombies), `wait_gone(pids, seconds)` (those still running after up to `seconds`)."""

    def descendants(pid: int) -> set[int]:
        table, found, todo = _processes(), set(), [pid]
        while todo:
            parent = todo.pop()
            kids = {p for p, (ppid, _) in table.items() if ppid == parent}
            todo += sorted(kids - found)
            found |= kids
        return found

    def alive(pids: set[int]) -> set[int]:
        table = _processes()
        return {p for p in pids if p in table and table[p][1] not in "ZX"}

    def wait_gone(pids: set[int], seconds: float) -> set[int]:
        deadline = time.monotonic() + seconds
        while alive(pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        return alive(pids)

    return SimpleNamespace(descendants=descendants, alive=alive, wait_gone=wait_gone)


def pytest_terminal_summary(terminalreporter):
    outcomes = [
        (outcome, report.nodeid)
        for outcome in ("passed", "failed", "error", "skipped")
        for report in terminalreporter.stats.get(outcome, [])
        if getattr(report, "when", "call") == "call" and "slow" in getattr(report, "keywords", {})
    ]
    if outcomes:
        terminalreporter.section("tests marked slow")
        for outcome, nodeid in sorted(outcomes, key=lambda o: o[1]):
            terminalreporter.write_line(f"{outcome.upper()} {nodeid}")
