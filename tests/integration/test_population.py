"""End-to-end tests of `npsco population` and `npsco threshold` on the maze with a tiny budget: the manifest, its
atomic writes, resuming after a SIGKILL (nothing done is retrained, the result equals an uninterrupted run),
`--refs-from`, and the refusal of a different configuration in an existing run directory."""

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import npsco.population
from npsco.cli import main
from npsco.compat import old_default_hints
from npsco.errors import NpscoError
from npsco.fields import apply_overrides
from npsco.io import atomic_write_json
from npsco.logger import read_metrics
from npsco.methods.settings import MethodConfig
from npsco.options import PopulationOptions
from npsco.policy import load_policy
from npsco.population import Population
from npsco.population_config import (
    PopulationConfig,
    configuration_differences,
    same_configuration,
)
from npsco.ppo.config import preset
from npsco.ppo.trainer import Trainer
from npsco.tasks import MAZE_ID

# 2 iterations of 16 envs x 32 steps per policy, 2 epochs per update: the workflow, not learning, is under test
TINY = [
    "population",
    "--refs",
    "2",
    "--novel",
    "2",
    "--steps",
    "1024",
    "--set",
    "num_steps=32",
    "--set",
    "update_epochs=2",
    "--set",
    "eval_episodes=5",
    "--no-progress",
]
BORROWING = [a for i, a in enumerate(TINY) if "--refs" not in TINY[max(i - 1, 0) : i + 1]]
"""TINY without --refs: the references come from elsewhere (--refs-from, --ref-checkpoints)."""
STATUS_ORDER = ["pending", "training", "done"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """An uninterrupted population run; every manifest write is recorded, with the file read back right after it."""
    out = tmp_path_factory.mktemp("pop") / "run"
    writes = []

    def recording(path, obj):
        atomic_write_json(path, obj)
        if Path(path).name == "manifest.json":
            writes.append((obj, Path(path).read_text()))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(npsco.population, "atomic_write_json", recording)
        assert main([*TINY, "--out", str(out)]) == 0
    return out, writes


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def members(out: Path) -> dict:
    return {m["name"]: m for m in manifest(out)["members"]}


def temp_files(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.name.endswith(".tmp")]


# ---------------------------------------------------------------------------------------------------- the manifest
def test_manifest_records_roles_seeds_threshold_references_and_statuses(run):
    out, _ = run
    data = manifest(out)
    assert (data["format"], data["env_id"], data["method"]) == ("npsco-population", "npsco/FourRewardMaze-v0", "ipd")
    ms = data["members"]
    assert [(m["name"], m["role"], m["seed"]) for m in ms] == [
        ("ref0", "reference", 0),
        ("ref1", "reference", 1),
        ("ipd-r0x0.5/k0", "novel", 1000),
        ("ipd-r0x0.5/k1", "novel", 1001),
    ]
    assert all(m["status"] == "done" for m in ms)
    threshold = json.loads((out / "threshold.json").read_text())
    assert threshold["names"] == ["ref0", "ref1"] and threshold["episodes_per_policy"] == 50
    matrix = np.array(threshold["distance_matrix"])
    assert matrix.shape == (2, 2) and np.all(np.diag(matrix) == 0) and np.all(matrix[~np.eye(2, dtype=bool)] > 0)
    r0 = threshold["r0_default"]
    assert data["r0_default"] == r0 and r0 == pytest.approx(matrix[~np.eye(2, dtype=bool)].mean(), abs=1e-5)
    by_name = {m["name"]: m for m in ms}
    assert by_name["ipd-r0x0.5/k0"]["references"] == ["ref0", "ref1"]
    assert by_name["ipd-r0x0.5/k1"]["references"] == ["ref0", "ref1", "ipd-r0x0.5/k0"]
    for m in ms:
        if m["role"] == "novel":
            assert m["threshold"] == 0.5 * r0 and m["chain"] == "ipd-r0x0.5"  # the default multiple, 0.5
        else:
            assert m["threshold"] is None and m["references"] == []
        assert m["final_eval"]["episodes"] == 100 and m["wall_seconds"] > 0


def test_every_checkpoint_loads_with_its_seed_method_and_threshold(run):
    out, _ = run
    for m in manifest(out)["members"]:
        policy = load_policy(out / m["path"] / "policy.safetensors")
        meta = policy.metadata
        assert (meta["seed"], meta["method"], meta["population"]["name"]) == (m["seed"], m["method"], m["name"])
        assert meta["config"]["total_timesteps"] == 1024 and meta["config"]["num_steps"] == 32
        if m["role"] == "novel":
            assert meta["method_config"]["r0"] == m["threshold"]
            assert meta["method_config"]["references"] == m["references"]
            rows = read_metrics(out / m["path"] / "metrics.jsonl")
            assert len(rows) == 2 and all("ipd/terminated_frac" in r and "novelty/running_mean" in r for r in rows)


def test_every_policy_folder_has_a_config_json_as_a_train_run_has(run, capsys):
    out, _ = run
    population = json.loads((out / "config.json").read_text())
    for m in manifest(out)["members"]:
        record = json.loads((out / m["path"] / "config.json").read_text())
        meta = load_policy(out / m["path"] / "policy.safetensors").metadata
        assert record["command"] == "population" and record["ppo"] == meta["config"]
        assert record["ppo"] == {**population["ppo"], "seed": m["seed"]}
        assert record["method"] == (None if m["role"] == "reference" else population["method"])
        member = {k: m[k] for k in ("name", "role", "chain", "index", "threshold", "references")} | {"candidate": 0}
        assert record["member"] == member
    # npsco train does not take a population's policy folder for its own
    assert main(["train", "--env", MAZE_ID, "--steps", "1024", "--out", str(out / "refs/ref0")]) == 2
    assert "is not an npsco train run directory" in capsys.readouterr().err


def test_manifest_writes_are_atomic_whole_json_and_statuses_only_move_forward(run):
    out, writes = run
    assert len(writes) >= 1 + 2 * 4  # opened, then training and done for each of the 4 policies
    for obj, text in writes:
        assert json.loads(text) == obj  # the file on disk was the whole document right after each write
    assert temp_files(out) == []
    names = [m["name"] for m in writes[-1][0]["members"]]
    for name in names:
        seq = [next(m["status"] for m in obj["members"] if m["name"] == name) for obj, _ in writes]
        ranks = [STATUS_ORDER.index(s) for s in seq]
        assert ranks == sorted(ranks) and ranks[-1] == 2, (name, seq)
        assert "training" in seq  # each policy was announced before it was trained
    # policies are trained one after the other: at most one is `training` in any manifest
    assert all(sum(m["status"] == "training" for m in obj["members"]) <= 1 for obj, _ in writes)


# -------------------------------------------------------------------------------------------------------- resume
# The child process runs the CLI unchanged, except that the second rollout of the first IPD policy waits on its stdin:
# the test sees `ipd-r0x0.5/k0` as `training` in the manifest (with one iteration logged) and kills it there.
PAUSING_CHILD = """
import sys
from npsco.ppo import trainer
from npsco.cli import main
from npsco.tasks import MAZE_ID
from npsco.methods.settings import MethodConfig
from npsco.fields import apply_overrides
from npsco.ppo.config import preset
collect = trainer.Trainer.collect_rollout
def paused(self):
    if self.hooks.name == "ipd" and self.iteration == 2:
        sys.stdin.read()  # never returns: the test kills this process
    return collect(self)
trainer.Trainer.collect_rollout = paused
sys.exit(main(sys.argv[1:]))
"""


def same_blas_env() -> dict[str, str]:
    """The environment for a child that must compute what this process computes: the same OpenBLAS thread count.

    Results depend on it: with 2 threads OpenBLAS rounds the larger float32 products of the threshold's evaluation
    (thousands of states) differently, and r0 changes in its last bits (0.14559250960213752 with 2 threads against
    0.1455925094997821 with 1 on this task). `import npsco` sets OPENBLAS_NUM_THREADS=1 only when numpy is not loaded
    yet: true in the `npsco` command, not in pytest, which loads numpy first.
    """
    blas = [lib["num_threads"] for lib in threadpool_info() if lib["internal_api"] == "openblas"]
    return {**os.environ, **({"OPENBLAS_NUM_THREADS": str(blas[0])} if blas else {})}


def wait_for_training(out: Path, proc: subprocess.Popen, name: str, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the population exited early ({proc.returncode}): {proc.stdout.read()}"
        try:
            ms = members(out)
        except (FileNotFoundError, json.JSONDecodeError):  # not written yet (a torn file would be a bug: see above)
            ms = {}
        metrics = out / "novel" / "ipd-r0x0.5" / "k0" / "metrics.jsonl"
        if ms.get(name, {}).get("status") == "training" and metrics.exists() and metrics.read_text().count("\n") >= 1:
            return
        time.sleep(0.05)
    raise AssertionError(f"{name} never showed as training within {timeout} s")


def test_resume_after_sigkill_retrains_nothing_done_and_equals_an_uninterrupted_run(run, tmp_path):
    reference_run, _ = run
    out = tmp_path / "run"
    args = [*TINY, "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-c", PAUSING_CHILD, *args],
        stdin=subprocess.PIPE,
        env=same_blas_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for_training(out, proc, "ipd-r0x0.5/k0")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    before = members(out)
    assert [before[n]["status"] for n in ("ref0", "ref1", "ipd-r0x0.5/k0", "ipd-r0x0.5/k1")] == [
        "done",
        "done",
        "training",
        "pending",
    ]
    stamps = {n: os.stat(out / before[n]["path"] / "policy.safetensors") for n in ("ref0", "ref1")}
    threshold_stamp = os.stat(out / "threshold.json")
    assert not (out / "novel" / "ipd-r0x0.5" / "k0" / "policy.safetensors").exists()

    assert main(args) == 0  # the same command again

    after = members(out)
    assert all(m["status"] == "done" for m in after.values())
    for n, st in stamps.items():  # the references were not retrained (same file, untouched)
        now = os.stat(out / after[n]["path"] / "policy.safetensors")
        assert (now.st_ino, now.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
        assert after[n]["wall_seconds"] == before[n]["wall_seconds"]
    now = os.stat(out / "threshold.json")
    assert (now.st_ino, now.st_mtime_ns) == (threshold_stamp.st_ino, threshold_stamp.st_mtime_ns)
    assert len(read_metrics(out / "novel" / "ipd-r0x0.5" / "k0" / "metrics.jsonl")) == 2  # restarted from scratch
    assert temp_files(out) == []

    # determinism: the interrupted-and-resumed run ends exactly where the uninterrupted one did
    expected = members(reference_run)
    assert manifest(out)["r0_default"] == manifest(reference_run)["r0_default"]
    for n, m in after.items():
        e = expected[n]
        assert (m["threshold"], m["references"], m["final_eval"], m["eval_curve"]) == (
            e["threshold"],
            e["references"],
            e["final_eval"],
            e["eval_curve"],
        ), n
        a = load_policy(out / m["path"] / "policy.safetensors")
        b = load_policy(reference_run / e["path"] / "policy.safetensors")
        for (wa, ba), (wb, bb) in zip(a.weights, b.weights, strict=True):
            np.testing.assert_array_equal(wa, wb)
            np.testing.assert_array_equal(ba, bb)
        np.testing.assert_array_equal(a.obs_mean, b.obs_mean)


def test_rerunning_a_finished_population_trains_nothing(run, capsys):
    out, _ = run
    before = {p: os.stat(p).st_mtime_ns for p in out.rglob("policy.safetensors")}
    assert main([*TINY, "--out", str(out)]) == 0
    assert "already trained" in capsys.readouterr().out
    assert {p: os.stat(p).st_mtime_ns for p in out.rglob("policy.safetensors")} == before


# ------------------------------------------------------------------------------------------ refs-from, refusals
def test_refs_from_reuses_the_references_without_training_them(run, tmp_path, monkeypatch):
    reference_run, _ = run
    trained = []
    init = Trainer.__init__

    def spy(self, cfg, *a, **kw):
        trained.append(cfg.seed)
        init(self, cfg, *a, **kw)

    monkeypatch.setattr(Trainer, "__init__", spy)
    out = tmp_path / "borrow"
    assert main([*BORROWING, "--novel", "1", "--refs-from", str(reference_run), "--out", str(out)]) == 0
    assert trained == [1000]  # only the novel policy
    assert not (out / "refs").exists()
    ms = members(out)
    assert [m["role"] for m in ms.values()] == ["reference", "reference", "novel"]
    for n in ("ref0", "ref1"):
        assert Path(ms[n]["path"]) == (reference_run / "refs" / n).resolve()
    assert manifest(out)["r0_default"] == manifest(reference_run)["r0_default"]
    # same references, threshold and seed: the same first novel policy as in the run it borrowed from
    assert ms["ipd-r0x0.5/k0"]["final_eval"] == members(reference_run)["ipd-r0x0.5/k0"]["final_eval"]
    # its config.json says how many references it has (the 2 it borrows), and a re-run resumes it
    assert json.loads((out / "config.json").read_text())["refs"] == 2
    assert main([*BORROWING, "--novel", "1", "--refs-from", str(reference_run), "--out", str(out)]) == 0
    assert trained == [1000]


@pytest.mark.parametrize("borrow", ["--refs-from", "--ref-checkpoints"])
def test_a_borrowed_reference_replaced_after_borrowing_is_refused_by_resume_evaluation_and_threshold(
    run, tmp_path, capsys, borrow
):
    source = tmp_path / "source"
    shutil.copytree(run[0], source)
    out = tmp_path / "borrow"
    given = [str(source)] if borrow == "--refs-from" else [str(source / "refs" / r) for r in ("ref0", "ref1")]
    args = [*BORROWING, borrow, *given, "--out", str(out)]
    args[args.index("--novel") + 1] = "1"
    assert main(args) == 0
    assert all(len(m.get("sha256") or "") == 64 for m in members(out).values() if m["role"] == "reference")
    # another policy put in ref0's place: resuming (one more novel policy) and evaluating must not use it
    shutil.copy(
        source / "novel" / "ipd-r0x0.5" / "k0" / "policy.safetensors", source / "refs" / "ref0" / "policy.safetensors"
    )
    capsys.readouterr()
    args[args.index("--novel") + 1] = "2"
    assert main(args) == 2
    assert "borrowed reference ref0" in capsys.readouterr().err
    assert main(["evaluate", str(out), "--episodes", "2"]) == 2
    assert "changed since this run borrowed it" in capsys.readouterr().err
    assert main(["threshold", str(out)]) == 2  # nor the threshold of the run's references
    assert "changed since this run borrowed it" in capsys.readouterr().err


def test_a_different_configuration_in_an_existing_run_is_refused_with_exit_code_2(run, capsys):
    out, _ = run
    config_before = (out / "config.json").read_text()
    manifest_before = (out / "manifest.json").read_text()
    args = [*TINY, "--out", str(out)]
    args[args.index("1024")] = "2048"
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "different configuration" in err and str(out) in err and "Traceback" not in err
    assert (out / "config.json").read_text() == config_before
    assert (out / "manifest.json").read_text() == manifest_before


def test_a_run_started_before_npsco_gained_a_setting_still_resumes(run, tmp_path, capsys):
    out = tmp_path / "old"
    shutil.copytree(run[0], out)
    config = json.loads((out / "config.json").read_text())
    del config["method"]["ipd_slack"], config["ppo"]["target_kl"]  # as if written before these settings existed
    (out / "config.json").write_text(json.dumps(config))
    assert main([*TINY, "--out", str(out)]) == 0
    assert "already trained" in capsys.readouterr().out
    # but a missing setting whose value now differs from its default is a different configuration
    assert main([*TINY, "--mset", "ipd_slack=0.3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "different configuration: method.ipd_slack: not recorded in the run, 0.3 now" in err


def test_same_configuration_compares_settings_and_fills_only_defaults():
    config = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("ipd")).to_dict()
    assert same_configuration(copy.deepcopy(config), config)
    older = copy.deepcopy(config)
    del older["method"]["metric"], older["eval_episodes"]
    assert same_configuration(older, config)
    changed = copy.deepcopy(config)
    changed["ppo"]["seed"] = 1
    assert not same_configuration(changed, config)
    extra = copy.deepcopy(config)
    extra["method"]["removed_setting"] = 1
    assert not same_configuration(extra, config)
    current = copy.deepcopy(config)
    current["method"]["metric"] = "wasserstein2"
    assert not same_configuration(older, current)
    assert configuration_differences(changed, config) == ["ppo.seed: 1 in the run, 0 now"]
    assert configuration_differences(extra, config) == ["method.removed_setting: 1 in the run, not a setting now"]
    assert configuration_differences(older, current) == ["method.metric: not recorded in the run, 'wasserstein2' now"]


def test_a_run_of_another_method_is_named_first_with_no_hint_from_the_other_methods_defaults():
    # a return-constrained Lagrangian run resumed with the default method: the cause, not the 9 settings it implies,
    # and no "--r0-scale 1" hint (that is an earlier IPD default, not this run's story)
    method = MethodConfig.of("lagrangian", lagrangian_constrain="return", return_alpha=0.9)
    stored = json.loads(json.dumps(PopulationConfig(ppo=preset(MAZE_ID), method=method, r0_scales=(1.0,)).to_dict()))
    current = json.loads(json.dumps(PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("ipd")).to_dict()))
    found = configuration_differences(stored, current)
    assert found[0] == "method: 'lagrangian' in the run, 'ipd' now (--method lagrangian resumes it)"
    assert not any(d.startswith("method.") for d in found)
    assert old_default_hints(stored, current) == ""
    same_method = {**current, "r0_scales": [1.0]}  # the same method with the earlier default: the hint stays
    assert "--r0-scale 1" in old_default_hints(same_method, current)


def test_reference_paths_are_compared_resolved_and_shown_whole(tmp_path, monkeypatch):
    """`--refs-from runs/x` resumes a run that recorded the same folder as an absolute path; another folder is named
    in full, not by its length."""
    monkeypatch.chdir(tmp_path)
    config = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("ipd"), refs_from="runs/refs").to_dict()
    stored = {**config, "refs_from": str(tmp_path / "runs" / "refs"), "ref_checkpoints": []}
    assert same_configuration(stored, config)
    elsewhere = {**stored, "refs_from": str(tmp_path / "runs" / "other-references-folder")}
    assert configuration_differences(elsewhere, config) == [
        f"refs_from: {str(tmp_path / 'runs' / 'other-references-folder')!r} in the run, "
        f"{str(tmp_path / 'runs' / 'refs')!r} now"
    ]


def test_a_borrowing_run_that_recorded_another_refs_resumes():
    """An earlier npsco took --refs beside --refs-from (and ignored it): the R it recorded does not stop a resume."""
    config = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("ipd"), refs_from="/runs/refs").to_dict()
    assert same_configuration({**config, "refs": 2}, config)
    own = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("ipd")).to_dict()
    assert configuration_differences({**own, "refs": 2}, own) == ["refs: 2 in the run, 5 now"]


