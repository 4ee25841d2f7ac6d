"""The benchmark scripts that make the numbers of the README and docs: benchmarks/ppo_learning.py on two tiny maze runs,
the repeats and results files of benchmarks/throughput.py, the locks of benchmarks/ppo_mujoco.py, the maze benchmarks'
measurements (npsco's evaluation), benchmarks/fast_update_methods.py on a tiny maze run; and the layout of
benchmarks/results/ (one folder per study, links that resolve)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from npsco.cli import main as npsco
from npsco.episodes import run_episodes
from npsco.errors import NpscoError
from npsco.evaluation.measure import FIG2_START
from npsco.evaluation.runs import load_run
from npsco.novelty.metrics import policy_distance
from npsco.policy import load_policy
from npsco.stats import bootstrap_ci, iqm, stratified_bootstrap_ci
from npsco.tasks import MAZE_ID

REPO = Path(__file__).resolve().parents[2]
CHILD_ENV = {**os.environ, "MUJOCO_GL": "egl", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


# ------------------------------------------------------------------------------------------------- ppo_learning.py
def test_last_episodes_return_weights_iterations_by_their_episodes_newest_first(load_script):
    pl = load_script("benchmarks/ppo_learning.py")
    rows = [
        {"charts/episodes": 50, "charts/episodic_return": 1.0},
        {"charts/episodes": 0},  # no episode ended in this iteration
        {"charts/episodes": 80, "charts/episodic_return": 2.0},
        {"charts/episodes": 40, "charts/episodic_return": 4.0},
    ]
    # the newest 40 at 4.0, 60 of the 80 at 2.0
    assert pl.last_episodes_return(rows, last=100) == (pytest.approx((40 * 4 + 60 * 2) / 100), 100)
    assert pl.last_episodes_return(rows, last=1000) == (pytest.approx((40 * 4 + 80 * 2 + 50) / 170), 170)
    assert pl.last_episodes_return([{"charts/episodes": 0}]) == (None, 0)


def test_ppo_learning_writes_both_figures_per_task_with_statistics_and_commands(load_script, tmp_path, capsys):
    pl = load_script("benchmarks/ppo_learning.py")
    runs = []
    for seed in (3, 4):
        run = tmp_path / f"maze-seed{seed}"
        assert (
            npsco(
                [
                    "train",
                    "--seed",
                    str(seed),
                    "--steps",
                    "8192",
                    "--set",
                    "eval_episodes=2",
                    "--no-progress",
                    "--no-tensorboard",
                    "--out",
                    str(run),
                ]
            )
            == 0
        )
        runs.append(run)
    out = tmp_path / "results" / "learning"
    assert pl.main([*map(str, runs), "--out", str(out), "--episodes", "4"]) == 0
    data = json.loads((tmp_path / "results" / "learning_FourRewardMaze-v0.json").read_text())
    md = (tmp_path / "results" / "learning_FourRewardMaze-v0.md").read_text()
    assert data["seeds"] == [3, 4] and data["steps"] == [8192]
    # the deterministic row: what `npsco evaluate` gives, run by run
    capsys.readouterr()
    finals = []
    for run in runs:
        assert npsco(["evaluate", str(run), "--episodes", "4", "--out", str(run / "eval.json")]) == 0
        finals.append(json.loads((run / "eval.json").read_text())["return_mean"])
    det = data["final_deterministic"]
    assert det["per_seed"] == pytest.approx(finals)
    assert (det["mean"], det["std"]) == pytest.approx((np.mean(finals), np.std(finals)))
    assert (det["iqm"], det["iqm_ci_low"], det["iqm_ci_high"]) == pytest.approx((iqm(finals), *bootstrap_ci(finals)))
    # the training row: the last 100 episodes of each run's metrics.jsonl
    train = data["training_last_episodes"]
    expected = [
        pl.last_episodes_return([json.loads(x) for x in (r / "metrics.jsonl").read_text().splitlines()])[0]
        for r in runs
    ]
    assert train["per_seed"] == pytest.approx(expected) and train["n"] == 2
    assert all(r["training_episodes"] == 100 for r in data["runs"])
    # the commands that made the runs and the file
    assert data["commands"]["train"][0] == (
        f"npsco train --env npsco/FourRewardMaze-v0 --seed 3 --steps 8192 --set eval_episodes=2 --out {runs[0]}"
    )
    assert data["commands"]["this_file"].startswith("python benchmarks/ppo_learning.py ")
    for text in (data["commands"]["this_file"], *data["commands"]["train"], *data["commands"]["evaluate"]):
        assert text in md
    assert "CleanRL's figure" in md and "IQM [95% bootstrap CI]" in md
    assert not list((tmp_path / "results").glob("*.tmp"))


def test_ppo_learning_summaries_refuse_a_missing_or_non_finite_seed(load_script):
    pl = load_script("benchmarks/ppo_learning.py")
    assert pl.summarize([1.0, 2.0, 3.0]).per_seed == [1.0, 2.0, 3.0]
    for values in ([1.0, float("nan")], [], [2.0, float("inf")]):
        with pytest.raises(NpscoError, match="finite"):
            pl.summarize(values)


def test_ppo_learning_scores_a_populations_references_with_their_settings_from_the_checkpoints(load_script, tmp_path):
    pl = load_script("benchmarks/ppo_learning.py")
    run = tmp_path / "pop"
    args = ["population", "--method", "ppo", "--refs", "2", "--novel", "0", "--steps", "4096", "--seed", "7"]
    assert npsco([*args, "--set", "eval_every=0", "--no-progress", "--out", str(run)]) == 0
    out = tmp_path / "results" / "learning"
    assert pl.main([str(run / "refs" / "ref0"), str(run / "refs" / "ref1"), "--out", str(out), "--episodes", "2"]) == 0
    data = json.loads((tmp_path / "results" / "learning_FourRewardMaze-v0.json").read_text())
    assert data["seeds"] == [7, 8] and data["steps"] == [4096]
    assert all(
        c.startswith("npsco population ") and c.endswith(f"# its reference ref{i}")
        for i, c in enumerate(data["commands"]["train"])
    )
    (run / "refs" / "ref1" / "policy.safetensors").unlink()
    with pytest.raises(NpscoError, match="not trained"):
        pl.run_settings(run / "refs" / "ref1")


def test_ppo_learning_refuses_a_run_that_is_not_finished(load_script, tmp_path, capsys):
    pl = load_script("benchmarks/ppo_learning.py")
    (tmp_path / "half").mkdir()
    assert pl.main([str(tmp_path / "half")]) == 2
    assert "not a finished `npsco train` run" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------- throughput.py
def test_throughput_alternates_npsco_and_sb3_over_3_repeats_by_default(load_script):
    tp = load_script("benchmarks/throughput.py")
    args = type(
        "Args",
        (),
        dict(
            skip_ppo=False,
            repeats=3,
            minibatch=[64],
            envpool=False,
            skip_sb3=False,
            sb3_threads=1,
            baseline_src=None,
            seed=0,
        ),
    )()
    kinds = [(spec["repeat"], spec["kind"]) for spec, _ in tp.ppo_plan(args, 2048, 2048)]
    assert kinds == [(0, "npsco"), (0, "sb3"), (1, "sb3"), (1, "npsco"), (2, "npsco"), (2, "sb3")]


def test_throughput_reports_the_median_min_and_max_of_the_repeats_ratios(load_script, tmp_path):
    tp = load_script("benchmarks/throughput.py")

    def run(kind, repeat, sps):
        return {
            "spec": {"kind": kind, "minibatch": 64, "refs": 0, "src": "current", "repeat": repeat},
            "steps_per_s": sps,
            "steps_per_cpu_s": sps,
            "peak_rss_kib": 1024,
            "steps": 2048,
            "rollout_s": 1.0,
            "update_s": 0.5,
            "load_before": 1.0,
            "load_after": 1.0,
        }

    runs = [
        run("npsco", 0, 300.0),
        run("sb3", 0, 100.0),
        run("sb3", 1, 100.0),
        run("npsco", 1, 200.0),
        run("npsco", 2, 250.0),
        run("sb3", 2, 50.0),
    ]
    args = type("Args", (), dict(minibatch=[64], refs=[]))()
    row = tp.summarize(runs, args)["ppo"]["64"]
    assert (row["ratio_npsco_over_sb3"], row["ratio_npsco_over_sb3_min"], row["ratio_npsco_over_sb3_max"]) == (3, 2, 5)
    assert row["ratio_npsco_over_sb3_repeats"] == 3
    data = {
        "command": "python benchmarks/throughput.py",
        "date": "today",
        "total_minutes": 1.0,
        "notes": [],
        "machine": {"cpu": "cpu", "cores": 2, "python": "3", "versions": {}},
        "runs": runs,
        "summary": tp.summarize(runs, args),
    }
    tp.write_results(tmp_path / "t", data)
    assert "| **3.00x** [2.00, 5.00] (3) |" in (tmp_path / "t.md").read_text()
    assert json.loads((tmp_path / "t.json").read_text())["summary"]["ppo"]["64"]["ratio_npsco_over_sb3"] == 3


def test_throughput_results_are_written_atomically(load_script, tmp_path, monkeypatch):
    tp = load_script("benchmarks/throughput.py")
    (tmp_path / "t.json").write_text('{"old": 1}\n')

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tp, "markdown", lambda data: "new")
    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        tp.write_results(tmp_path / "t", {"new": 2})
    assert (tmp_path / "t.json").read_text() == '{"old": 1}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


# -------------------------------------------------------------------------------------------------- ppo_mujoco.py
def mujoco_bench(tmp_path: Path, seed: int) -> list[str]:
    return [
        sys.executable,
        str(REPO / "benchmarks" / "ppo_mujoco.py"),
        "--envs",
        "npsco/FourRewardMaze-v0",
        "--seeds",
        str(seed),
        "--steps",
        "2048",
        "--episodes",
        "2",
        "--results",
        str(tmp_path / "r.json"),
        "--runs",
        str(tmp_path / "runs"),
    ]


def test_ppo_mujoco_skips_a_run_that_another_process_is_training(load_script, tmp_path):
    pm = load_script("benchmarks/ppo_mujoco.py")
    lock = tmp_path / "runs" / "npsco" / "FourRewardMaze-v0-seed0.lock"
    with pm.locked(lock):  # "another process" holds seed 0
        proc = subprocess.run(mujoco_bench(tmp_path, 0), capture_output=True, text=True, env=CHILD_ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "another process is training it; skipped" in proc.stdout
    assert not (tmp_path / "runs" / "npsco" / "FourRewardMaze-v0-seed0").exists()


def test_ppo_mujoco_merges_its_row_only_under_the_results_lock(load_script, tmp_path):
    pm = load_script("benchmarks/ppo_mujoco.py")
    results = tmp_path / "r.json"
    with pm.locked(tmp_path / "r.json.lock"):  # "another process" is in the middle of its read-modify-write
        proc = subprocess.Popen(
            mujoco_bench(tmp_path, 1), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=CHILD_ENV
        )
        policy = tmp_path / "runs" / "npsco" / "FourRewardMaze-v0-seed1" / "policy.safetensors"
        deadline = time.monotonic() + 300
        while not policy.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(1.0)  # evaluated and ready to write by now: it must wait for the lock
        assert not results.exists()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert [(r["env_id"], r["seed"]) for r in json.loads(results.read_text())["runs"]] == [
        ("npsco/FourRewardMaze-v0", 1)
    ]


# --------------------------------------------------------------------------------------------------- hopper_ipd.py
def test_hopper_ipd_uses_the_default_threshold_unless_told(load_script, monkeypatch):
    hi = load_script("benchmarks/hopper_ipd.py")
    calls = []
    monkeypatch.setattr(hi, "npsco", lambda args: calls.append(args) or 0)
    monkeypatch.setattr(hi, "summarize", lambda run, name: None)
    hi.main(["--novel", "1"])
    hi.main(["--novel", "1", "--r0-scale", "2"])
    assert "--r0-scale" not in calls[0]
    assert calls[1][calls[1].index("--r0-scale") + 1] == "2.0"


def test_hopper_ipd_summary_states_the_runs_settings_and_keeps_the_hand_written_analysis(load_script, tmp_path, capsys):
    hi = load_script("benchmarks/hopper_ipd.py")
    refs = []
    for seed in (0, 1):
        refs.append(tmp_path / f"ref{seed}")
        assert (
            npsco(
                [
                    "train",
                    "--seed",
                    str(seed),
                    "--steps",
                    "2048",
                    "--set",
                    "eval_every=0",
                    "--no-progress",
                    "--no-tensorboard",
                    "--out",
                    str(refs[-1]),
                ]
            )
            == 0
        )
    run = tmp_path / "pop"
    assert (
        npsco(
            [
                "population",
                "--ref-checkpoints",
                *map(str, refs),
                "--novel",
                "1",
                "--steps",
                "1024",
                "--set",
                "num_steps=32",
                "--r0-scale",
                "0.75",
                "--no-progress",
                "--out",
                str(run),
            ]
        )
        == 0
    )
    results = tmp_path / "results"
    results.mkdir()
    (results / "mine.md").write_text("# old generated part\n\nold table\n\n## What this shows (by hand)\n\nKeep me.\n")
    hi.summarize(str(run), "mine", results)
    text = (results / "mine.md").read_text()
    assert "old table" not in text and text.endswith("## What this shows (by hand)\n\nKeep me.\n")
    assert "(2,048 steps)" in text and "1,024 steps, t_S = 3, instant rule, r0 = 0.75 x" in text
    assert "--r0-scale 0.75" in text and (results / "mine" / "evaluation.csv").exists()


# ------------------------------------------------------------------------------------------------ ipd_threshold.py
def test_ipd_threshold_statistics_pool_the_replicates_and_stratify_the_ci_by_replicate(load_script):
    it = load_script("benchmarks/ipd_threshold.py")
    rows = [
        {
            "replicate": rep,
            "task": "Hopper-v5",
            "candidate": "sample",
            "ret": ret,
            "ref_median": 100.0,
            "nearest_over_r0": near,
            "meets": ret >= 80 and near >= 1,
        }
        for rep, ret, near in [("dev", 50, 1.2), ("dev", 90, 1.1), ("confirm-a", 100, 0.9), ("confirm-a", 120, 1.3)]
    ] + [
        {
            "replicate": "dev",
            "task": "Hopper-v5",
            "candidate": "paper",
            "ret": 1,
            "ref_median": 100.0,
            "nearest_over_r0": 0.5,
            "meets": False,
        }
    ]  # another candidate: left out
    lines = it.confirmation_statistics(rows, "sample")
    row = next(line for line in lines if line.startswith("| Hopper-v5"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:4] == ["Hopper-v5", "dev, confirm-a", "4", "2"]
    mean, std = np.mean([0.5, 0.9, 1.0, 1.2]), np.std([0.5, 0.9, 1.0, 1.2])
    strata = stratified_bootstrap_ci({"dev": [0.5, 0.9], "confirm-a": [1.0, 1.2]}, iqm, seed=0)
    assert cells[4] == f"{mean:.2f} +- {std:.2f}, IQM {strata.point:.2f} [{strata.low:.2f}, {strata.high:.2f}]"
    pooled = bootstrap_ci(np.array([0.5, 0.9, 1.0, 1.2]), iqm, seed=0)
    assert f"[{pooled[0]:.2f}, {pooled[1]:.2f}]" not in cells[4]  # the replicates are strata, not one pool
    assert not any(line.startswith("| Walker2d-v5") for line in lines)


def test_ipd_cuts_profiles_each_policy_and_counts_the_trapped_ones(load_script, tmp_path):
    ic = load_script("benchmarks/ipd_cuts.py")
    run = tmp_path / "ipd"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"ppo": {"env_id": "Hopper-v5"}}))

    def row(step: int, first: float, length: float) -> dict:
        return {
            "global_step": step,
            "ipd/terminated_frac": 1.0,
            "ipd/first_check_frac": first,
            "charts/episodic_length": length,
            "charts/episodic_return": length * 2,
            "novelty/episode_mean": 0.5,
            "novelty/r0": 1.5,
        }

    for name, last_first in (("k0", 1.0), ("k1", 0.5)):
        log = run / "novel" / "ipd" / name / "metrics.jsonl"
        log.parent.mkdir(parents=True)
        rows = [row(i * 100, 1.0, 21.0) for i in range(49)] + [{"global_step": 4900}, row(5000, last_first, 40.0)]
        log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    snaps = ic.snapshots(ic.read_metrics(run / "novel" / "ipd" / "k0" / "metrics.jsonl"))
    assert len(snaps) == 50 and [s.step for s in ic.at_fractions(snaps)] == [100, 500, 2500, 5000]
    assert ic.trapped(snaps) and not ic.trapped([*snaps[:-1], dataclasses.replace(snaps[-1], first_check=0.9)])
    text = ic.report([run])
    assert "| Hopper-v5 ipd | 1 of 2 |" in text
    assert "| Hopper-v5 | ipd/k1 | 100% | 1.00 | 0.50 | 40 | 80 | 0.50 / 1.50 |" in text
    with pytest.raises(ValueError, match="no IPD iterations"):
        ic.at_fractions([])


# ------------------------------------------------------------------------------------------------------ maze_ipd.py
def test_maze_ipd_measures_goals_and_novelty_on_its_random_start_episodes(load_script, tmp_path, monkeypatch):
    mi = load_script("benchmarks/maze_ipd.py")
    runs, results = tmp_path / "runs", tmp_path / "maze"
    args = ["--refs", "2", "--novel", "2", "--steps", "2048", "--episodes", "12", "--set", "eval_every=0"]
    monkeypatch.setattr(sys, "argv", ["maze_ipd.py", *args, "--runs", str(runs), "--results", str(results)])
    mi.main()
    stages = json.loads(results.with_suffix(".json").read_text())["stages"]
    chain = stages["ipd-r0x1"]["policies"]
    policies = {m.name: load_policy(m.checkpoint_in(runs / "ipd-r0x1")) for m in load_run(runs / "ipd-r0x1").members}
    for p in stages["ppo"]["policies"] + chain:
        episodes = run_episodes(policies[p["name"]], 12, seed=mi.MEASURE_SEED)  # the episodes it is measured on
        assert p["goal_fractions"]["none"] == pytest.approx(np.mean(episodes.goals < 0))
        assert p["return_mean"] == pytest.approx(episodes.returns.mean())
        assert p["right_start_trajectory"][0] == list(FIG2_START)
        assert len(p["right_start_trajectory"]) == p["right_start_length"] + 1
    for p in chain:  # novelty: the distance D(p, j) to the nearest policy j it had to avoid, on its own states
        own = policies[p["name"]]
        states = np.concatenate(run_episodes(own, 12, seed=mi.MEASURE_SEED, record_states=True).states)
        distance = {
            j: policy_distance(own.mean_action(states), policies[j].mean_action(states)) for j in p["references"]
        }
        assert p["references"] == ["ref0", "ref1"] + [q["name"] for q in chain][: chain.index(p)]
        assert p["nearest"] == min(distance, key=distance.get)
        assert p["novelty"] == pytest.approx(min(distance.values()), rel=1e-5)
        assert p["novelty_over_r0"] == pytest.approx(p["novelty"] / p["threshold"])


# ------------------------------------------------------------------------------------------------ benchmarks/results
RESULTS = REPO / "benchmarks" / "results"
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_results_are_one_folder_per_study_each_with_a_readme_listed_in_the_index():
    loose = sorted(p.name for p in RESULTS.iterdir() if p.is_file() and p.name != "README.md")
    assert not loose, f"results files outside a study folder: {loose}"
    studies = sorted(p.name for p in RESULTS.iterdir() if p.is_dir())
    assert [s for s in studies if not (RESULTS / s / "README.md").exists()] == []
    index = MD_LINK.findall((RESULTS / "README.md").read_text(encoding="utf-8"))
    assert [s for s in studies if f"{s}/README.md" not in index] == []


def test_every_relative_link_of_the_benchmark_pages_reaches_a_file():
    tracked = subprocess.run(["git", "ls-files", "-z", "benchmarks/*.md"], cwd=REPO, capture_output=True, text=True)
    pages = [REPO / name for name in tracked.stdout.split("\0") if name]
    assert RESULTS / "README.md" in pages
    broken = [
        f"{page.relative_to(REPO)}: {target}"
        for page in pages
        for target in MD_LINK.findall(page.read_text(encoding="utf-8"))
        if not re.match(r"[a-z]+:|#", target) and not (page.parent / target.split("#")[0]).exists()
    ]
    assert not broken, broken


# ---------------------------------------------------------------------------------------- fast_update_methods.py
def test_fast_update_methods_compares_both_backends_on_a_tiny_maze_run(load_script):
    fm = load_script("benchmarks/fast_update_methods.py")
    settings = fm.Settings(
        tasks=(MAZE_ID,), steps=64, seeds=2, ref_steps=64, eval_episodes=2, overrides=("num_envs=4", "num_steps=16")
    )
    results = fm.run(settings, log=lambda row: None)
    assert [(r["method"], r["relative_difference"] < 1e-4) for r in results["one_update"]] == [
        ("tnb", True),
        ("ctnb", True),
        ("cpo", True),
    ]
    assert results["one_update"][2]["cpo"]["numpy"]["cpo/case"] == results["one_update"][2]["cpo"]["torch"]["cpo/case"]
    pairs = {(r["method"], r["seed"], r["backend"]) for r in results["runs"]}
    assert pairs == {(m, s, b) for m in ("ppo", *fm.METHODS) for s in (1, 2) for b in fm.BACKENDS}
    assert [r["backend"] for r in results["runs"][:4]] == ["numpy", "torch", "torch", "numpy"]  # order alternates
    assert all(np.isfinite(r["return"]) and r["steps_per_s"] > 0 and r["steps"] == 64 for r in results["runs"])
    text = fm.render(settings, results, "python benchmarks/fast_update_methods.py", 0.1)
    assert "Command: `python benchmarks/fast_update_methods.py`" in text
    assert text.count(f"| {MAZE_ID} | ") == 3 + 4 + 4  # one update x 3 methods, returns and speed x (PPO + 3)


def test_fast_update_methods_keeps_the_hand_written_notes(load_script, tmp_path):
    fm = load_script("benchmarks/fast_update_methods.py")
    path = tmp_path / "results.md"
    assert fm.with_notes("# new\n", path) == "# new\n"  # no file yet
    path.write_text("# old\n| a |\n\n## Notes\n\nBy hand.\n")
    assert fm.with_notes("# new\n", path) == "# new\n\n## Notes\n\nBy hand.\n"


# ---------------------------------------------------------------------------------------------- grid_projection.py
def test_grid_projection_simulates_the_longest_path_first_schedule(load_script):
    gp = load_script("benchmarks/grid_projection.py")
    # a chain x1 -> x2 -> x3 and three independent jobs: 2 workers need 3 units, the chain alone is the critical path
    jobs = [gp.Task(y, 1.0) for y in ("y1", "y2", "y3")]
    jobs += [gp.Task("x1", 1.0), gp.Task("x2", 1.0, ["x1"]), gp.Task("x3", 1.0, ["x2"])]
    assert gp.longest_paths(jobs) == {"y1": 1.0, "y2": 1.0, "y3": 1.0, "x1": 3.0, "x2": 2.0, "x3": 1.0}
    assert gp.simulate(jobs, workers=2, alone_speedup=1.0) == (3.0, 6.0)
    # a machine twice as fast with one process: the chain's last job runs alone at double speed
    wall, busy = gp.simulate([gp.Task("a", 1.0), gp.Task("b", 1.0, ["a"]), gp.Task("c", 1.0)], 2, 2.0)
    assert (wall, busy) == (1.5, 2.5)


def test_grid_projection_plans_the_paper_grid_as_the_sweep_does(load_script):
    gp = load_script("benchmarks/grid_projection.py")
    ratios = {m: 0.5 for m in ("ipd", "wsr", "tnb", "ctnb", "cpo")}
    ppo = {"Hopper-v5": 100.0, "Walker2d-v5": 100.0, "HalfCheetah-v5": 100.0}
    jobs = gp.grid_jobs("benchmarks/paper_campaign/grid.toml", ppo, ratios, None, 10.0, 1_000_000)
    policies = [job for job in jobs if not job.name.endswith("threshold")]
    assert len(policies) == 105 and len(jobs) == 105 + 15  # a threshold per method population
    # the critical path: a reference (~100 s), a threshold, a chain of 5 policies at half PPO's speed (~200 s each)
    assert max(gp.longest_paths(jobs).values()) == pytest.approx(99.9424 + 10 + 5 * 199.8848)
    hop = next(job for job in jobs if job.name == "Hopper-v5/ipd/ipd-r0x2/k1")
    assert hop.after == ["Hopper-v5/ipd/ipd-r0x2/k0"]


def test_grid_projection_speedup_saves_the_same_seconds_in_every_policy(load_script, tmp_path):
    gp = load_script("benchmarks/grid_projection.py")
    grid = "benchmarks/paper_campaign/grid.toml"
    out = {}
    for speedup in ("1", "2"):
        path = tmp_path / f"{speedup}.json"
        assert (
            gp.main(
                [grid, "--machine", "here", "--ppo-seconds", "Hopper-v5=200", "--speedup", speedup, "--json", str(path)]
            )
            == 0
        )
        out[speedup] = json.loads(path.read_text())
    assert out["2"]["ppo_seconds"]["Hopper-v5"] == 100.0 and out["1"]["ppo_seconds"]["Hopper-v5"] == 200.0
    # every policy saves half its task's PPO time (at 999,424 of 1M steps), whatever its method: Hopper has 45
    # policies (5 references, 5 methods x 5, IPD at 3 more thresholds x 5), the others 30; thresholds save nothing
    count = {"Hopper-v5": 45, "Walker2d-v5": 30, "HalfCheetah-v5": 30}
    saved = sum(0.5 * 0.999424 * count[task] * seconds for task, seconds in out["1"]["ppo_seconds"].items())
    assert out["1"]["work_seconds"] - out["2"]["work_seconds"] == pytest.approx(saved)
    assert gp.policy_seconds(200.0, 0.5, 0.5) == 300.0  # a method at half PPO's speed: 400 s less 100 s saved
    with pytest.raises(SystemExit):
        gp.main([grid, "--speedup", "0"])
    # a task's own speed-up: only its policies save time (Hopper's 45 policies save half of 200 s at 999,424 steps)
    path = tmp_path / "hopper.json"
    assert gp.main([grid, "--ppo-seconds", "Hopper-v5=200", "--speedup", "Hopper-v5=2", "--json", str(path)]) == 0
    hopper = json.loads(path.read_text())
    assert hopper["speedup"] == {"Hopper-v5": 2.0, "Walker2d-v5": 1.0, "HalfCheetah-v5": 1.0}
    assert out["1"]["work_seconds"] - hopper["work_seconds"] == pytest.approx(0.5 * 0.999424 * 45 * 200)
    # a task's own value wins over a value for every task, in either order; a bad value is refused
    both = tmp_path / "both.json"
    assert gp.main([grid, "--speedup", "Hopper-v5=2", "--speedup", "1.5", "--json", str(both)]) == 0
    assert json.loads(both.read_text())["speedup"] == {"Hopper-v5": 2.0, "Walker2d-v5": 1.5, "HalfCheetah-v5": 1.5}
    for bad in ("Hopper-v5=x", "Ant-v5=2"):
        with pytest.raises(SystemExit):
            gp.main([grid, "--speedup", bad])


# ----------------------------------------------------------------------------------------------- envpool_default.py
def test_envpool_default_refuses_a_missing_baseline_command(load_script, tmp_path):
    ed = load_script("benchmarks/envpool_default.py")
    with pytest.raises(SystemExit):
        ed.main(["--backend", "auto", "--baseline-npsco", str(tmp_path / "no-npsco"), "--out", str(tmp_path / "x")])
    assert not (tmp_path / "x.json").exists()


# --------------------------------------------------------------------------------------------- device_grid_check.py
def test_device_grid_check_times_each_process_to_its_own_end(load_script, tmp_path):
    """Started long first, short second: the short one's time is its own, not the long one's (the probe's bias)."""
    dg = load_script("benchmarks/device_grid_check.py")
    sleep = [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))"]
    long, short = dg.wall_times([[*sleep, "1.5"], [*sleep, "0.1"]], [tmp_path / "a.log", tmp_path / "b.log"])
    assert long >= 1.5 and short < 1.0
    with pytest.raises(SystemExit, match="failed: see"):
        dg.wall_times([[sys.executable, "-c", "raise SystemExit(3)"]], [tmp_path / "c.log"])


