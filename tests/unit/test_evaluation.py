"""Evaluation of population runs: success rate and relative novelty on hand-made runs (policies with constant actions,
so every distance is known exactly; hand-made training curves), the tidy CSV/JSON, reuse, several runs sharing
references, and the pure helpers of the report."""

import csv
import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

import npsco.stats  # noqa: F401  (scipy is imported at collection, so that no test pays for it)
from npsco.cli import main
from npsco.envs.maze import goal_name
from npsco.episodes import run_episodes
from npsco.errors import NpscoError
from npsco.evaluation.evaluate import cached_evaluation, combine, evaluate_run, evaluate_runs
from npsco.evaluation.measure import yardstick
from npsco.evaluation.rows import CSV_COLUMNS, EvaluationRow, group_of, primary_scale, rows_to_csv, separate_scales
from npsco.evaluation.scoring import score_rows, statistics
from npsco.manifest import Chain
from npsco.report.data import fig2_panels, fig3_data, fig4_data
from npsco.report.provenance import population_command
from npsco.selection import meets_criteria
from npsco.tasks import MAZE_ID

EPISODES = 6
SQRT_1_25 = float(np.sqrt(1.25))


def member(name, role, path, action, curve=(), chain=None, method="ipd", seed=0, threshold=None):
    return {
        "name": name,
        "role": role,
        "method": "ppo" if role == "reference" else method,
        "seed": seed,
        "path": path,
        "chain": chain,
        "index": None,
        "threshold": threshold,
        "references": [],
        "status": "done",
        "final_eval": None,
        "eval_curve": [list(p) for p in curve],
        "wall_seconds": 1.0,
        "_action": action,
    }


def write_run(root: Path, members: list[dict], const, r0_scales=(1.0,), method="ipd", refs_from=None) -> Path:
    """A population run directory as `npsco population` writes it, with constant-action policies (`const`: the
    `maze_policies` fixture's); `refs_from`: the run whose references it borrows."""
    root.mkdir(parents=True, exist_ok=True)
    for m in members:
        action = m.pop("_action")
        if action is not None:
            const(action, method=m["method"]).save(root / m["path"] / "policy.safetensors")
    manifest = {
        "format": "npsco-population",
        "format_version": 1,
        "env_id": MAZE_ID,
        "method": method,
        "r0_default": 0.5,
        "members": members,
    }
    config = {
        "ppo": {"env_id": MAZE_ID, "max_episode_steps": 20, "total_timesteps": 2048},
        "method": {"method": method, "r0": None},
        "refs": 2,
        "novel": 1,
        "r0_scales": list(r0_scales),
        "refs_from": refs_from,
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "config.json").write_text(json.dumps(config))
    return root


@pytest.fixture
def run(tmp_path, maze_policies) -> Path:
    """refs act (-1, 0) and (-1, 0.5): D = 0.5 both ways. k0 acts (0, 1) and its curve reaches +50; k1 acts like
    ref0 and its curve never exceeds -5."""
    return write_run(
        tmp_path / "pop",
        [
            member("ref0", "reference", "refs/ref0", (-1.0, 0.0), curve=[(1024, 1.0)]),
            member("ref1", "reference", "refs/ref1", (-1.0, 0.5), seed=1, curve=[(1024, 1.0)]),
            member(
                "ipd/k0",
                "novel",
                "novel/ipd/k0",
                (0.0, 1.0),
                curve=[(1024, -5.0), (2048, 50.0)],
                chain="ipd",
                seed=1000,
                threshold=0.5,
            ),
            member(
                "ipd/k1",
                "novel",
                "novel/ipd/k1",
                (-1.0, 0.0),
                curve=[(1024, -5.0), (2048, -6.0)],
                chain="ipd",
                seed=1001,
                threshold=0.5,
            ),
        ],
        maze_policies.const,
    )