def test_a_run_made_at_the_old_default_multiple_is_told_to_add_r0_scale_1(tmp_path, capsys):
    out = tmp_path / "run"
    old = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("ipd"), r0_scales=(1.0,))
    out.mkdir()
    (out / "config.json").write_text(json.dumps(old.validate().to_dict()))
    with pytest.raises(NpscoError, match=r"r0_scales: \[1.0\] in the run, \[0.5\] now .*add --r0-scale 1"):
        Population(out, PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("ipd"))).open()


def test_another_methods_knob_does_not_stop_a_run_from_resuming():
    """An older run recorded every method's settings; those its method never reads (e.g. TNB's rule in an IPD or PPO
    run, whose default changed from safe to authors) are not compared."""
    for method in ("ipd", "ppo"):
        config = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of(method)).to_dict()
        older = copy.deepcopy(config)
        older["method"].update(tnb_rule="safe", cpo_max_kl=0.5, r0_scale=1.0)
        assert same_configuration(older, config)
        older["method"]["t_start"] = 7  # read by every novelty method, not by plain PPO
        expected = ["method.t_start: 7 in the run, None now"] if method == "ipd" else []
        assert configuration_differences(older, config) == expected
    tnb = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("ctnb")).to_dict()
    older = copy.deepcopy(tnb)
    older["method"]["tnb_rule"] = "safe"
    assert configuration_differences(older, tnb) == ["method.tnb_rule: 'safe' in the run, 'authors' now"]


