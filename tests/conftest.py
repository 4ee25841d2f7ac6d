"""Helpers shared by the test files, as fixtures; and a test-session hook: the closing summary names the tests marked
slow and how each ended, so that a CI log shows that they ran (pytest's dots do not name tests)."""

import ast
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
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


def box_policy(env_id: str, observation_space, action_space, weights, **metadata) -> Policy:
    """A policy of `env_id` (Box spaces) from its layers' (weight, bias) lists: no observation normalisation, std 1.
    Its metadata are what a checkpoint needs (method `ppo`, seed 0 unless `metadata` says otherwise), and `metadata`."""
    return Policy(
        weights=[(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in weights],
        log_std=np.zeros(action_space.shape[0], np.float32),
        obs_mean=np.zeros(observation_space.shape[0], np.float32),
        obs_var=np.ones(observation_space.shape[0], np.float32),
        obs_clip=10.0,
        norm_obs=False,
        action_low=action_space.low,
        action_high=action_space.high,
        metadata={
            "env_id": env_id,
            "observation_space": space_metadata(observation_space),
            "action_space": space_metadata(action_space),
            "method": "ppo",
            "seed": 0,
            **metadata,
        },
    )


def maze_policy(weights, **metadata) -> Policy:
    """A maze policy from its layers' (weight, bias) lists (`box_policy`)."""
    return box_policy(MAZE_ID, MAZE_OBS, MAZE_ACT, weights, **metadata)


def no_browser(reason: str) -> None:
    """Skip a test that needs Chromium, saying why; under `.ci/run` (NPSCO_REQUIRE_BROWSER=1, which installs
    Chromium first) fail instead, so that CI never passes without opening the report in a browser."""
    if os.environ.get("NPSCO_REQUIRE_BROWSER") == "1":
        pytest.fail(f"NPSCO_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def constant_policy() -> Callable[[str, float], Policy]:
    """`constant_policy(env_id, action)`: a policy of `env_id` that acts `action` on every joint whatever it sees."""

    def make(env_id: str, action: float) -> Policy:
        env = gym.make(env_id)
        obs, act = env.observation_space, env.action_space
        env.close()
        return box_policy(env_id, obs, act, [(np.zeros((act.shape[0], obs.shape[0])), np.full(act.shape[0], action))])

    return make


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


@pytest.fixture
def update_trainer(tiny_maze):
    """`update_trainer(method=None, **settings)`: a maze trainer for checking updates: 8 envs x 32 steps, 4
    minibatches, 3 epochs, small networks (actor 32x10, critic 16), seed 3; `settings` over them."""
    from npsco.ppo.trainer import Trainer

    def make(method=None, **settings):
        base = dict(num_envs=8, num_steps=32, num_minibatches=4, update_epochs=3, actor_hidden=(32, 10), seed=3)
        cfg = tiny_maze(**{**base, "critic_hidden": (16,), **settings})
        return Trainer(cfg, method, tensorboard=False)

    return make


@pytest.fixture(scope="session")
def random_batch() -> Callable[..., object]:
    """`random_batch(agent, streams, size, rng)`: a `Batch` of `size` random rows for `agent`: standard normal
    observations, actions = the policy's mean + N(0, 1), old log-probabilities = the current ones + N(0, 0.4) (ratios
    far from 1 too: both sides of PPO's clip), and per stream of `streams` advantages N(0.3, 1.5), values N(0, 1) and
    returns = values + N(0, 0.5)."""
    import torch

    from npsco.ppo.rollout import Batch

    def make(agent, streams, size: int, rng: np.random.Generator):
        def normal(mean, std, shape):
            return torch.from_numpy(rng.normal(mean, std, shape).astype(np.float32))

        obs = normal(0.0, 1.0, (size, agent.obs_dim))
        with torch.no_grad():
            mean = agent.actor_mean(obs)
            actions = mean + normal(0.0, 1.0, mean.shape)
            logprob, _, _ = agent.evaluate(obs, actions)
        values = {s: normal(0.0, 1.0, size) for s in streams}
        return Batch(
            obs=obs,
            actions=actions,
            logprobs=logprob + normal(0.0, 0.4, size),
            advantages={s: normal(0.3, 1.5, size) for s in streams},
            returns={s: values[s] + normal(0.0, 0.5, size) for s in streams},
            values=values,
            size=size,
        )

    return make


@pytest.fixture(scope="session")
def learner_state() -> SimpleNamespace:
    """A trainer's learning state, to compare updates: `snapshot(tr)` and `restore(tr, snap)` (the agent, the Adam
    state, the minibatch generator), `params(tr)` (every parameter, one vector), `adam(tr)` (Adam's first and second
    moments, one vector each, and each parameter's step count, -1 without state), `run(tr, snap, update)` (restore
    `snap`, call `update()`: the parameters, Adam state and result after it) and `assert_same(expected, got, before,
    rel)` (two runs' parameter changes from `before` and their results equal to `rel`, their Adam states to float32
    rounding)."""
    import copy

    import torch

    def snapshot(tr):
        return (
            copy.deepcopy(tr.agent.state_dict()),
            copy.deepcopy(tr.learner.optimizer.state_dict()),
            tr.learner.torch_rng.get_state(),
        )

    def restore(tr, snap) -> None:
        tr.agent.load_state_dict(snap[0])
        tr.learner.optimizer.load_state_dict(copy.deepcopy(snap[1]))  # (load_state_dict aliases the tensors given)
        tr.learner.torch_rng.set_state(snap[2])

    def params(tr) -> np.ndarray:
        return torch.cat([p.detach().reshape(-1) for p in tr.agent.parameters()]).numpy().copy()

    def adam(tr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(exp_avg, exp_avg_sq, steps); a parameter without Adam state counts zeros and step -1."""
        ps = list(tr.agent.parameters())
        st = [tr.learner.optimizer.state[p] for p in ps]

        def moment(key: str) -> np.ndarray:
            return np.concatenate(
                [s[key].reshape(-1).numpy() if s else np.zeros(p.numel()) for s, p in zip(st, ps, strict=False)]
            )

        return moment("exp_avg"), moment("exp_avg_sq"), np.array([float(s["step"]) if s else -1.0 for s in st])

    def run(tr, snap, update):
        restore(tr, snap)
        out = update()
        return params(tr), adam(tr), out

    def assert_same(expected, got, before: np.ndarray, rel: float = 1e-4) -> None:
        d_expected, d_got = expected[0] - before, got[0] - before
        assert np.linalg.norm(d_expected) > 1e-4  # the update did something
        assert np.linalg.norm(d_got - d_expected) / np.linalg.norm(d_expected) < rel
        np.testing.assert_allclose(got[1][0], expected[1][0], rtol=1e-3, atol=1e-7)
        np.testing.assert_allclose(got[1][1], expected[1][1], rtol=1e-3, atol=1e-10)
        np.testing.assert_array_equal(got[1][2], expected[1][2])
        assert got[2].keys() == expected[2].keys()
        for k in expected[2]:
            assert got[2][k] == pytest.approx(expected[2][k], rel=rel, abs=1e-6), k

    return SimpleNamespace(
        snapshot=snapshot, restore=restore, params=params, adam=adam, run=run, assert_same=assert_same
    )


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
    references were trained (hand-made constant policies, acting (-1, 0) and (-1, 0.5), marked done) and before its
    novel policy `ipd/k0` (absolute r0 0.3) starts; returns the command line that resumes it. Nothing trains.
    `planned_run(out, threshold=["--r0-scale", "2"])`: another threshold than `--r0 0.3`."""
    from npsco.cli_parser import build_parser
    from npsco.options import PopulationOptions
    from npsco.population import Population

    def make(out: Path, threshold: Sequence[str] = ("--r0", "0.3")) -> list[str]:
        argv = [
            "population",
            "--method",
            "ipd",
            "--refs",
            "2",
            "--novel",
            "1",
            *threshold,
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
        pop = Population(out, PopulationOptions.from_args(args).config(), progress=False, log=lambda _: None)
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
def module_calls() -> Callable[[ast.AST], list[SimpleNamespace]]:
    """`module_calls(tree)`: every call in a module's syntax tree, as `scope` (the function or `Class.method` it is
    in), `owner` (`os` in `os.open(...)`, else None), `name` (`open`) and `text` (the call as source)."""

    def calls(tree: ast.AST) -> list[SimpleNamespace]:
        found = []

        def visit(node: ast.AST, scope: list[str]) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    visit(child, [*scope, child.name])
                    continue
                if isinstance(child, ast.Call):
                    f = child.func
                    owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
                    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                    found.append(
                        SimpleNamespace(
                            scope=".".join(scope), owner=owner, name=name, call=child, text=ast.unparse(child)
                        )
                    )
                visit(child, scope)

        visit(tree, [])
        return found

    return calls


@pytest.fixture
def children() -> Iterator[SimpleNamespace]:
    """Child processes that never outlive the test: `start(args, **popen_kwargs)` starts `python ARGS` in `env` (one
    BLAS thread, MUJOCO_GL=egl: on a loaded 2-core machine OpenBLAS threads make the PPO update ~100x slower); any
    still running at the end of the test is killed."""
    env = {**os.environ, "MUJOCO_GL": "egl", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    started: list[subprocess.Popen] = []

    def start(args: list[str], **kwargs) -> subprocess.Popen:
        started.append(subprocess.Popen([sys.executable, *args], env=env, **kwargs))
        return started[-1]

    yield SimpleNamespace(start=start, env=env)
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


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


class FakeWandbRun:
    """A W&B run of `fake_wandb`: what it was started with, what was logged, whether it was finished."""

    def __init__(self, **kwargs):
        self.init, self.logged, self.finished = kwargs, [], False

    def log(self, values, step):
        self.logged.append((step, values))

    def finish(self):
        self.finished = True


@pytest.fixture
def fake_wandb(monkeypatch) -> list[FakeWandbRun]:
    """A stand-in `wandb` module in sys.modules; the list of the runs it started (`FakeWandbRun`)."""
    runs: list[FakeWandbRun] = []
    fake = types.ModuleType("wandb")
    fake.init = lambda **kwargs: runs.append(FakeWandbRun(**kwargs)) or runs[-1]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    return runs