def test_device_grid_check_probes_alone_and_at_once(load_script, tmp_path):
    dg = load_script("benchmarks/device_grid_check.py")
    assert dg.median([3.0, 1.0, 2.0]) == 2.0 and dg.median([4.0, 1.0, 2.0, 3.0]) == 2.5
    out = tmp_path / "check"
    assert dg.main(["--out", str(out), "--workers", "2", "--probe-steps", "2048", "--grid", ""]) == 0
    probe = json.loads((out / "probe.json").read_text())
    assert len(probe["alone"]) == 1 and len(probe["at_once"]) == 2
    ratio = probe["alone_steps_per_s"] / probe["at_once_median_steps_per_s"]
    assert probe["alone_speedup"] == pytest.approx(ratio, 1e-3)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["workers"] == 2 and "sweep" not in summary  # no grid given: no sweep
    with pytest.raises(SystemExit):
        dg.main(["--out", str(out), "--workers", "0"])


# ---------------------------------------------------------------------------------------------------- step_split.py
def test_step_split_parts_add_up_to_the_iterations_time(load_script, tmp_path):
    ss = load_script("benchmarks/step_split.py")
    out = tmp_path / "split"
    assert ss.main(["--env", "npsco/FourRewardMaze-v0", "--iterations", "2", "--warmup", "1", "--out", str(out)]) == 0
    row = json.loads(out.with_suffix(".json").read_text())["us_per_step"]["npsco/FourRewardMaze-v0"]
    assert set(row) == {*ss.PARTS, "total"}
    assert row["total"] == pytest.approx(sum(row[part] for part in ss.PARTS))
    assert row["env step"] > 0 and row["update"] > 0 and row["rollout, less the env step"] > 0
    assert "| npsco/FourRewardMaze-v0 |" in out.with_suffix(".md").read_text()


