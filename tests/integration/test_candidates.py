"""Candidates per slot (`npsco population --candidates C`): each slot keeps the first candidate that meets the
criteria, else the closest (`npsco.selection.choose`), the same whether they train one after another or on a pool;
the manifest records every candidate, the kept one is the member, and evaluation and the report say so."""

from __future__ import annotations

import json

import numpy as np
import pytest

from npsco.cli import main
from npsco.errors import NpscoError
from npsco.evaluation import run_episodes
from npsco.evaluation.evaluate import evaluate_run
from npsco.methods.settings import MethodConfig
from npsco.novelty.states import StateDistance
from npsco.policy import load_policy
from npsco.population_config import PopulationConfig
from npsco.population_jobs import FINAL_EVAL_SEED
from npsco.ppo.config import preset
from npsco.selection import Trained, choose, meets_criteria
from npsco.tasks import MAZE_ID

ARGS = ["population", "--method", "lagrangian", "--refs", "2", "--novel", "2", "--candidates", "3"]
ARGS += ["--steps", "2048", "--set", "num_steps=32", "--set", "eval_every=0", "--no-progress"]


def slots(out) -> list[dict]:
    return [m for m in json.loads((out / "manifest.json").read_text())["members"] if m["role"] == "novel"]


@pytest.fixture(scope="module")
def inline(tmp_path_factory):
    out = tmp_path_factory.mktemp("candidates") / "inline"
    assert main([*ARGS, "--out", str(out)]) == 0
    return out


def test_each_slot_keeps_the_candidate_the_rule_chooses_and_records_the_others(inline):
    members = json.loads((inline / "manifest.json").read_text())["members"]
    median = sorted(m["final_eval"]["return_mean"] for m in members if m["role"] == "reference")
    baseline = sum(median) / 2  # the median of two references
    for slot in slots(inline):
        cands = slot["candidates"]
        assert cands and [c["index"] for c in cands] == list(range(len(cands)))
        assert all(c["status"] == "done" and c["nearest"] > 0 for c in cands)
        (kept,) = [c for c in cands if c["kept"]]
        trained = [Trained(c["index"], c["final_eval"]["return_mean"], c["nearest"]) for c in cands]
        assert choose(trained, 3, baseline, slot["threshold"]) == kept["index"]
        assert (slot["path"], slot["seed"], slot["final_eval"]) == (kept["path"], kept["seed"], kept["final_eval"])
        assert (inline / kept["path"] / "policy.safetensors").exists()
        assert all(c["seed"] == cands[0]["seed"] + 100_000 * c["index"] for c in cands)
        if not kept["meets"]:  # none met: every one was trained, the closest kept
            assert len(cands) == 3 and not any(c["meets"] for c in cands)


def test_a_pool_of_workers_keeps_the_same_candidates(inline, tmp_path):
    out = tmp_path / "pool"
    assert main([*ARGS, "--workers", "2", "--out", str(out)]) == 0
    kept = [(s["name"], s["path"], s["final_eval"]["return_mean"]) for s in slots(out)]
    assert kept == [(s["name"], s["path"], s["final_eval"]["return_mean"]) for s in slots(inline)]


def test_evaluation_and_report_say_which_candidate_each_policy_is(inline, tmp_path):
    doc = evaluate_run(inline, episodes=3, log=lambda line: None)
    novel = [r for r in doc["policies"] if r["role"] == "novel"]
    assert all(r["candidates"] >= 1 and r["candidate"] is not None and r["meets"] is not None for r in novel)
    assert (
        main(
            [
                "report",
                str(inline),
                "--out",
                str(tmp_path / "report"),
                "--episodes",
                "2",
                "--no-videos",
                "--no-filmstrips",
            ]
        )
        == 0
    )
    text = (tmp_path / "report" / "report.md").read_text()
    assert (
        "The paper's criteria, per novel policy" in text and " of 3 |" in text or " of 2 |" in text or " of 1 |" in text
    )


def test_candidates_out_of_range_or_for_plain_ppo_are_refused():
    for candidates, method, message in ((0, "lagrangian", "between 1 and 20"), (2, "ppo", "plain PPO seeds")):
        config = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of(method), candidates=candidates)
        with pytest.raises(NpscoError, match=message):
            config.validate()


def test_a_state_metric_candidate_is_measured_in_its_thresholds_metric(tmp_path):
    # its threshold is a distance between visited states: so is the distance the criteria compare with it
    out = tmp_path / "state"
    args = ["population", "--method", "lagrangian", "--mset", "metric=state", "--refs", "2", "--novel", "1"]
    args += ["--candidates", "2", *ARGS[9:], "--out", str(out)]
    assert main(args) == 0
    measure = StateDistance.from_dict(json.loads((out / "threshold.json").read_text())["state"])
    members = json.loads((out / "manifest.json").read_text())["members"]
    baseline = float(np.median([m["final_eval"]["return_mean"] for m in members if m["role"] == "reference"]))
    (slot,) = slots(out)
    for cand in slot["candidates"]:  # k0 avoids the references alone, whose embeddings threshold.json holds
        policy = load_policy(out / cand["path"] / "policy.safetensors")
        episodes = run_episodes(policy, cand["final_eval"]["episodes"], seed=FINAL_EVAL_SEED, record_states=True)
        expected = float(measure.distances(measure.mean_embedding(np.concatenate(episodes.states))).min())
        assert cand["nearest"] == pytest.approx(expected, rel=1e-9)
        assert cand["meets"] == meets_criteria(cand["final_eval"]["return_mean"], baseline, expected, slot["threshold"])