# ------------------------------------------------------------------------------------------ pure scoring rules
def erow(**fields) -> EvaluationRow:
    """An evaluation row with the given fields, the others of no concern to the test filled in."""
    base = dict(
        run="run",
        env=MAZE_ID,
        task="T",
        group="ppo",
        method="ppo",
        name="p",
        role="novel",
        seed=0,
        episodes=1,
        eval_seed=0,
        return_mean=0.0,
        return_std=0.0,
        return_min=0.0,
        return_max=0.0,
        length_mean=1.0,
        checkpoint="p.safetensors",
    )
    return EvaluationRow(**{**base, **fields})


def test_score_rows_success_by_median_of_reference_returns_and_relative_novelty():
    refs = [
        erow(role="reference", return_mean=r, eval_curve=[[1, 0.0]], novelty=n)
        for r, n in zip((1, 2, 3, 4, 5), (0.2, 0.2, 0.4, 0.4, 0.8), strict=True)
    ]  # the references' mean novelty: 0.4
    novel = [
        erow(role="novel", return_mean=0.0, eval_curve=[[1, 2.0], [2, 3.0]], novelty=0.8),  # reaches 3 exactly
        erow(role="novel", return_mean=9.0, eval_curve=[[1, 2.9], [2, 2.99]], novelty=0.2),  # never reaches 3
        erow(role="novel", return_mean=3.5, eval_curve=[], novelty=None),  # no curve: its return stands in
    ]
    scored = score_rows(refs + novel, ppo_mean_distance=0.8)
    assert [r.success_baseline for r in scored] == [3.0] * 8
    # the paper's: novel policies by their training curve; references by their evaluated (final) return, 3 of 5 >= 3
    assert [r.success for r in scored] == [False, False, True, True, True, True, False, True]
    # on the final policy: every policy by its evaluated return
    assert [r.success_final for r in scored] == [False, False, True, True, True, False, True, True]
    # the paper's relative novelty: / 0.4, the references' mean novelty (so theirs averages 1)
    assert [r.relative_novelty_paper for r in scored[:7]] == pytest.approx([0.5, 0.5, 1.0, 1.0, 2.0, 2.0, 0.5])
    assert np.mean([r.relative_novelty_paper for r in scored[:5]]) == pytest.approx(1.0)
    # / 0.8, the mean pairwise distance between the references
    assert [r.relative_novelty for r in scored[:7]] == pytest.approx([0.25, 0.25, 0.5, 0.5, 1.0, 1.0, 0.25])
    assert scored[7].relative_novelty is None and scored[7].relative_novelty_paper is None
    assert scored[5].best_training_eval == 3.0 and scored[7].best_training_eval is None
    assert novel[0].success is None and novel[0].success_baseline is None  # inputs untouched


def test_score_rows_the_papers_criteria_against_r0_default_or_the_own_threshold():
    refs = [erow(role="reference", return_mean=r) for r in (10.0, 20.0, 30.0)]  # median 20: 0.8 x 20 = 16
    novel = [
        erow(return_mean=16.0, nearest=0.5, threshold=0.25),  # both criteria exactly met
        erow(return_mean=15.9, nearest=0.9, threshold=0.25),  # return too low
        erow(return_mean=40.0, nearest=0.49, threshold=0.25),  # below r0_default, above its own 0.5x threshold
        erow(return_mean=40.0, nearest=None),  # no distance: not judged
    ]
    scored = score_rows(refs + novel, ppo_mean_distance=None, r0_default=0.5)[3:]
    assert [r.meets for r in scored] == [True, False, False, None]
    assert [r.return_ratio for r in scored] == pytest.approx([0.8, 0.795, 2.0, 2.0])
    assert [r.nearest_ratio for r in scored[:3]] == pytest.approx([1.0, 1.8, 0.98]) and scored[3].nearest_ratio is None
    own = score_rows(refs + novel, ppo_mean_distance=None, r0_default=None)[3:]  # an absolute r0: its own threshold
    assert [r.meets for r in own] == [True, False, True, None]
    assert meets_criteria(16.0, 20.0, 1.0, 1.0) and not meets_criteria(16.0, 20.0, 0.99, 1.0)