def test_step_split_repeats_report_each_parts_median_and_the_own_costs_ci(load_script, tmp_path):
    ss = load_script("benchmarks/step_split.py")
    row = {"env step": 8.0, "rollout, less the env step": 2.0, "advantages": 0.5, "update": 1.5}
    assert ss.own_cost(row) == 4.0 and ss.own_per_env_step(row) == 0.5
    assert ss.bootstrap_median_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    out, task = tmp_path / "split", "npsco/FourRewardMaze-v0"
    assert ss.main(["--env", task, "--iterations", "1", "--warmup", "1", "--repeats", "3", "--out", str(out)]) == 0
    record = json.loads(out.with_suffix(".json").read_text())
    runs, row = record["runs"][task], record["us_per_step"][task]
    assert record["repeats"] == 3 and len(runs) == 3
    for part in (*ss.PARTS, "total"):
        assert row[part] == pytest.approx(float(np.median([run[part] for run in runs])))
    line = next(line for line in out.with_suffix(".md").read_text().splitlines() if line.startswith(f"| {task} |"))
    assert line.count("|") == 11 and ", ".join(f"{ss.own_cost(run):.1f}" for run in runs) in line
    with pytest.raises(SystemExit):
        ss.main(["--env", task, "--repeats", "0", "--out", str(out)])


