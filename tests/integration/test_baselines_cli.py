"""WSR, TNB, CTNB and CPO end to end through `npsco population` (in-process `npsco.cli.main`), with tiny budgets:
on the maze against 2 PPO references trained once, and for 2 iterations on Hopper-v5 with a given r0."""

import json
import math
import os
from pathlib import Path

import pytest

from npsco.cli import main
from npsco.logger import read_metrics
from npsco.policy import load_policy

os.environ.setdefault("MUJOCO_GL", "egl")

METHODS = [  # method, a knob set on the command line, metric keys logged every iteration
    ("wsr", "wsr_shape=neg_exp", {"wsr/bonus_mean", "wsr/weight"}),
    ("tnb", "tnb_rule=paper_eq5", {"tnb/cos", "tnb/obtuse_frac", "losses/novelty_policy_loss"}),
    ("ctnb", "ctnb_slack=0.05", {"ctnb/constraint_active"}),
    ("cpo", "cpo_max_kl=0.02", {"cpo/cost", "cpo/case", "cpo/kl", "cpo/step_accepted", "cpo/lambda", "cpo/nu"}),
]
MAZE_TINY = ["--set", "num_steps=64", "--no-progress"]


@pytest.fixture(scope="module")
def maze_refs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("maze") / "refs"
    assert (
        main(
            [
                "population",
                "--method",
                "ppo",
                "--refs",
                "2",
                "--novel",
                "0",
                "--steps",
                "1024",
                *MAZE_TINY,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    return out


@pytest.fixture(scope="module")
def hopper_refs(tmp_path_factory, hopper_tiny) -> Path:
    out = tmp_path_factory.mktemp("hopper") / "refs"
    assert main(["population", "--method", "ppo", "--refs", "1", "--novel", "0", *hopper_tiny, "--out", str(out)]) == 0
    return out


def run_method(out: Path, refs: Path, method: str, knob: str, chain: str, *extra: str) -> tuple[dict, list[dict]]:
    """Train one novel policy with `method` (in chain `chain`); returns its manifest entry and per-iteration metrics."""
    assert (
        main(
            [
                "population",
                "--method",
                method,
                "--refs-from",
                str(refs),
                "--novel",
                "1",
                "--mset",
                knob,
                *extra,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    [novel] = [m for m in manifest["members"] if m["role"] == "novel"]
    assert (novel["status"], novel["method"], novel["chain"]) == ("done", method, chain)
    policy = load_policy(out / novel["path"] / "policy.safetensors")
    key, value = knob.split("=")
    assert policy.metadata["method"] == method and str(policy.metadata["method_config"][key]) == value
    return novel, read_metrics(out / novel["path"] / "metrics.jsonl")


@pytest.mark.parametrize("method, knob, keys", METHODS, ids=[m[0] for m in METHODS])
def test_method_trains_a_novel_maze_policy(tmp_path, maze_refs, method, knob, keys):
    # the default threshold, 0.5 x r0_default, is a chain of its own name; an absolute --r0 is the method's chain
    novel, rows = run_method(
        tmp_path / method, maze_refs, method, knob, f"{method}-r0x0.5", "--steps", "4096", *MAZE_TINY
    )
    assert novel["references"] == ["ref0", "ref1"] and novel["threshold"] > 0
    assert [r["global_step"] for r in rows] == [1024, 2048, 3072, 4096]
    for row in rows:
        assert keys <= set(row) and all(math.isfinite(row[k]) for k in keys)
        assert "novelty/running_mean" in row and row["novelty/r0"] == pytest.approx(novel["threshold"])
        if "charts/episodic_return" in row:  # the reported return is the task's: within the maze's [-1, 10]
            assert -1.0 - 1e-6 <= row["charts/episodic_return"] <= 10.0
    assert -1.0 - 1e-6 <= novel["final_eval"]["return_mean"] <= 10.0


@pytest.mark.parametrize("method, knob, keys", METHODS, ids=[m[0] for m in METHODS])
def test_method_runs_two_iterations_on_hopper(tmp_path, hopper_refs, hopper_tiny, method, knob, keys):
    novel, rows = run_method(tmp_path / method, hopper_refs, method, knob, method, "--r0", "0.1", *hopper_tiny)
    assert novel["threshold"] == 0.1 and novel["references"] == ["ref0"]
    assert [r["global_step"] for r in rows] == [512, 1024]
    assert all(keys <= set(row) for row in rows) and "eval/return_mean" in rows[-1]
