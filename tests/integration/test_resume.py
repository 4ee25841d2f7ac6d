"""Resuming training from its saved state (`npsco.ppo.state`) gives the run an uninterrupted one gives, bit for bit:
the same final policy and the same metrics, for plain PPO and every method on the maze, and for PPO and IPD on
Hopper-v5 (MuJoCo's physics state restored)."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from npsco.errors import NpscoError
from npsco.logger import read_metrics
from npsco.methods import METHODS, make_method
from npsco.methods.base import MethodContext
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import ReferenceSet
from npsco.policy import load_policy
from npsco.ppo.config import preset
from npsco.ppo.state import read_state, state_path, write_state
from npsco.ppo.trainer import Trainer
from npsco.tasks import MAZE_ID

TIMINGS = ("charts/SPS", "charts/rollout_seconds", "charts/update_seconds")


def comparable(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMINGS} for row in rows]


def train_straight_and_resumed(cfg, make_hooks, tmp_path, stop_after: int):
    """(uninterrupted run dir, resumed run dir): the second stopped after `stop_after` iterations (as SIGINT does)
    and resumed by a new trainer."""
    Trainer(cfg, make_hooks(), tmp_path / "straight", tensorboard=False).train(progress=False)

    def stop(trainer: Trainer, metrics: dict) -> None:
        if trainer.iteration == stop_after:
            trainer.stop_requested = True

    first = Trainer(cfg, make_hooks(), tmp_path / "resumed", tensorboard=False).train(progress=False, on_iteration=stop)
    assert first.interrupted and state_path(tmp_path / "resumed").exists()
    saved = read_state(state_path(tmp_path / "resumed"))
    assert saved.iteration == stop_after and saved.metrics_rows == stop_after
    second = Trainer(cfg, make_hooks(), tmp_path / "resumed", tensorboard=False, resume=True)
    assert second.iteration == stop_after
    result = second.train(progress=False)
    assert not result.interrupted and not state_path(tmp_path / "resumed").exists()  # complete: nothing to resume
    return tmp_path / "straight", tmp_path / "resumed"


def assert_same_run(a, b) -> None:
    pa, pb = load_policy(a / "policy.safetensors"), load_policy(b / "policy.safetensors")
    for (wa, ba), (wb, bb) in zip(pa.weights, pb.weights, strict=True):
        np.testing.assert_array_equal(wa, wb)
        np.testing.assert_array_equal(ba, bb)
    np.testing.assert_array_equal(pa.obs_mean, pb.obs_mean)
    np.testing.assert_array_equal(pa.log_std, pb.log_std)
    assert comparable(read_metrics(a / "metrics.jsonl")) == comparable(read_metrics(b / "metrics.jsonl"))


@pytest.mark.parametrize("method", list(METHODS))
def test_a_resumed_maze_run_equals_the_uninterrupted_one(method, tmp_path, maze_policies):
    cfg = dataclasses.replace(
        preset(MAZE_ID), total_timesteps=4 * 1024, num_steps=64, eval_every=2, eval_episodes=3, seed=3
    )
    refs = ReferenceSet([maze_policies.const([0.4, 0.0]), maze_policies.const([0.0, 0.5])], ["a", "b"])

    def hooks():
        if method == "ppo":
            return None
        return make_method(MethodConfig.of(method, t_start=2), MethodContext(MAZE_ID, refs, 0.3))

    straight, resumed = train_straight_and_resumed(cfg, hooks, tmp_path, stop_after=2)
    assert_same_run(straight, resumed)


@pytest.mark.parametrize("method", ["ppo", "ipd"])
def test_a_trainers_state_dict_continues_in_a_fresh_trainer_bit_for_bit(method, tmp_path, maze_policies):
    """`Trainer.state_dict()` taken between two iterations and given to a fresh trainer's `load_state_dict()`, as it is
    and through the file (`write_state` / `read_state`): both continue with the uninterrupted trainer's bits."""
    cfg = dataclasses.replace(
        preset(MAZE_ID), total_timesteps=4 * 1024, num_steps=64, eval_every=2, eval_episodes=3, seed=4
    )
    refs = ReferenceSet([maze_policies.const([0.4, 0.0])], ["a"])

    def hooks():
        if method == "ppo":
            return None
        return make_method(MethodConfig.of(method, t_start=2), MethodContext(MAZE_ID, refs, 0.3))

    saved = {}

    def keep_state(trainer: Trainer, metrics: dict) -> None:
        if trainer.iteration == 2:
            saved["state"] = trainer.state_dict()

    straight = Trainer(cfg, hooks(), tensorboard=False).train(progress=False, on_iteration=keep_state)
    write_state(saved["state"], tmp_path / "state.safetensors")
    for state in (saved["state"], read_state(tmp_path / "state.safetensors")):
        trainer = Trainer(cfg, hooks(), tensorboard=False)
        trainer.load_state_dict(state)
        assert (trainer.iteration, trainer.global_step) == (2, 2 * cfg.batch_size)
        continued = trainer.train(progress=False)
        for (wa, ba), (wb, bb) in zip(straight.policy.weights, continued.policy.weights, strict=True):
            np.testing.assert_array_equal(wa, wb)
            np.testing.assert_array_equal(ba, bb)
        np.testing.assert_array_equal(straight.policy.obs_mean, continued.policy.obs_mean)
        assert comparable(continued.metrics) == comparable(straight.metrics[2:])
        assert continued.eval_curve == straight.eval_curve
    other = Trainer(dataclasses.replace(cfg, seed=5), hooks(), tensorboard=False)
    with pytest.raises(NpscoError, match="belongs to another configuration"):
        other.load_state_dict(saved["state"])
    other.envs.close()