# ------------------------------------------------------------------------------------------------- step_split_ab.py
def test_step_split_ab_pairs_two_checkouts_and_reports_their_ratio(load_script, tmp_path):
    ab = load_script("benchmarks/step_split_ab.py")
    assert ab.own_cost({"env step": 9.0, "rollout, less the env step": 2.0, "advantages": 0.5, "update": 1.5}) == 4.0
    lo, hi = ab.bootstrap_median_ci(np.array([0.5, 0.5, 0.5]))
    assert lo == hi == 0.5
    lo, hi = ab.bootstrap_median_ci(np.array([0.4, 0.5, 0.6, 0.7]))
    assert 0.4 <= lo <= hi <= 0.7
    root = Path(ab.__file__).resolve().parents[1]  # this checkout, measured against itself
    out = tmp_path / "ab"
    argv = [str(root), str(root), "--repeats", "1", "--iterations", "1", "--env", "npsco/FourRewardMaze-v0"]
    assert ab.main([*argv, "--out", str(out)]) == 0
    task = json.loads(out.with_suffix(".json").read_text())["tasks"]["npsco/FourRewardMaze-v0"]
    assert len(task["ratio"]) == 1 and task["ratio"][0] == task["after_us"][0] / task["before_us"][0]
    parts = task["parts_median_us"]
    assert task["total_ratio"][0] == pytest.approx(parts["after"]["total"] / parts["before"]["total"])
    assert "| npsco/FourRewardMaze-v0 |" in out.with_suffix(".md").read_text()