def test_a_tnb_run_made_at_the_old_default_rule_is_told_to_add_it(tmp_path):
    out = tmp_path / "run"
    old = PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("tnb", tnb_rule="safe"))
    out.mkdir()
    (out / "config.json").write_text(json.dumps(old.validate().to_dict()))
    with pytest.raises(NpscoError, match=r"tnb_rule: 'safe' in the run, 'authors' now .*add --mset tnb_rule=safe"):
        Population(out, PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("tnb"))).open()
    Population(out, PopulationConfig(ppo=preset(MAZE_ID), method=MethodConfig.of("tnb", tnb_rule="safe"))).open()


def test_refs_from_a_directory_without_a_population_is_refused(tmp_path, capsys):
    assert main([*BORROWING, "--refs-from", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")]) == 2
    assert "no population manifest" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ documentation
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("page", ["population.md", "methods/ipd.md", "methods/lagrangian.md", "methods/rspo.md"])
def test_the_python_examples_of_the_docs_run(page, tmp_path, monkeypatch):
    blocks = re.findall(r"^```python\n(.*?)^```", (DOCS / page).read_text(encoding="utf-8"), re.S | re.M)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/{page} python block {i + 1}", "exec"), {"__name__": "__docs_example__"})


# ------------------------------------------------------------------------------------------------ npsco threshold
def printed_r0(capsys) -> float:
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("r0 = "))
    return float(line.split()[2])


def test_threshold_command_reproduces_the_runs_r0_with_the_same_episodes(run, capsys):
    out, _ = run
    saved = json.loads((out / "threshold.json").read_text())
    assert main(["threshold", str(out), "--episodes", str(saved["episodes_per_policy"])]) == 0
    assert printed_r0(capsys) == pytest.approx(saved["r0_default"], abs=1e-6)


def test_threshold_command_prints_the_runs_r0(run, capsys):
    out, _ = run
    assert main(["threshold", str(out)]) == 0
    assert printed_r0(capsys) == pytest.approx(json.loads((out / "threshold.json").read_text())["r0_default"], abs=1e-6)


def test_a_larger_novel_count_extends_a_finished_run_without_retraining_it(run, tmp_path, capsys):
    out = tmp_path / "grown"
    shutil.copytree(run[0], out)
    before = members(out)
    stamps = {
        n: (out / m["path"] / "policy.safetensors").stat().st_mtime_ns
        for n, m in before.items()
        if m["role"] == "novel"
    }
    args = [*TINY, "--out", str(out)]
    args[args.index("--novel") + 1] = "3"
    assert main(args) == 0
    assert "2 -> 3 novel policies per chain (1 to train)" in capsys.readouterr().out
    after = members(out)
    assert list(after) == [*before, "ipd-r0x0.5/k2"]
    assert all(m["status"] == "done" for m in after.values())
    assert after["ipd-r0x0.5/k2"]["references"] == ["ref0", "ref1", "ipd-r0x0.5/k0", "ipd-r0x0.5/k1"]
    for n, stamp in stamps.items():  # the policies already trained were not trained again
        assert after[n]["final_eval"] == before[n]["final_eval"]
        assert (out / after[n]["path"] / "policy.safetensors").stat().st_mtime_ns == stamp
    assert json.loads((out / "config.json").read_text())["novel"] == 3
    # growing is the only change allowed: fewer novel policies is a different configuration
    args[args.index("--novel") + 1] = "1"
    assert main(args) == 2
    assert "different configuration" in capsys.readouterr().err


def test_a_grown_run_killed_between_its_config_and_its_manifest_still_trains_the_new_policies(run, tmp_path, capsys):
    """Killed after config.json recorded the larger --novel but before the manifest listed the new members: the next
    run trains them instead of reporting every policy trained."""
    out = tmp_path / "grown"
    shutil.copytree(run[0], out)
    config = json.loads((out / "config.json").read_text())
    atomic_write_json(out / "config.json", {**config, "novel": 3})  # what such a kill leaves: the old manifest
    args = [*TINY, "--out", str(out)]
    args[args.index("--novel") + 1] = "3"
    assert main(args) == 0
    assert "already trained" not in capsys.readouterr().out
    after = members(out)
    assert after["ipd-r0x0.5/k2"]["status"] == "done"


def test_growing_writes_the_manifest_before_the_config(run, tmp_path, monkeypatch):
    out = tmp_path / "grown"
    shutil.copytree(run[0], out)
    order = []
    monkeypatch.setattr(
        npsco.population,
        "atomic_write_json",
        lambda path, obj: order.append(Path(path).name) or atomic_write_json(path, obj),
    )
    monkeypatch.setattr(Population, "run", lambda self: self.open() or self.members)  # the bookkeeping, no training
    args = [*TINY, "--out", str(out)]
    args[args.index("--novel") + 1] = "3"
    main(args)
    assert order[:2] == ["manifest.json", "config.json"]


def test_the_ppo_seed_setting_shifts_every_seed_of_the_population(tmp_path):
    ppo = apply_overrides(preset(MAZE_ID), ["seed=7"])
    config = PopulationConfig(ppo=ppo, method=MethodConfig.of("ipd"), refs=2, novel=2)
    pop = npsco.population.Population(tmp_path / "replicate", config, progress=False, log=lambda _: None)
    pop.open()  # plans and writes the manifest, trains nothing
    assert [(m["name"], m["seed"]) for m in manifest(tmp_path / "replicate")["members"]] == [
        ("ref0", 7),
        ("ref1", 8),
        ("ipd-r0x0.5/k0", 1007),
        ("ipd-r0x0.5/k1", 1008),
    ]


def test_the_seed_option_is_the_base_seed(tmp_path):
    out = tmp_path / "seeded"
    args = [*TINY, "--method", "ppo", "--refs", "1", "--seed", "7", "--out", str(out)]
    args[args.index("--novel") + 1] = "0"
    args[args.index("--refs") + 1] = "1"
    assert main(args) == 0
    (m,) = manifest(out)["members"]
    assert (m["name"], m["seed"]) == ("ref0", 7)
    assert load_policy(out / m["path"] / "policy.safetensors").metadata["seed"] == 7


def test_a_wasserstein_threshold_and_a_reference_profile_reach_the_novel_policy(tmp_path):
    out = tmp_path / "w2"
    assert (
        main(
            [
                *TINY,
                "--novel",
                "1",
                "--r0-scale",
                "1",
                "--mset",
                "metric=wasserstein2",
                "--mset",
                "r0_profile=reference",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    th = json.loads((out / "threshold.json").read_text())
    assert th["metric"] == "wasserstein2" and len(th["profile"]) >= 1
    assert manifest(out)["r0_default"] == pytest.approx(th["r0_default"])
    meta = load_policy(out / "novel" / "ipd" / "k0" / "policy.safetensors").metadata["method_config"]
    assert meta["metric"] == "wasserstein2" and meta["r0"] == pytest.approx(th["r0_default"])
    np.testing.assert_allclose(meta["r0_profile_values"], th["profile"], rtol=1e-4)


def test_a_reference_profile_with_an_absolute_r0_is_refused(tmp_path, capsys):
    assert main([*TINY, "--r0", "0.3", "--mset", "r0_profile=reference", "--out", str(tmp_path / "x")]) == 2
    assert "cannot be combined with an absolute --r0" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_job_trains_without_writing_the_manifest_and_the_population_records_it(tmp_path):
    """The jobs (in a worker process, or inline) see a snapshot of the population and return what they did; the
    population alone writes the manifest."""
    from npsco.parallel import Job
    from npsco.population_jobs import train_member_job

    ppo = apply_overrides(
        preset(MAZE_ID), ["total_timesteps=1024", "num_steps=32", "update_epochs=2", "eval_episodes=5"]
    )
    config = PopulationConfig(ppo=ppo, method=MethodConfig.of("ppo"), refs=1, novel=0)
    pop = Population(tmp_path / "pop", config, progress=False, log=lambda _: None)
    pop.open()
    before = (pop.out / "manifest.json").read_bytes()
    record = train_member_job(str(pop.out), config, [m.to_dict() for m in pop.members], None, "ref0")
    assert (pop.out / "manifest.json").read_bytes() == before  # the job wrote its run directory, not the manifest
    assert record["status"] == "done" and record["final_eval"]["episodes"] == 100
    assert (pop.out / "refs" / "ref0" / "policy.safetensors").exists() and pop.members[0].status == "pending"
    pop.finished(Job(key="ref0", fn=train_member_job, args=(), label="ref0"), record)
    assert manifest(pop.out)["members"][0] == record


def test_a_threshold_of_another_metric_or_without_a_profile_is_refused_on_resume(tmp_path, capsys):
    out = tmp_path / "pop"
    args = [*TINY, "--novel", "1", "--r0-scale", "1", "--out", str(out)]
    assert main(args) == 0
    path = out / "threshold.json"
    th = json.loads(path.read_text())
    # a run whose threshold was computed in another metric (by an npsco older than the method's metric rule), resumed
    # with its novel policy still to train
    manifest_data = json.loads((out / "manifest.json").read_text())
    for m in manifest_data["members"]:
        if m["role"] == "novel":
            m["status"] = "pending"
    (out / "manifest.json").write_text(json.dumps(manifest_data))
    path.write_text(json.dumps({**th, "metric": "wasserstein2"}))
    assert main(args) == 2
    assert "computed with the wasserstein2 metric, this run uses deterministic" in capsys.readouterr().err
    # r0_profile=reference with a threshold.json without a profile
    other = tmp_path / "profile"
    pargs = [*TINY, "--novel", "1", "--r0-scale", "1", "--mset", "r0_profile=reference", "--out", str(other)]
    assert main(pargs) == 0
    data = json.loads((other / "manifest.json").read_text())
    for m in data["members"]:
        if m["role"] == "novel":
            m["status"] = "pending"
    (other / "manifest.json").write_text(json.dumps(data))
    stripped = {k: v for k, v in json.loads((other / "threshold.json").read_text()).items() if k != "profile"}
    (other / "threshold.json").write_text(json.dumps(stripped))
    assert main(pargs) == 2
    assert "holds no threshold profile" in capsys.readouterr().err


def test_each_job_knows_the_rest_of_its_chain_so_the_scheduler_starts_the_longest_path_first(tmp_path):
    options = PopulationOptions(MAZE_ID, method="ipd", refs=2, novel=3, r0=0.3, steps=2048, settings={"num_steps": 32})
    config = options.config()
    pop = Population(tmp_path / "run", config, progress=False, log=lambda line: None)
    pop.open()
    try:
        steps = config.ppo.policy_steps
        refs = pop.ready(set())
        assert [job.label for job in refs] == ["ref0", "ref1"]
        assert all(job.after == 3 * steps for job in refs)  # the whole chain waits for every reference
        pop.reach_checked = True  # (the threshold's warning would load the references, not trained here)
        for member in pop.members[:2]:
            member.status = "done"
        (first,) = pop.ready(set())
        assert (first.label, first.after) == ("ipd/k0", 2 * steps)  # k1 and k2 after it
        pop.members[2].status = "done"
        (second,) = pop.ready(set())
        assert (second.label, second.after) == ("ipd/k1", steps)
    finally:
        pop.close()


def test_evaluate_prints_each_novel_policys_return_nearest_distance_and_verdict(run, tmp_path, capsys):
    # what the README promises `npsco evaluate RUN` prints: per novel policy, its return, nearest / r0 and meets
    out = tmp_path / "copy"
    shutil.copytree(run[0], out)
    assert main(["evaluate", str(out), "--episodes", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if "nearest / r0" in line)
    assert lines[header].split()[:4] == ["policy", "task", "return", "/"] and "meets" in lines[header]
    novel = [m["name"] for m in manifest(out)["members"] if m["role"] == "novel"]
    rows = lines[header + 1 : header + 1 + len(novel)]
    assert [row.split()[0] for row in rows] == novel
    evaluation = json.loads((out / "evaluation" / "evaluation.json").read_text())
    for row, policy in zip(rows, [p for p in evaluation["policies"] if p["role"] == "novel"], strict=True):
        assert row.split()[2] == f"{policy['return_mean']:.1f}" and row.split()[5] in ("yes", "no", "-")
        assert row.split()[5] == {True: "yes", False: "no", None: "-"}[policy["meets"]]