def test_score_rows_without_references_or_distance_leaves_blanks():
    scored = score_rows([erow(role="novel", return_mean=1.0, eval_curve=[[1, 1.0]], novelty=0.3)], None)
    assert scored[0].success is None and scored[0].success_final is None
    assert scored[0].relative_novelty is None and scored[0].relative_novelty_paper is None


def test_statistics_mean_std_iqm_and_success_rate_per_group():
    rows = [
        erow(
            group=g,
            task="T",
            return_mean=r,
            success=s,
            success_final=r >= 2.0,
            relative_novelty=n,
            relative_novelty_paper=2 * n,
            state_novelty=0.1,
            success_baseline=2.0,
        )
        for g, r, s, n in [
            ("ppo", 1.0, False, 1.0),
            ("ppo", 3.0, True, 1.0),
            ("ipd", 2.0, True, 2.0),
            ("ipd", 4.0, True, 3.0),
            ("ipd", 6.0, False, 4.0),
        ]
    ]
    stats = statistics(rows)
    by = {s["group"]: s for s in stats["per_task"]}
    assert [s["group"] for s in stats["per_task"]] == ["ppo", "ipd"]  # paper order
    assert by["ipd"]["return"]["mean"] == pytest.approx(4.0)
    assert by["ipd"]["return"]["std"] == pytest.approx(np.std([2.0, 4.0, 6.0]))
    assert by["ipd"]["success_rate"] == pytest.approx(2 / 3) and by["ppo"]["success_rate"] == 0.5
    assert by["ipd"]["success_rate_final"] == 1.0 and by["ppo"]["success_rate_final"] == 0.5
    assert by["ipd"]["relative_novelty"]["mean"] == pytest.approx(3.0)
    assert by["ipd"]["relative_novelty_paper"]["mean"] == pytest.approx(6.0)
    r = by["ipd"]["return"]
    assert r["iqm_ci_low"] <= r["iqm"] <= r["iqm_ci_high"]
    agg = {a["group"]: a for a in stats["aggregate"]}
    assert agg["ipd"]["normalized_return_iqm"] == pytest.approx(2.0)  # returns / baseline 2, IQM of 1, 2, 3


def test_yardstick_counts_the_references_nearer_to_their_nearest_other_reference():
    # D[i][j] on i's states; references 0, 1, 2 (leave-one-out nearest: 0.5, 0.3, 0.9), a novel policy 3
    d = np.array([[0, 0.5, 0.7, 9], [0.3, 0, 0.4, 9], [0.9, 1.0, 0, 9], [1, 1, 1, 0]])
    assert [yardstick(d, [0, 1, 2], x) for x in (0.2, 0.3, 0.6, 0.95)] == [0, 0, 2, 3]  # strictly below counts
    assert yardstick(d, [0, 1, 2], None) is None and yardstick(d, [0], 1.0) is None


# -------------------------------------------------------------------------------- through evaluate_run, exactly
def test_evaluate_run_puts_each_novel_policy_beside_the_references_leave_one_out_distances(run):
    manifest = json.loads((run / "manifest.json").read_text())
    for m in manifest["members"]:  # k0 avoids both references, k1 those and k0
        m["references"] = {"ipd/k0": ["ref0", "ref1"], "ipd/k1": ["ref0", "ref1", "ipd/k0"]}.get(m["name"], [])
    (run / "manifest.json").write_text(json.dumps(manifest))
    rows = {r["name"]: r for r in evaluate_run(run, episodes=EPISODES, seed=0, log=lambda _: None)["policies"]}
    # the references are 0.5 from each other; k0 is sqrt(1.25) from its nearest (ref1), k1 0 from ref0
    assert rows["ipd/k0"]["nearest"] == pytest.approx(SQRT_1_25)
    assert (rows["ipd/k0"]["yardstick"], rows["ipd/k0"]["yardstick_of"]) == (2, 2)
    assert rows["ipd/k1"]["yardstick"] == 0 and rows["ref0"]["yardstick"] is None