# --------------------------------------------------------------------------------------------- device_grid_rescale.py
def test_device_grid_rescale_reads_the_records_critical_paths(load_script, tmp_path):
    rs = load_script("benchmarks/device_grid_rescale.py")
    paths = rs.critical_paths(rs.RECORD)
    walker = paths["Walker2d-v5"]
    assert walker["method"] == "ctnb" and walker["reference"] == pytest.approx(35.693)
    assert walker["chain"] == pytest.approx(52.173 + 39.772 + 42.678 + 36.482 + 38.033)
    assert rs.main(["--out", str(tmp_path / "r")]) == 0
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["wall_1m_min"] == pytest.approx(record["critical_1m_min"] * record["wall_factor"])
    # two A/B steps of the code, one after the other: their speed-ups multiply
    assert rs.main(["--ab", "step_split_ab.json", "--ab", "step_split_ab.json", "--out", str(tmp_path / "r2")]) == 0
    twice = json.loads((tmp_path / "r2.json").read_text())
    for task, row in twice["tasks"].items():
        assert row["ppo_speedup"] == pytest.approx(record["tasks"][task]["ppo_speedup"] ** 2)
    assert "step_split_ab.md`, commits" in (tmp_path / "r2.md").read_text()
    # a record with the whole step's paired ratios: the speed-up is 1 / their median, not a ratio of medians
    env_ab = json.loads((rs.RESULTS / "step_split_ab_env.json").read_text())
    walker = env_ab["tasks"]["Walker2d-v5"]
    assert rs.ppo_speedup(env_ab, "Walker2d-v5") == pytest.approx(1 / np.median(walker["total_ratio"]))
    parts = walker["parts_median_us"]
    assert rs.ppo_speedup(env_ab, "Walker2d-v5") != pytest.approx(parts["before"]["total"] / parts["after"]["total"])
    argv = [
        "--ab",
        "step_split_ab.json",
        "--ab",
        "step_split_ab_env.json",
        "--methods",
        "throughput_methods_0265f2a_6proc.json",
    ]
    assert rs.main([*argv, "--out", str(tmp_path / "r3")]) == 0
    chained = json.loads((tmp_path / "r3.json").read_text())
    assert chained["methods"] == "throughput_methods_0265f2a_6proc.json"
    speedup = record["tasks"]["Walker2d-v5"]["ppo_speedup"] * rs.ppo_speedup(env_ab, "Walker2d-v5")
    assert chained["tasks"]["Walker2d-v5"]["ppo_speedup"] == pytest.approx(speedup)