@pytest.mark.parametrize("method", ["ppo", "ipd"])
def test_a_resumed_hopper_run_equals_the_uninterrupted_one(method, tmp_path, maze_policies):
    cfg = dataclasses.replace(
        preset("Hopper-v5"), total_timesteps=3 * 512, num_steps=512, num_minibatches=8, eval_every=0, seed=5
    )
    refs = ReferenceSet([Trainer(dataclasses.replace(cfg, seed=9), tensorboard=False).policy()], ["ref"])

    def hooks():
        if method == "ppo":
            return None
        return make_method(MethodConfig.of("ipd"), MethodContext("Hopper-v5", refs, 0.05))

    straight, resumed = train_straight_and_resumed(cfg, hooks, tmp_path, stop_after=1)
    assert_same_run(straight, resumed)


def test_sigterm_saves_the_state_and_the_same_command_resumes_it(tmp_path):
    """`npsco train` stopped by SIGTERM mid-run saves its state; running it again continues from there (no step is
    trained twice) and ends with the policy of an uninterrupted run."""
    args = ["train", "--steps", "16384", "--set", "eval_every=0", "--set", "num_steps=64", "--no-progress"]
    code = "import sys; from npsco.cli import main; sys.exit(main(sys.argv[1:]))"
    straight = tmp_path / "straight"
    assert subprocess.run([sys.executable, "-c", code, *args, "--out", str(straight)], check=False).returncode == 0
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", code, *args, "--out", str(out)], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out / "metrics.jsonl").exists() or len(read_metrics(out / "metrics.jsonl")) < 3:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    said = proc.stdout.read() if proc.stdout else ""
    assert "interrupted: the policy in training is saved at" in said and "run the same command again" in said
    saved = read_state(state_path(out))
    assert 3 <= saved.iteration < 16 and not (out / "policy.safetensors").exists()
    resumed = subprocess.run([sys.executable, "-c", code, *args, "--out", str(out)], check=False)
    assert resumed.returncode == 0
    assert_same_run(straight, out)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_sigkill_at_a_random_moment_loses_at_most_the_cadence(seed, tmp_path):
    """`npsco train` killed (SIGKILL) at a random moment with the state saved every second (`state_every`): the saved
    state is at most that second plus an iteration old, and the re-run says from which step it resumes."""
    args = ["train", "--steps", "400000", "--set", "eval_every=0", "--set", "state_every=1", "--no-progress"]
    code = "import sys; from npsco.cli import main; sys.exit(main(sys.argv[1:]))"
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", code, *args, "--out", str(out)])
    deadline = time.monotonic() + 60
    while not state_path(out).exists():  # training has begun
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(np.random.default_rng(seed).uniform(1.0, 4.0))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    killed_at = time.time()
    age = killed_at - state_path(out).stat().st_mtime
    step = read_state(state_path(out)).global_step
    iteration = max(
        r["charts/rollout_seconds"] + r["charts/update_seconds"] for r in read_metrics(out / "metrics.jsonl")
    )
    assert age <= 1.0 + 2 * iteration + 0.5, (age, iteration)  # the cadence, the iteration in progress, slack
    again = subprocess.Popen([sys.executable, "-c", code, *args, "--out", str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert again.stdout is not None
        budget = dataclasses.replace(preset(MAZE_ID), total_timesteps=400000).policy_steps  # whole iterations
        assert f"resuming from the state saved at step {step:,} of {budget:,}" in again.stdout.readline()
    finally:
        again.kill()
        again.wait(timeout=60)


def test_a_hopper_population_killed_three_times_wastes_at_most_an_iteration_each_and_ends_identical(tmp_path):
    """The issue's kill test: `npsco population` on Hopper-v5 killed with SIGKILL mid-policy three times and re-run each
    time; with the state saved after every iteration (`state_every=0`), each kill loses at most the iteration in
    progress, every re-run says where it resumes, and the final policy is bit for bit the uninterrupted run's."""
    args = ["population", "--env", "Hopper-v5", "--method", "ppo", "--refs", "1", "--novel", "0", "--steps", "6144"]
    args += ["--set", "num_steps=256", "--set", "num_minibatches=4", "--set", "eval_every=0", "--set", "state_every=0"]
    args += ["--no-progress"]
    code = "import sys; from npsco.cli import main; sys.exit(main(sys.argv[1:]))"

    def command(out):
        return [sys.executable, "-c", code, *args, "--out", str(out)]

    assert subprocess.run(command(tmp_path / "straight"), check=False, capture_output=True).returncode == 0
    out = tmp_path / "run"
    ref = out / "refs" / "ref0"
    saved_steps = []
    for kill_after in (4, 10, 16):  # iterations of 24
        proc = subprocess.Popen(command(out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while not state_path(ref).exists() or read_state(state_path(ref)).iteration < kill_after:
            assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        output = proc.communicate()[0]
        saved = read_state(state_path(ref))
        logged = len(read_metrics(ref / "metrics.jsonl"))
        assert 0 <= logged - saved.iteration <= 1  # at most the iteration in progress is lost
        if saved_steps:
            assert f"resuming from the training state saved at step {saved_steps[-1]:,}" in output
        saved_steps.append(saved.global_step)
    final = subprocess.run(command(out), check=False, capture_output=True, text=True)
    assert (
        final.returncode == 0 and f"resuming from the training state saved at step {saved_steps[-1]:,}" in final.stdout
    )
    assert saved_steps == sorted(saved_steps) and saved_steps[0] >= 4 * 256
    assert (out / "refs" / "ref0" / "policy.safetensors").read_bytes() != b""
    straight_policy = load_policy(tmp_path / "straight" / "refs" / "ref0" / "policy.safetensors")
    resumed_policy = load_policy(ref / "policy.safetensors")
    for (wa, ba), (wb, bb) in zip(straight_policy.weights, resumed_policy.weights, strict=True):
        np.testing.assert_array_equal(wa, wb)
        np.testing.assert_array_equal(ba, bb)
    assert comparable(read_metrics(tmp_path / "straight" / "refs" / "ref0" / "metrics.jsonl")) == comparable(
        read_metrics(ref / "metrics.jsonl")
    )


def test_a_population_says_why_a_policy_starts_again_from_step_0(tmp_path, capsys):
    """A policy left `training` without a saved state (killed before its first save) is trained again from scratch,
    and the log says why."""
    from npsco.cli import main

    args = ["population", "--env", MAZE_ID, "--method", "ppo", "--refs", "1", "--novel", "0", "--steps", "2048"]
    args += ["--set", "eval_every=0", "--no-progress", "--out", str(tmp_path / "pop")]
    assert main(args) == 0
    manifest = tmp_path / "pop" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["members"][0].update(status="training", final_eval=None)
    manifest.write_text(json.dumps(data))
    (tmp_path / "pop" / "refs" / "ref0" / "policy.safetensors").unlink()  # the folder stays, with no state in it
    capsys.readouterr()
    assert main(args) == 0
    assert "no training state was saved by the stopped attempt" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["no members", "one novel member removed", "left training"])
def test_a_damaged_manifest_never_costs_a_finished_policy(damage, tmp_path, capsys):
    """Finished policies on disk that the manifest no longer lists as done (its members emptied, one removed, or one
    left `training` by a kill during its final evaluation) are kept, not deleted and trained again, and the run ends
    with the manifest an intact run has (wall times aside)."""
    from npsco.cli import main

    args = ["population", "--env", MAZE_ID, "--method", "ipd", "--refs", "2", "--novel", "1", "--steps", "2048"]
    args += ["--set", "eval_every=0", "--no-progress", "--out", str(tmp_path / "pop")]
    assert main(args) == 0
    manifest = tmp_path / "pop" / "manifest.json"
    intact = json.loads(manifest.read_text())
    files = sorted((tmp_path / "pop").rglob("policy.safetensors"))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}
    data = json.loads(manifest.read_text())
    if damage == "no members":
        data["members"] = []
    elif damage == "one novel member removed":
        data["members"] = [m for m in data["members"] if m["role"] != "novel"]
    else:
        data["members"][-1].update(status="training", final_eval=None)
    manifest.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert (
        "trained to its end: kept if it is this policy" in out and "it was this policy: kept, not trained again" in out
    )
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files} == before  # not one rewritten

    def comparable(members):
        return [{k: v for k, v in m.items() if k != "wall_seconds"} for m in members]

    assert comparable(json.loads(manifest.read_text())["members"]) == comparable(intact["members"])


def test_a_policy_on_disk_that_is_not_its_members_is_trained_again(tmp_path, capsys):
    """The other side of keeping a finished policy: one whose config.json records another member (here, the novel
    policy's record edited to another seed) is not taken as this member's; it is trained again, and said so."""
    from npsco.cli import main

    args = ["population", "--env", MAZE_ID, "--method", "ipd", "--refs", "2", "--novel", "1", "--steps", "2048"]
    args += ["--set", "eval_every=0", "--no-progress", "--out", str(tmp_path / "pop")]
    assert main(args) == 0
    manifest = tmp_path / "pop" / "manifest.json"
    data = json.loads(manifest.read_text())
    novel = data["members"][-1]
    novel.update(status="training", final_eval=None)
    manifest.write_text(json.dumps(data))
    run = tmp_path / "pop" / novel["path"]
    record = json.loads((run / "config.json").read_text())
    record["ppo"]["seed"] += 1
    (run / "config.json").write_text(json.dumps(record))
    stamp = (run / "policy.safetensors").stat().st_mtime_ns
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "it was not this policy: trained again from step 0" in out, out
    assert (run / "policy.safetensors").stat().st_mtime_ns != stamp  # trained again
    assert json.loads((run / "config.json").read_text())["ppo"]["seed"] == record["ppo"]["seed"] - 1
    assert json.loads(manifest.read_text())["members"][-1]["status"] == "done"


def test_a_resumed_runs_progress_bar_counts_only_the_steps_it_trained(tmp_path, monkeypatch):
    """The bar's SPS after a resume was the run's whole step count over this process's seconds (`SPS=35416` one
    iteration after resuming at 90%): it counts this process's steps now, so it is of the order of a fresh run's."""
    import npsco.ppo.trainer as trainer_module

    shown: list[float] = []
    real = trainer_module.tqdm

    class Recording(real):  # type: ignore[misc, valid-type]
        def set_postfix(self, post=None, refresh=True, **kwargs):
            shown.append(float(post["SPS"]))
            return super().set_postfix(post, refresh=refresh, **kwargs)

    monkeypatch.setattr(trainer_module, "tqdm", Recording)
    cfg = dataclasses.replace(preset(MAZE_ID), total_timesteps=10 * 1024, num_steps=64, eval_every=0, seed=3)

    def stop(trainer: Trainer, metrics: dict) -> None:
        if trainer.iteration == 9:
            trainer.stop_requested = True

    Trainer(cfg, None, tmp_path / "run", tensorboard=False).train(progress=True, on_iteration=stop)
    # the bar shows steps over seconds since the start: the seconds of iteration k are k B / SPS_k
    seconds = [(k + 1) * cfg.batch_size / sps for k, sps in enumerate(shown)]
    fresh = float(np.median([cfg.batch_size / (b - a) for a, b in zip(seconds[1:], seconds[2:], strict=False)]))
    shown.clear()
    Trainer(cfg, None, tmp_path / "run", tensorboard=False, resume=True).train(progress=True)
    assert len(shown) == 1 and shown[0] < 3 * fresh, (shown, fresh)  # counting all 10 iterations would be ~10x