def test_evaluate_prints_each_novel_policys_verdict(run, capsys):
    manifest = json.loads((run / "manifest.json").read_text())
    for m in manifest["members"]:
        m["references"] = ["ref0", "ref1"] if m["role"] == "novel" else []
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main(["evaluate", str(run), "--episodes", str(EPISODES)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    k0, k1 = lines["ipd/k0"].split(), lines["ipd/k1"].split()
    # k0: return about 0 against the references' median (not >= 0.8 x it), 2.24 x r0 from its nearest reference
    assert k0[-6:] == [f"{SQRT_1_25 / 0.5:.2f}", "no", "2", "of", "2", "refs"]
    assert k1[-6:] == ["0.00", "no", "0", "of", "2", "refs"]


def test_evaluate_run_novelty_relative_novelty_and_success_on_a_hand_made_run(run):
    doc = evaluate_run(run, episodes=EPISODES, seed=0, log=lambda _: None)
    rows = {r["name"]: r for r in doc["policies"]}
    assert doc["ppo_mean_distance"] == pytest.approx(0.5)
    assert rows["ref0"]["novelty"] == pytest.approx(0.5) and rows["ref1"]["novelty"] == pytest.approx(0.5)
    assert rows["ipd/k0"]["novelty"] == pytest.approx(SQRT_1_25)  # nearest reference: ref1
    assert rows["ipd/k0"]["relative_novelty"] == pytest.approx(SQRT_1_25 / 0.5)
    assert rows["ipd/k1"]["novelty"] == pytest.approx(0.0) and rows["ipd/k1"]["relative_novelty"] == 0.0
    matrix = np.array(doc["action_distance_matrix"]["matrix"])
    assert matrix[2, 0] == pytest.approx(np.sqrt(2.0), abs=1e-5) and matrix[0, 1] == pytest.approx(0.5, abs=1e-5)

    ref_returns = [rows["ref0"]["return_mean"], rows["ref1"]["return_mean"]]
    baseline = float(np.median(ref_returns))
    assert rows["ipd/k0"]["success_baseline"] == pytest.approx(baseline)
    assert rows["ipd/k0"]["success"] is True and rows["ipd/k1"]["success"] is False  # curves: +50 vs <= -5
    assert [rows["ref0"]["success"], rows["ref1"]["success"]] == [r >= baseline for r in ref_returns]
    for r in rows.values():  # on the final policy: every one by its evaluated return
        assert r["success_final"] is (r["return_mean"] >= baseline)
    # two references at distance 0.5 from each other: their mean novelty is their mean distance
    assert rows["ipd/k0"]["relative_novelty_paper"] == pytest.approx(SQRT_1_25 / 0.5)

    assert rows["ipd/k1"]["state_novelty"] == pytest.approx(0.0)  # same states as ref0
    assert rows["ipd/k0"]["state_novelty"] > 0.5
    assert rows["ipd/k0"]["goal_from_right"] == "none" and rows["ref0"]["goal_from_right"] == "left"
    assert rows["ipd/k0"]["episodes"] == EPISODES and rows["ipd/k0"]["episode_seeds"] == list(range(EPISODES))
    assert sum(rows["ref0"][f"goal_{g}"] for g in ("top", "bottom", "left", "right", "none")) == pytest.approx(1.0)
    assert [s["group"] for s in doc["statistics"]["per_task"]] == ["ppo", "ipd"]
    ipd = doc["statistics"]["per_task"][1]
    assert ipd["success_rate"] == 0.5 and ipd["relative_novelty"]["mean"] == pytest.approx(SQRT_1_25)
    assert ipd["success_rate_final"] == np.mean([rows[k]["success_final"] for k in ("ipd/k0", "ipd/k1")])


def test_evaluate_cli_writes_tidy_csv_and_json_and_reuses_them(run, capsys):
    assert main(["evaluate", str(run), "--episodes", str(EPISODES)]) == 0
    out = capsys.readouterr().out
    assert "ipd" in out and "FourRewardMaze-v0" in out
    with open(run / "evaluation" / "evaluation.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0].keys()) == CSV_COLUMNS
    assert [r["name"] for r in table] == ["ref0", "ref1", "ipd/k0", "ipd/k1"]
    assert float(table[2]["relative_novelty"]) == pytest.approx(SQRT_1_25 / 0.5, abs=1e-5)
    assert [table[2]["success"], table[3]["success"]] == ["True", "False"]
    assert {r["success_final"] for r in table} <= {"True", "False"} and table[2]["relative_novelty_paper"]
    assert table[0]["threshold"] == "" and table[0]["role"] == "reference"
    doc = json.loads((run / "evaluation" / "evaluation.json").read_text())
    assert doc["settings"]["episodes"] == EPISODES and len(doc["state_diversity_matrix"]["matrix"]) == 4

    assert cached_evaluation(run, EPISODES, 0) is not None
    assert cached_evaluation(run, EPISODES + 1, 0) is None  # other settings: stale
    assert main(["evaluate", str(run), "--episodes", str(EPISODES)]) == 0
    assert "up to date" in capsys.readouterr().out
    (run / "manifest.json").write_text((run / "manifest.json").read_text() + " ")  # the run changed
    assert cached_evaluation(run, EPISODES, 0) is None


def test_several_runs_share_references_and_are_combined(run, tmp_path, maze_policies):
    ref_paths = [str((run / "refs" / r).resolve()) for r in ("ref0", "ref1")]
    other = write_run(
        tmp_path / "wsr",
        [
            member("ref0", "reference", ref_paths[0], None, curve=[(1024, 1.0)]),
            member("ref1", "reference", ref_paths[1], None, seed=1, curve=[(1024, 1.0)]),
            member("wsr/k0", "novel", "novel/wsr/k0", (0.0, -1.0), chain="wsr", method="wsr", seed=1000),
        ],
        maze_policies.const,
        method="wsr",
        refs_from=str(run),  # where its config.json says the references come from (npsco.paths)
    )
    docs = evaluate_runs([run, other], episodes=EPISODES, log=lambda _: None)
    assert (other / "evaluation" / "evaluation.csv").exists()
    assert docs[0]["policies"][0]["return_mean"] == docs[1]["policies"][0]["return_mean"]
    combined = combine(docs)
    assert [r["name"] for r in combined["policies"]] == ["ref0", "ref1", "ipd/k0", "ipd/k1", "wsr/k0"]
    assert [s["group"] for s in combined["statistics"]["per_task"]] == ["ppo", "wsr", "ipd"]
    wsr = next(r for r in combined["policies"] if r["name"] == "wsr/k0")
    assert wsr["novelty"] == pytest.approx(np.sqrt(2.0), abs=1e-5)
    assert rows_to_csv(combined["policies"]).count("\n") == 6


def test_evaluate_out_writes_one_combined_table(run, tmp_path, capsys):
    assert main(["evaluate", str(run), "--episodes", "3", "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "evaluation.csv").exists() and not (run / "evaluation").exists()


def test_evaluate_refuses_missing_and_invalid_run_directories(tmp_path, capsys):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text("{not json")
    assert main(["evaluate", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid JSON" in err
    with pytest.raises(NpscoError, match="no such run directory"):
        evaluate_run(tmp_path / "nothing")
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "r")]) == 2
    assert "nor a population run directory" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- labels and figures
def test_groups_and_chain_scales():
    assert group_of("reference", "ppo", None) == "ppo"
    assert group_of("novel", "ipd", Chain.parse("ipd")) == "ipd"
    assert group_of("novel", "ipd", Chain.parse("ipd-r0x1")) == "ipd"
    assert group_of("novel", "ipd", Chain.parse("ipd-r0x0.5")) == "ipd-r0x0.5"
    # the run's primary multiple (its first r0_scales entry) counts as the method
    assert group_of("novel", "ipd", Chain.parse("ipd-r0x0.5"), 0.5) == "ipd"
    assert group_of("novel", "ipd", Chain.parse("ipd-r0x1"), 0.5) == "ipd-r0x1"
    assert primary_scale({"r0_scales": [0.5, 1.0, 2.0]}) == 0.5
    assert primary_scale({"r0_scales": [1.0, 0.5]}) == 1.0
    assert primary_scale({}) == 0.5 and primary_scale({"method": {"method": "ipd"}}) == 0.5
    assert Chain.parse("ipd-r0x2").scale == 2.0 and Chain.parse("ipd").scale is None


def test_runs_combined_at_different_multiples_keep_their_chains_apart():
    """Each run's primary chain is labelled `ipd`; two runs of a task at 1x and 0.5x must not pool into one row."""

    def r(env, group, scale, role="novel", method="ipd"):
        return {"env": env, "group": group, "method": method, "role": role, "r0_scale": scale}

    rows = [
        r("Walker2d-v5", "ppo", None, role="reference", method="ppo"),
        r("Walker2d-v5", "ipd", 1.0),
        r("Walker2d-v5", "ipd", 0.5),
        r("Walker2d-v5", "ipd-r0x2", 2.0),
        r("Hopper-v5", "ipd", 0.5),  # one multiple on this task: stays the method
        r("Hopper-v5", "wsr", 1.0, method="wsr"),
    ]
    assert [x["group"] for x in separate_scales(rows)] == ["ppo", "ipd", "ipd-r0x0.5", "ipd-r0x2", "ipd", "wsr"]
    both_scaled = [r("Hopper-v5", "ipd", 0.5), r("Hopper-v5", "ipd", 2.0)]
    assert [x["group"] for x in separate_scales(both_scaled)] == ["ipd-r0x0.5", "ipd-r0x2"]


def row(name, group, role="novel", method="ipd", chain=None, r0_scale=None, ret=1.0, rel=1.0, traj=True):
    return {
        "name": name,
        "group": group,
        "role": role,
        "method": method,
        "chain": chain,
        "r0_scale": r0_scale,
        "task": "FourRewardMaze-v0",
        "return_mean": ret,
        "relative_novelty": None if rel is None else 2 * rel,  # another normalisation: Fig. 3 does not use it
        "relative_novelty_paper": rel,
        "fig2_trajectory": [[14.5, 8.0], [13.5, 8.0]] if traj else None,
        "goal_from_right": "left",
    }


def test_figure_data_from_rows():
    rows = [
        row("ref0", "ppo", role="reference", method="ppo", ret=9.0),
        row("ref1", "ppo", role="reference", method="ppo"),
        row("ipd/k0", "ipd", chain="ipd-r0x1", r0_scale=1.0, ret=8.0),
        row("ipd/k1", "ipd-r0x2", chain="ipd-r0x2", r0_scale=2.0, ret=5.0, rel=None),
    ]
    assert list(fig2_panels(rows)) == ["ppo", "ipd", "ipd-r0x2"]
    assert len(fig2_panels(rows)["ppo"]) == 2 and fig2_panels(rows)["ipd"][0].shape == (2, 2)
    assert list(fig3_data(rows)["FourRewardMaze-v0"]) == ["ppo", "ipd"]  # no relative novelty: left out
    assert fig3_data(rows)["FourRewardMaze-v0"]["ipd"][0].tolist() == [1.0]  # the paper's normalisation
    ablation = fig4_data(rows)["FourRewardMaze-v0"]
    assert list(ablation) == ["PPO", "1x", "2x"] and ablation["2x"].tolist() == [5.0]
    assert fig4_data(rows[:3]) == {}  # one threshold only: nothing to ablate


def test_population_command_reconstructs_the_flags(tmp_path):
    from npsco.methods.settings import MethodConfig
    from npsco.ppo.config import preset

    ppo = preset(MAZE_ID).to_dict() | {"total_timesteps": 2048, "learning_rate": 5e-4}
    method = MethodConfig.of("ipd", t_start=5).to_dict()
    config = {"ppo": ppo, "method": method, "refs": 2, "novel": 3, "r0_scales": [1.0, 2.0], "refs_from": "/x/ppo"}
    command = population_command(tmp_path / "run", config)
    assert command.startswith(
        f"npsco population --env {MAZE_ID} --method ipd --novel 3 --refs-from /x/ppo "
        "--r0-scale 1.0 2.0 --t-start 5 --steps 2048 --set learning_rate=0.0005 --out "
    )
    # a run made when tnb_rule's default was safe: IPD never reads it, TNB does
    config["method"]["tnb_rule"] = "safe"
    assert "tnb_rule" not in population_command(tmp_path / "run", config)
    config["method"]["method"] = "tnb"
    assert "--mset tnb_rule=safe" in population_command(tmp_path / "run", config)


def test_the_csv_columns_are_the_row_fields_but_the_per_episode_data():
    assert CSV_COLUMNS[:3] == ("run", "env", "task") and CSV_COLUMNS[-1] == "checkpoint"
    assert set(CSV_COLUMNS) == {f.name for f in dataclasses.fields(EvaluationRow)} - {
        "eval_curve",
        "returns",
        "episode_seeds",
        "fig2_trajectory",
        "duty",
    }
    mujoco = erow(name="k0", threshold=None, success=True, return_mean=1.0 / 3.0, returns=[1.0], eval_curve=[[1, 2.0]])
    assert "goal_top" not in mujoco.to_dict() and "fig2_trajectory" not in mujoco.to_dict()  # the maze's only
    maze = erow(name="k1", goal_top=0.5, goal_none=0.5, goal_from_right="none", fig2_trajectory=[[14.5, 8.0]])
    assert maze.to_dict()["goal_top"] == 0.5 and maze.to_dict()["success"] is None  # None: left out on the maze only
    assert EvaluationRow.from_dict(mujoco.to_dict()) == mujoco and EvaluationRow.from_dict(maze.to_dict()) == maze
    text = rows_to_csv([mujoco, maze.to_dict()])  # typed rows, or an evaluation document's dicts
    assert text.splitlines()[0] == ",".join(CSV_COLUMNS)
    first, second = csv.DictReader(text.splitlines())
    assert first["name"] == "k0" and first["threshold"] == "" and first["success"] == "True"
    assert first["return_mean"] == "0.333333" and first["goal_top"] == ""
    assert second["goal_top"] == "0.5" and second["goal_from_right"] == "none"


def test_docs_describe_every_csv_column():
    page = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text(encoding="utf-8")
    for column in CSV_COLUMNS:
        assert f"| `{column}` |" in page, f"column {column!r} is not described in docs/report.md"


def test_report_leaves_out_runs_with_nothing_trained_yet(run, tmp_path, maze_policies):
    from npsco.report.build import build_report

    empty = write_run(
        tmp_path / "cpo",
        [member("cpo/k0", "novel", "novel/cpo/k0", None, chain="cpo", method="cpo")],
        maze_policies.const,
        method="cpo",
    )
    manifest = json.loads((empty / "manifest.json").read_text())
    manifest["members"][0]["status"] = "training"
    (empty / "manifest.json").write_text(json.dumps(manifest))
    path = build_report([run, empty], tmp_path / "report", episodes=3, filmstrips=False, log=lambda _: None)
    text = path.read_text()
    assert re.search(r"Not yet trained \(left out\): `[^`]*/cpo`: every policy\.", text)
    assert "| ipd |" in text and (tmp_path / "report" / "figures" / "fig2_maze_trajectories.png").exists()
    with pytest.raises(NpscoError, match="nothing to report"):
        build_report([empty], tmp_path / "r2", filmstrips=False, log=lambda _: None)


def test_run_episodes_takes_one_start_per_episode(maze_policies):
    # always right at full speed: from (14.5, 8) the right goal; from (14.5, 2) and (14.5, 14) the wall, never a goal
    starts = [(14.5, 2.0), (14.5, 8.0), (14.5, 14.0)]
    res = run_episodes(maze_policies.const([1.0, 0.0]), len(starts), start=starts, max_episode_steps=20)
    assert [goal_name(int(g)) for g in res.goals] == ["none", "right", "none"]
    assert res.lengths.tolist() == [20, 1, 20]