def test_device_grid_rescale_with_a_direct_ab_rescales_every_policy_by_its_methods_speedup(load_script, tmp_path):
    rs = load_script("benchmarks/device_grid_rescale.py")
    methods = ("ppo", "ipd", "wsr", "tnb", "ctnb", "cpo")
    tasks = ("Hopper-v5", "Walker2d-v5", "HalfCheetah-v5")

    def run(speedups: dict[tuple[str, str], float], name: str) -> dict:
        rows = [{"task": t, "method": m, "speedup": speedups.get((t, m), 1.0)} for t in tasks for m in methods]
        ab = tmp_path / f"{name}_ab.json"
        ab.write_text(json.dumps({"rows": rows, "revisions": {"before": "aaaaaaa", "after": "bbbbbbb"}}))
        assert rs.main(["--chain-ab", str(ab), "--out", str(tmp_path / name)]) == 0
        return json.loads((tmp_path / f"{name}.json").read_text())

    then = rs.critical_paths(rs.RECORD)
    same = run({}, "same")  # no speed-up: the record's own critical paths
    for task, row in same["tasks"].items():
        assert row["now_s"] == pytest.approx(then[task]["reference"] + then[task]["chain"])
        assert row["method"] == then[task]["method"]
    assert same["wall_1m_min"] == pytest.approx(
        json.loads((rs.RECORD / "summary.json").read_text())["sweep"]["wall_seconds"] * rs.SCALE / 60
    )
    # Walker2d's CTNB chain three times faster: its longest chain is now another method's, at that one's speed
    faster = run({("Walker2d-v5", "ctnb"): 3.0, ("Walker2d-v5", "ppo"): 2.0}, "faster")
    walker = faster["tasks"]["Walker2d-v5"]
    assert walker["method"] != "ctnb" and walker["method_speedup"] == 1.0
    assert walker["reference_now"] == pytest.approx(then["Walker2d-v5"]["reference"] / 2)
    manifest = json.loads((rs.RECORD / f"manifest_Walker2d-v5_{walker['method']}.json").read_text())
    chains: dict[str, float] = {}
    for m in manifest["members"]:
        if m["role"] == "novel":
            chains[m["chain"]] = chains.get(m["chain"], 0.0) + m["wall_seconds"]
    assert walker["chain_now"] == pytest.approx(max(chains.values()))
    assert "re-scaled policy by policy" in (tmp_path / "faster.md").read_text()
    assert faster["wall_factor"] == same["wall_factor"]  # the record's own wall / critical path, whatever the speed-ups
    assert faster["wall_1m_min"] == pytest.approx(faster["critical_1m_min"] * faster["wall_factor"])
    # Hopper's IPD: four chains (one per threshold); the longest, 1.5x's, counts, not their sum
    hopper_ipd = run({("Hopper-v5", m): 10.0 for m in methods if m != "ipd"}, "hopper_ipd")["tasks"]["Hopper-v5"]
    assert hopper_ipd["method"] == "ipd" and hopper_ipd["chain_now"] == pytest.approx(187.266)
    assert same["wall_1m_min_band"] is None  # no CIs in these rows
    # the committed record's band: its CIs' fast end below the projection, the slow end above
    assert rs.main(["--chain-ab", "chain_ab.json", "--out", str(tmp_path / "direct")]) == 0
    direct = json.loads((tmp_path / "direct.json").read_text())
    fast, slow = direct["wall_1m_min_band"]
    assert fast < direct["wall_1m_min"] < slow
    for extra in (["--ab", "step_split_ab.json"], ["--methods", "throughput_methods.json"]):
        with pytest.raises(SystemExit):
            rs.main(["--chain-ab", "x.json", *extra, "--out", str(tmp_path / "bad")])
    with pytest.raises(SystemExit, match="no speed-up for Walker2d-v5 cpo"):
        rs.rescaled_paths(rs.RECORD, {t: {m: 1.0 for m in methods if (t, m) != ("Walker2d-v5", "cpo")} for t in tasks})


def test_step_split_runs_judges_the_median_of_the_runs_own_costs(load_script, tmp_path):
    sr = load_script("benchmarks/step_split_runs.py")

    def record(name: str, own: list[float]) -> str:  # a step_split record whose repeats have these own costs
        part = {"env step": 90.0, "advantages": 0.0, "update": 30.0}
        rows = [{**part, "rollout, less the env step": x - 30.0} for x in own]
        (tmp_path / name).write_text(json.dumps({"runs": {"Hopper-v5": rows}}))
        return str(tmp_path / name)

    runs = [record("a.json", [45.0, 41.0, 50.0]), record("b.json", [38.0]), record("c.json", [39.0, 36.0])]
    assert sr.main([*runs, "--out", str(tmp_path / "s")]) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert [c["Hopper-v5"] for c in summary["own_us"]] == [45.0, 38.0, 37.5]
    assert summary["median_us"]["Hopper-v5"] == 38.0 and summary["met"] is True
    assert "| Hopper-v5 | " in (tmp_path / "s.md").read_text() and "45.0 (no)" in (tmp_path / "s.md").read_text()
    assert sr.main([*runs, "--goal", "37", "--out", str(tmp_path / "t")]) == 0
    assert json.loads((tmp_path / "t.json").read_text())["met"] is False


# -------------------------------------------------------------------------------- method_iterations.py, chain_ab.py
def test_method_iterations_avoids_the_references_then_the_chain_in_order(load_script, monkeypatch, tmp_path):
    mi = load_script("benchmarks/method_iterations.py")
    monkeypatch.chdir(REPO)
    paths = mi.reference_paths("Hopper-v5", "ipd", 7)  # Hopper's IPD: the 1x-threshold chain
    assert [p.parent.name for p in paths] == ["ref0", "ref1", "ref2", "ref3", "ref4", "k0", "k1"]
    assert paths[5].parent.parent.name == "ipd-r0x1"
    assert mi.reference_paths("Walker2d-v5", "ctnb", 6)[5].parent.parent.name == "ctnb"
    with pytest.raises(ValueError, match="--refs must be 0 to 10"):
        mi.reference_paths("Hopper-v5", "ctnb", 11)
    out = tmp_path / "ctnb.json"
    argv = ["--env", "Hopper-v5", "--method", "ctnb", "--refs", "6", "--iterations", "1", "--out", str(out)]
    assert mi.main(argv) == 0
    record = json.loads(out.read_text())
    assert record["refs"] == 6 and len(record["iteration_seconds"]) == 1 and record["steps_per_iteration"] == 2048
    assert record["median"] == record["iteration_seconds"][0] > 0
    assert Path(record["software"]["npsco"]) == REPO / "src/npsco" and record["software"]["mujoco"]


def test_chain_ab_alternates_the_checkouts_with_one_seed_per_repeat_and_pairs_them(load_script, tmp_path, monkeypatch):
    ab = load_script("benchmarks/chain_ab.py")
    before, after = tmp_path / "before", tmp_path / "after"
    for checkout in (before, after):
        (checkout / ".venv/bin").mkdir(parents=True)
        (checkout / ".venv/bin/python").touch()
    calls = []

    def fake_run(checkout, task, method, refs, iterations, seed, out):
        calls.append((checkout.name, seed))
        seconds = (2.0 if checkout == before else 1.0) * seed  # after is twice as fast, whatever the seed
        software = {"npsco": str(checkout / "src/npsco"), "gymnasium": "1.4.0"}
        return {"median": seconds, "iteration_seconds": [seconds], "seed": seed, "software": software}

    monkeypatch.setattr(ab, "run_once", fake_run)
    monkeypatch.setattr(ab, "revision", lambda checkout: checkout.name)
    out = tmp_path / "ab"
    argv = [str(before), str(after), "--repeats", "3", "--env", "Hopper-v5", "--method", "ppo", "--out", str(out)]
    assert ab.main(argv) == 0
    assert calls == [("before", 1), ("after", 1), ("after", 2), ("before", 2), ("before", 3), ("after", 3)]
    record = json.loads(out.with_suffix(".json").read_text())
    (row,) = record["rows"]
    assert row["ratios"] == [0.5, 0.5, 0.5] and row["speedup"] == pytest.approx(2.0)
    assert [(r["repeat"], r["checkout"], r["seed"]) for r in record["runs"][:2]] == [(1, "before", 1), (1, "after", 1)]

    def other_library(checkout, *args):  # the after checkout on another Gymnasium
        run = fake_run(checkout, *args)
        run["software"]["gymnasium"] = "1.3.0" if checkout == after else "1.4.0"
        return run

    monkeypatch.setattr(ab, "run_once", other_library)
    with pytest.raises(SystemExit, match="different libraries"):
        ab.main(argv)

    def same_npsco(checkout, *args):  # both import the before checkout's npsco (a PYTHONPATH, say)
        run = fake_run(checkout, *args)
        run["software"]["npsco"] = str(before / "src/npsco")
        return run

    monkeypatch.setattr(ab, "run_once", same_npsco)
    with pytest.raises(SystemExit, match="imported npsco from"):
        ab.main(argv)


