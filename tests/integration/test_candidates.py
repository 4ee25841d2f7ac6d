"""Candidates per slot (`npsco population --candidates C`): each slot keeps the first candidate that meets the
criteria, else the closest (`npsco.selection.choose`), the same whether they train one after another or on a pool;
the manifest records every candidate, the kept one is the member, and evaluation and the report say so."""

from __future__ import annotations

import json

import numpy as np
import pytest

from npsco.cli import main
from npsco.episodes import run_episodes
from npsco.errors import NpscoError
from npsco.evaluation.evaluate import evaluate_run
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import ReferenceSet
from npsco.novelty.threshold import default_threshold
from npsco.options import PopulationOptions
from npsco.policy import load_policy
from npsco.population import Population
from npsco.population_config import PopulationConfig
from npsco.population_jobs import PopulationSnapshot
from npsco.ppo.config import preset
from npsco.seeds import FINAL_EVALUATION, MAX_SEED
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


def test_a_candidates_check_runs_on_its_own_episodes_when_given(tmp_path):
    # --candidate-episodes 3: the distance on the states of 3 episodes seeded as the final evaluation's (100 on the
    # maze, which the candidate's own final evaluation keeps)
    out = tmp_path / "few"
    args = ["population", "--method", "lagrangian", "--refs", "2", "--novel", "1", "--candidates", "2"]
    assert main([*args, "--candidate-episodes", "3", *ARGS[9:], "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["candidate_episodes"] == 3
    members = json.loads((out / "manifest.json").read_text())["members"]
    refs = [load_policy(out / m["path"] / "policy.safetensors") for m in members if m["role"] == "reference"]
    (slot,) = slots(out)
    for cand in slot["candidates"]:
        policy = load_policy(out / cand["path"] / "policy.safetensors")
        nearest = {}
        for episodes in (3, cand["final_eval"]["episodes"]):
            states = np.concatenate(run_episodes(policy, episodes, seed=FINAL_EVALUATION, record_states=True).states)
            per_state = ReferenceSet(refs, exact=True).distances(states, policy.mean_action(states))
            nearest[episodes] = per_state.mean(axis=0).min()
        assert cand["nearest"] == pytest.approx(nearest[3], rel=1e-9) and nearest[3] != nearest[100]
        assert cand["final_eval"]["episodes"] == 100


def test_candidates_out_of_range_or_for_plain_ppo_are_refused():
    for candidates, method, message in ((0, "lagrangian", "between 1 and 20"), (2, "ppo", "plain PPO seeds")):
        config = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of(method), candidates=candidates)
        with pytest.raises(NpscoError, match=message):
            config.validate()


def test_a_base_seed_its_candidates_would_push_past_the_max_is_refused_before_anything_is_written(tmp_path, capsys):
    # the largest seed the population trains: novel policy k1's candidate 2, S + 1000 + 1 + 2 x 100000
    largest = MAX_SEED - 201_001
    out = tmp_path / "out"
    assert main([*ARGS, "--seed", str(largest + 1), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"the largest seed is {largest:,}" in err
    assert not out.exists()


def test_a_state_metric_candidate_is_judged_as_npsco_evaluate_judges_it(tmp_path):
    # its threshold is a distance between visited states; the criteria are the paper's, between mean actions, at the
    # same multiple of the references' mean pairwise action distance (what npsco evaluate's `meets` uses)
    out = tmp_path / "state"
    args = ["population", "--method", "lagrangian", "--mset", "metric=state", "--refs", "2", "--novel", "1"]
    args += ["--candidates", "2", *ARGS[9:], "--out", str(out)]
    assert main(args) == 0
    members = json.loads((out / "manifest.json").read_text())["members"]
    refs = [m for m in members if m["role"] == "reference"]
    baseline = float(np.median([m["final_eval"]["return_mean"] for m in refs]))
    ref_policies = [load_policy(out / m["path"] / "policy.safetensors") for m in refs]
    action_r0 = default_threshold(ref_policies, episodes=50, seed=0).r0  # the maze's threshold episodes
    state_r0 = json.loads((out / "threshold.json").read_text())["r0_default"]
    (slot,) = slots(out)
    least = slot["threshold"] / state_r0 * action_r0
    assert slot["threshold"] == pytest.approx(state_r0)  # the Lagrangian's default multiple is 1
    for cand in slot["candidates"]:  # k0 avoids the two references
        record = json.loads((out / cand["path"] / "config.json").read_text())["member"]
        assert (record["name"], record["candidate"]) == (slot["name"], cand["index"])
        policy = load_policy(out / cand["path"] / "policy.safetensors")
        episodes = run_episodes(policy, cand["final_eval"]["episodes"], seed=FINAL_EVALUATION, record_states=True)
        states = np.concatenate(episodes.states)
        per_state = ReferenceSet(ref_policies, exact=True).distances(states, policy.mean_action(states))
        expected = float(per_state.mean(axis=0).min())
        assert cand["nearest"] == pytest.approx(expected, rel=1e-9)
        assert cand["meets"] == meets_criteria(cand["final_eval"]["return_mean"], baseline, expected, least)


def test_a_candidate_left_training_by_a_kill_or_a_dead_worker_is_offered_again(tmp_path):
    config = PopulationOptions(
        MAZE_ID, method="lagrangian", refs=2, novel=1, r0=0.3, steps=2048, settings={"num_steps": 32}, candidates=3
    ).config()
    pop = Population(tmp_path / "run", config, progress=False, log=lambda line: None)
    pop.open()
    try:
        pop.reach_checked = True  # (the threshold's warning would load the references, not trained here)
        for member in pop.members[:2]:
            member.status = "done"
        first, spare, *_ = pop.ready(set())
        assert (first.label, spare.label) == ("lagrangian/k0#c0", "lagrangian/k0#c1") and first.after == 0
        pop.started(first)
        running = {first.key}
        assert [job.label for job in pop.ready(running)] == ["lagrangian/k0#c1", "lagrangian/k0#c2"]  # spare
        # its worker died (or the run was killed and resumed): c0 is "training" in the manifest, running nowhere
        offered = pop.ready(set())
        assert offered[0].label == "lagrangian/k0#c0"  # needed again, not left waiting for ever
        pop.started(offered[0])
        assert [(c.index, c.status) for c in pop.member("lagrangian/k0").candidates] == [(0, "training")]
    finally:
        pop.close()


def test_candidates_are_judged_by_the_mean_action_distance_whatever_the_thresholds_metric(tmp_path):
    def criteria(metric, r0=None, r0_default=2.0):
        method = MethodConfig.of("ipd", metric=metric, r0=r0)
        config = PopulationConfig(ppo=preset(MAZE_ID), method=method)
        # the references' mean-action r0, as if measured: 0.8
        snapshot = PopulationSnapshot(tmp_path, config, [], r0_default, action_r0=0.8)
        return snapshot.criteria(1.0)

    assert criteria("deterministic") == ("deterministic", 1.0)
    assert criteria("wasserstein2") == ("deterministic", pytest.approx(0.4))  # 1.0 = 0.5 x r0_default -> 0.5 x 0.8
    assert criteria("state") == ("deterministic", pytest.approx(0.4))
    assert criteria("wasserstein2", r0=1.0) == ("wasserstein2", 1.0)  # a number in W2: judged in W2
    assert criteria("state", r0=1.0) == ("state", 1.0)