def test_chain_ab_pairs_two_checkouts_per_method(load_script, tmp_path):
    ab = load_script("benchmarks/chain_ab.py")
    assert ab.record_r0("Walker2d-v5") == pytest.approx(1.1017833708637323)
    root = Path(ab.__file__).resolve().parents[1]  # this checkout, measured against itself
    out = tmp_path / "ab"
    argv = [str(root), str(root), "--repeats", "1", "--iterations", "1", "--env", "Hopper-v5", "--method", "ppo"]
    assert ab.main([*argv, "--out", str(out)]) == 0
    record = json.loads(out.with_suffix(".json").read_text())
    (row,) = record["rows"]
    pair = record["seconds"]["Hopper-v5"]["ppo"]
    assert row["ratio"] == pytest.approx(pair["after"][0] / pair["before"][0])
    assert row["speedup"] == pytest.approx(1 / row["ratio"])
    assert "| Hopper-v5 | ppo |" in out.with_suffix(".md").read_text()


# ------------------------------------------------------------------------------------- novel_everywhere/measure.py
def test_novel_everywhere_counts_first_and_kept_candidates(load_script, tmp_path):
    me = load_script("benchmarks/novel_everywhere/measure.py")

    def slot(name, verdicts, kept):
        cands = [{"index": i, "status": "done", "meets": v, "kept": i == kept} for i, v in enumerate(verdicts)]
        return {"name": name, "role": "novel", "candidates": cands}

    def run(seed, members):  # a population run of the maze (its manifest names the task by its full id)
        folder = tmp_path / "FourRewardMaze-v0" / f"lagr-state-s{seed}"
        folder.mkdir(parents=True)
        members = [{"name": "ref0", "role": "reference", "candidates": []}, *members]
        (folder / "manifest.json").write_text(json.dumps({"env_id": "npsco/FourRewardMaze-v0", "members": members}))
        return folder

    one = run(1, [slot("lagrangian/k0", [True], 0), slot("lagrangian/k1", [False, True], 1)])
    two = run(2, [slot("lagrangian/k0", [False, False, False], 2)])
    slots = me.candidate_slots([one, two])
    assert [(x["task"], x["name"], x["trained"], x["kept"], x["first_meets"], x["kept_meets"]) for x in slots] == [
        ("FourRewardMaze-v0", "lagrangian/k0", 1, 0, True, True),
        ("FourRewardMaze-v0", "lagrangian/k1", 2, 1, False, True),
        ("FourRewardMaze-v0", "lagrangian/k0", 3, 2, False, False),
    ]
    rows = [  # the protocol's measurement of the kept policies, as the evaluation names them
        {"task": "FourRewardMaze-v0", "setting": "lagr-state", "run": str(r), "name": n, "meets": m}
        for r, n, m in [(one, "lagrangian/k0", True), (one, "lagrangian/k1", False), (two, "lagrangian/k0", True)]
    ]
    text = "\n".join(me.candidates_section(slots, rows))
    # two runs of one setting: each slot's verdict is its own run's (not the last run's of the same slot name)
    assert "| FourRewardMaze-v0 | lagr-state | 3 | 6 | 1 of 3 | 2 of 3 | 2 of 3 |" in text
    assert "| FourRewardMaze-v0 | lagr-state | lagr-state-s1 | lagrangian/k1 | 2 | 1 | no | yes | no |" in text
    assert "| FourRewardMaze-v0 | lagr-state | lagr-state-s2 | lagrangian/k0 | 3 | 2 | no | no | yes |" in text


def test_novel_everywhere_state_section_counts_policies_past_the_state_threshold(load_script):
    me = load_script("benchmarks/novel_everywhere/measure.py")
    base = {"task": "Hopper-v5", "setting": "lagr-state", "run": "x/lagr-state-s1"}
    rows = [
        {**base, "name": "k0", "return_ratio": 0.9, "state_ratio": 1.2},  # would meet
        {**base, "name": "k1", "return_ratio": 0.7, "state_ratio": 1.5},  # too poor
        {**base, "name": "k2", "return_ratio": 1.1, "state_ratio": 0.95},  # too close
        {**base, "setting": "lagr", "name": "k0", "return_ratio": 1.0, "state_ratio": None},  # no state threshold
    ]
    text = "\n".join(me.state_section(rows))
    assert "| Hopper-v5 | lagr-state | 3 |" in text and "| 1 of 3 |" in text and "| lagr |" not in text
    assert me.state_section([rows[-1]]) == []


def test_measure_says_which_criterion_each_policy_missed_and_how_it_moves(load_script):
    me = load_script("benchmarks/novel_everywhere/measure.py")
    assert [
        me.missed_on({"return_ratio": r, "nearest_ratio": n})
        for r, n in ((0.8, 1.0), (0.79, 1.2), (1.0, 0.99), (0.5, 0.5))
    ] == ["", "return", "distance", "both"]
    assert me.stick({"yardstick": 3, "yardstick_of": 5}) == "3 of 5 refs" and me.stick({"yardstick": None}) == "-"
    row = {
        "task": "Hopper-v5",
        "setting": "lagr-m20",
        "run": "x/lagr-m20-s1",
        "name": "lagrangian/k0",
        "forward_speed": 2.5,
        "step_frequency": 1.7,
        "height_mean": 1.2,
        "height_std": 0.1,
        "pitch_mean": 0.05,
        "pitch_std": 0.09,
        "duty": {"foot_geom": 0.35},
    }
    text = "\n".join(me.descriptor_section([row, {**row, "name": "maze", "forward_speed": None}]))
    assert (
        "| Hopper-v5 | lagr-m20 | lagr-m20-s1/lagrangian/k0 | 2.50 | 1.7 | 1.20 +- 0.10 | +0.05 +- 0.09 "
        "| foot_geom 35% |"
        in text
        and "maze" not in text
    )
    assert me.descriptor_section([{**row, "forward_speed": None}]) == []


# ------------------------------------------------------------------------------------------------------ eval_steps.py
def test_eval_steps_counts_the_steps_of_both_backends(load_script):
    es = load_script("benchmarks/eval_steps.py")
    path = sorted(es.SWEEP.glob("ipd/novel/ipd-r0x2/k0/policy.safetensors"))[0]  # short, unequal episodes
    auto, auto_steps, _ = es.evaluate(path, "auto", 4)
    sync, sync_steps, _ = es.evaluate(path, "sync", 4)
    np.testing.assert_array_equal(auto, sync)
    assert auto_steps < sync_steps
    assert es.episodes.make_vector_env is es.make_vector_env  # the evaluation's env maker is given back


# ------------------------------------------------------------------------------------- good_and_different/frontier.py
def test_frontier_counts_which_criterion_each_miss_missed_and_draws_a_panel_per_task(load_script, tmp_path):
    fr = load_script("benchmarks/good_and_different/frontier.py")
    rows = [
        {"task": "Hopper-v5", "setting": "lagr-ret", "return_ratio": 1.0, "nearest_ratio": 1.1},  # meets
        {"task": "Hopper-v5", "setting": "lagr-ret", "return_ratio": 0.5, "nearest_ratio": 1.2},  # return
        {"task": "Hopper-v5", "setting": "lagr-ret", "return_ratio": 0.9, "nearest_ratio": 0.9},  # distance
        {"task": "Walker2d-v5", "setting": "lagr-ret", "return_ratio": 0.1, "nearest_ratio": 0.5},  # both
        {"task": "Walker2d-v5", "setting": "x", "return_ratio": None, "nearest_ratio": 0.5},  # not measured: left out
    ]
    (tmp_path / "rows.json").write_text(json.dumps({"rows": rows}))
    loaded = fr.load([f"screen={tmp_path / 'rows.json'}"])
    assert len(loaded) == 4 and loaded[0]["group"] == "screen: lagr-ret"
    assert fr.chain_or_setting({"setting": "ipd", "name": "ipd-r0x0.5/k0"}) == "ipd-r0x0.5"
    assert fr.chain_or_setting({"setting": "lagr-ret", "name": "lagrangian/k0"}) == "lagr-ret"
    text = fr.counts(loaded)
    assert "| screen: lagr-ret | Hopper-v5 | 3 | 1 | 1 | 1 | 0 |" in text
    assert "| screen: lagr-ret | Walker2d-v5 | 1 | 0 | 0 | 0 | 1 |" in text
    fig = fr.figure(loaded)
    assert [ax.get_title() for ax in fig.axes] == ["Hopper-v5", "Walker2d-v5"]
    with pytest.raises(SystemExit, match="LABEL=ROWS.json"):
        fr.load(["rows.json"])
    fr.main([f"screen={tmp_path / 'rows.json'}", "--out", str(tmp_path / "f.png"), "--md", str(tmp_path / "f.md")])
    assert (tmp_path / "f.png").stat().st_size > 0 and "![frontier](f.png)" in (tmp_path / "f.md").read_text()


def test_multipliers_reads_the_end_of_each_novel_policys_training(load_script, tmp_path):
    mu = load_script("benchmarks/good_and_different/multipliers.py")
    run = tmp_path / "Hopper-v5" / "lagr-ret-s1"
    members = [
        {"name": "ref0", "role": "reference", "path": "refs/ref0", "final_eval": {"return_mean": 1000.0}},
        {"name": "ref1", "role": "reference", "path": "refs/ref1", "final_eval": {"return_mean": 3000.0}},
        {"name": "lagrangian/k0", "role": "novel", "path": "novel/lagrangian/k0"},
    ]
    (run / "novel/lagrangian/k0").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"env_id": "Hopper-v5", "members": members}))
    rows = [
        {
            "global_step": 2048 * (i + 1),
            "lagrangian/novelty_weight": 1 / (1 + i),
            "lagrangian/return_multiplier": float(i),
            "charts/episodic_return": 100.0 * i,
        }
        for i in range(30)
    ]
    (run / "novel/lagrangian/k0/metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (row,) = mu.summary(run)
    assert row["reference_median"] == 2000.0 and row["return_multiplier_max"] == 29.0
    assert row["rollout_return"] == pytest.approx(100.0 * np.mean(range(10, 30)))  # the last 20 iterations
    assert row["novelty_weight"] == pytest.approx(np.mean([1 / (1 + i) for i in range(10, 30)]))
    assert "| Hopper-v5 | lagr-ret-s1 | lagrangian/k0 |" in mu.table([row]) and "| 29.0 |" in mu.table([row])


# --------------------------------------------------------------------------------------------- rowwise_remeasure.py
def test_rowwise_remeasure_counts_changed_returns_and_flipped_verdicts(load_script, tmp_path):
    rr = load_script("benchmarks/rowwise_remeasure.py")
    header = "task,group,return_mean,checkpoint\n"
    (tmp_path / "old.csv").write_text(header + "T,ppo,100.0,a\nT,ppo,200.0,b\nT,ipd,50.0,c\n")
    (tmp_path / "new.csv").write_text(header + "T,ppo,100.0,a\nT,ppo,220.0,b\nT,ipd,50.0,c\n")

    def rows(meets: list[bool], nearest: list[float]) -> dict:
        return {
            "rows": [
                {
                    "run": "r",
                    "name": f"k{i}",
                    "task": "T",
                    "setting": "s",
                    "seed": i,
                    "meets": m,
                    "return_ratio": 1.0,
                    "nearest_ratio": n,
                }
                for i, (m, n) in enumerate(zip(meets, nearest, strict=True))
            ]
        }

    (tmp_path / "old.json").write_text(json.dumps(rows([True, False], [1.2, 0.99])))
    (tmp_path / "new.json").write_text(json.dumps(rows([True, True], [1.2, 1.01])))
    out = tmp_path / "compare"
    args = ["--report", "campaign", str(tmp_path / "old.csv"), str(tmp_path / "new.csv")]
    args += ["--measure", "study", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--out", str(out)]
    assert rr.main(args) == 0
    text = out.with_suffix(".md").read_text()
    assert "| T | ppo | 2 | 150.0 | 160.0 | +20.0 (+10.0%) | 1 |" in text
    assert "| T | ipd | 1 | 50.0 | 50.0 | +0.0 (+0.0%) | 0 |" in text
    assert "Over the 3 policies: 1 returns changed" in text
    assert "| T | 2 | 1 | 2 | +0.000 | +0.020 |" in text
    assert "- T s k1 (seed 1): return / median 1.000 -> 1.000, nearest / r0 0.990 -> 1.010: misses -> meets" in text
    assert json.loads(out.with_suffix(".json").read_text())["sections"][1]["flips"] == 1
    (tmp_path / "fewer.json").write_text(json.dumps(rows([True], [1.2])))
    with pytest.raises(SystemExit, match="do not hold the same policies"):
        rr.main(["--measure", "x", str(tmp_path / "old.json"), str(tmp_path / "fewer.json"), "--out", str(out)])


# --------------------------------------------------------------------------------------------- env_step_parts.py
def test_env_step_parts_times_both_outcomes_and_both_masked_resets(load_script, tmp_path):
    es = load_script("benchmarks/env_step_parts.py")
    out = tmp_path / "parts"
    assert es.main(["--calls", "20", "--repeats", "2", "--out", str(out)]) == 0
    record = json.loads(out.with_suffix(".json").read_text())
    assert set(record["outcome_us"]) == set(es.TASKS)
    for row in record["outcome_us"].values():
        assert row["numpy"] > 0 and row["compiled"] > 0
    assert record["masked_reset_us"]["gymnasium"] > 0 and record["masked_reset_us"]["lean"] > 0
    assert "| Walker2d-v5 |" in out.with_suffix(".md").read_text()
    with pytest.raises(SystemExit):
        es.main(["--calls", "0", "--out", str(out)])
