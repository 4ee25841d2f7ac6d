"""`npsco sweep`: a tiny maze grid (PPO references + IPD, R=2, K=1) on the local process pool and on a local Ray
instance gives the same run directories and the same results; a second run trains nothing; a worker that dies is
retried; bad grid files give a one-line error."""

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from npsco.cli import main
from npsco.errors import NpscoError
from npsco.evaluation.evaluate import evaluate_runs
from npsco.manifest import population_dirs
from npsco.parallel import InlineExecutor, Job, LocalExecutor, Scheduler, by_critical_path
from npsco.population import Population
from npsco.sweep import Sweep, load_grid, parse_grid, plan

REPO = Path(__file__).resolve().parents[2]

TINY_GRID = """
name = "tiny"
tasks = ["npsco/FourRewardMaze-v0"]
methods = ["ppo", "ipd"]
refs = 2
novel = 1
steps = 1024
eval_episodes = 10
threshold_episodes = 5

[ppo]
eval_every = 0
"""


def final_returns(sweep: Path) -> dict[str, float]:
    """population/member -> final return, for every member each population trained itself."""
    out = {}
    for run in population_dirs(sweep):
        for m in json.loads((run / "manifest.json").read_text())["members"]:
            # borrowed references (an absolute path, or `../ppo/...` beside the run) are counted where they were trained
            if not Path(m["path"]).is_absolute() and ".." not in Path(m["path"]).parts:
                assert m["status"] == "done"
                out[f"{run.relative_to(sweep)}/{m['name']}"] = m["final_eval"]["return_mean"]
    return out


def tree(sweep: Path) -> set[str]:
    return {str(p.relative_to(sweep)) for p in sweep.rglob("policy.safetensors")}


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("grid") / "tiny.toml"
    path.write_text(TINY_GRID)
    return path


@pytest.fixture(scope="module")
def local_sweep(grid, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "sweep"
    assert main(["sweep", str(grid), "--out", str(out), "--workers", "2"]) == 0
    return out


def test_local_pool_trains_every_population_of_the_grid(local_sweep):
    doc = json.loads((local_sweep / "sweep.json").read_text())
    assert (doc["format"], doc["name"], doc["status"]) == ("npsco-sweep", "tiny", "done")
    assert [(p["path"], p["references_from"], p["policies"], p["done"]) for p in doc["populations"]] == [
        ("FourRewardMaze-v0/ppo", None, 2, 2),
        ("FourRewardMaze-v0/ipd", "FourRewardMaze-v0/ppo", 1, 1),
    ]
    assert tree(local_sweep) == {
        "FourRewardMaze-v0/ppo/refs/ref0/policy.safetensors",
        "FourRewardMaze-v0/ppo/refs/ref1/policy.safetensors",
        "FourRewardMaze-v0/ipd/novel/ipd-r0x0.5/k0/policy.safetensors",
    }
    ipd = json.loads((local_sweep / "FourRewardMaze-v0/ipd/manifest.json").read_text())
    assert ipd["r0_default"] > 0 and (local_sweep / "FourRewardMaze-v0/ipd/threshold.json").exists()
    k0 = ipd["members"][-1]
    assert k0["references"] == ["ref0", "ref1"] and k0["threshold"] == 0.5 * ipd["r0_default"]
    assert population_dirs(local_sweep) == [
        local_sweep / "FourRewardMaze-v0/ppo",
        local_sweep / "FourRewardMaze-v0/ipd",
    ]


def test_second_run_trains_nothing(grid, local_sweep, capsys):
    before = {p: p.stat().st_mtime_ns for p in local_sweep.rglob("policy.safetensors")}
    assert main(["sweep", str(grid), "--out", str(local_sweep), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert " start " not in out and "2/2 policies" in out and "npsco report" in out
    assert {p: p.stat().st_mtime_ns for p in local_sweep.rglob("policy.safetensors")} == before


def test_a_copied_sweep_resumes_where_it_lies_and_an_old_one_with_absolute_paths_too(grid, local_sweep, tmp_path):
    """A method run records its references relative to itself (`../ppo`): a copy of the sweep resumes (trains
    nothing) and reads its own references, not the original's; a sweep an earlier npsco wrote, with absolute paths,
    resumes as well."""
    ipd = local_sweep / "FourRewardMaze-v0" / "ipd"
    assert json.loads((ipd / "config.json").read_text())["refs_from"] == "../ppo"
    refs = [m for m in json.loads((ipd / "manifest.json").read_text())["members"] if m["role"] == "reference"]
    assert [m["path"] for m in refs] == ["../ppo/refs/ref0", "../ppo/refs/ref1"]
    copy = tmp_path / "copy"
    shutil.copytree(local_sweep, copy)
    before = {p: p.stat().st_mtime_ns for p in copy.rglob("policy.safetensors")}
    assert main(["sweep", str(grid), "--out", str(copy), "--workers", "2"]) == 0
    assert {p: p.stat().st_mtime_ns for p in copy.rglob("policy.safetensors")} == before
    rows = evaluate_runs([copy / "FourRewardMaze-v0" / "ipd"], episodes=2, write=False)[0]["policies"]
    assert all(Path(r["checkpoint"]).is_relative_to(copy.resolve()) for r in rows), [r["checkpoint"] for r in rows]
    # as an earlier npsco wrote it: refs_from and the borrowed references' paths absolute
    old = tmp_path / "old"
    shutil.copytree(local_sweep, old)
    run = old / "FourRewardMaze-v0" / "ipd"
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "refs_from": str((run / "../ppo").resolve())}))
    data = json.loads((run / "manifest.json").read_text())
    for m in data["members"]:
        if m["role"] == "reference":
            m["path"] = str((run / m["path"]).resolve())
    (run / "manifest.json").write_text(json.dumps(data))
    before = {p: p.stat().st_mtime_ns for p in old.rglob("policy.safetensors")}
    assert main(["sweep", str(grid), "--out", str(old), "--workers", "2"]) == 0
    assert {p: p.stat().st_mtime_ns for p in old.rglob("policy.safetensors")} == before


def test_ray_gives_the_same_directories_and_results(grid, local_sweep, tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "sweep"
    assert main(["sweep", str(grid), "--out", str(out), "--backend", "ray", "--workers", "2"]) == 0
    assert tree(out) == tree(local_sweep)
    assert final_returns(out) == final_returns(local_sweep)
    assert len(final_returns(out)) == 3


# ------------------------------------------------------------------------------------------------- dead workers
def die_once(marker: str) -> int:
    """A job whose worker process is killed the first time it runs."""
    if not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return 7


class OneJob:
    def __init__(self, marker: str):
        self.marker, self.result = marker, None

    def ready(self, busy):
        return [] if self.result is not None or "die" in busy else [Job("die", die_once, (self.marker,))]

    def started(self, job):
        pass

    def finished(self, job, result):
        self.result = result


def test_a_job_whose_worker_dies_is_retried(tmp_path):
    source = OneJob(str(tmp_path / "marker"))
    with LocalExecutor(1) as executor:
        Scheduler(executor).run(source)
    assert source.result == 7


# -------------------------------------------------------------------------------------------------- bad grids
@pytest.mark.parametrize(
    "text, message",
    [
        ("foo = 1\n" + TINY_GRID, "unknown key 'foo'"),
        (TINY_GRID.replace('"ipd"]', '"ipdx"]'), "unknown method 'ipdx'"),
        (TINY_GRID.replace('tasks = ["npsco/FourRewardMaze-v0"]', ""), "missing 'tasks'"),
        (TINY_GRID.replace("eval_every = 0", "eval_evry = 0"), "unknown setting 'eval_evry'"),
        (TINY_GRID + "\n[method.wsr]\nwsr_weight = 2\n", "'wsr' is not in methods"),
        ("tasks = [", "not valid TOML"),
        (TINY_GRID.replace('name = "tiny"', 'name = "../up"'), "plain folder name"),
    ],
)
def test_bad_grid_files_give_one_line_errors(tmp_path, capsys, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and message in err and str(path) in err, err
    assert not (tmp_path / "out").exists()


def test_population_dirs_refuses_other_folders(tmp_path):
    with pytest.raises(NpscoError, match="neither a sweep directory"):
        population_dirs(tmp_path)


# -------------------------------------------------------------------------------------------------- examples
def test_example_grids_plan_as_documented(capsys):
    paper = load_grid(REPO / "examples/paper_grid.toml")
    assert paper.tasks == ["Hopper-v5", "Walker2d-v5", "HalfCheetah-v5"] and len(paper.methods) == 6
    assert (paper.options.refs, paper.options.novel, paper.options.preset) == (10, 10, "paper")
    assert main(["sweep", str(REPO / "examples/paper_grid.toml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "18 population runs" in out and "Hopper-v5/ipd: 10 x ipd-r0x1, ipd-r0x0.5, ipd-r0x1.5, ipd-r0x2" in out
    assert "HalfCheetah-v5/ppo: 10 PPO references (seeds 0..9), 3,000,000 steps each" in out
    assert main(["sweep", str(REPO / "examples/maze_grid.toml"), "--dry-run"]) == 0


def test_the_documented_grid_parses_as_described():
    import re
    import tomllib

    from npsco.sweep import parse_grid, plan

    text = (REPO / "docs/sweep.md").read_text(encoding="utf-8")
    grid = parse_grid(tomllib.loads(re.search(r"^```toml\n(.*?)^```", text, re.S | re.M).group(1)), "doc")
    ppo, ipd, wsr = plan(grid)
    assert (ppo.config.ppo.total_timesteps, ppo.config.ppo.learning_rate, ppo.config.refs) == (200_000, 1e-3, 4)
    assert ipd.chains == ["ipd-r0x1", "ipd-r0x2"] and ipd.config.method.novelty_action == "sample"
    assert ipd.config.method.t_start == 3 and wsr.config.method.options.wsr_weight == 10 and wsr.chains == ["wsr"]
    assert wsr.config.method.novelty_action == "mean"  # the task's [method.ipd] table is IPD's alone
    assert {s.config.ppo.seed for s in (ppo, ipd, wsr)} == {100}


def test_the_paper_campaign_grid_plans_fresh_seeds_and_fig4_on_hopper_only(capsys):
    grid = load_grid(REPO / "benchmarks/paper_campaign/grid.toml")
    o = grid.options
    assert (o.refs, o.novel, o.seed, o.preset, o.steps) == (5, 5, 50000, "default", 1_000_000)
    assert main(["sweep", str(REPO / "benchmarks/paper_campaign/grid.toml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "18 population runs, 105 policies" in out
    assert "Hopper-v5/ppo: 5 PPO references (seeds 50000..50004), 1,000,000 steps each" in out
    assert (
        "Hopper-v5/ipd: 5 x ipd-r0x1, ipd-r0x0.5, ipd-r0x1.5, ipd-r0x2 (seeds 51000..51004; references of "
        "Hopper-v5/ppo)"
    ) in out
    for task in ("Walker2d-v5", "HalfCheetah-v5"):
        assert f"{task}/ipd: 5 x ipd (seeds 51000..51004" in out
        assert f"{task}/ppo: 5 PPO references (seeds 50000..50004), 1,000,000 steps each" in out
    for method in ("wsr", "tnb", "ctnb", "cpo"):
        assert out.count(f"/{method}: 5 x {method} (seeds 51000..51004") == 3
    specs = plan(grid)
    assert {s.config.method.options.tnb_rule for s in specs if s.config.method.reads("tnb_rule")} == {"authors"}


def test_a_base_seed_shifts_every_seed_and_an_old_sweep_without_one_resumes(tmp_path):
    base = {"tasks": ["npsco/FourRewardMaze-v0"], "methods": ["ppo", "ipd"], "refs": 2, "novel": 3}
    refs, ipd = plan(parse_grid({**base, "seed": 700}, "test"))
    members = Population(tmp_path / "ipd", ipd.config)._plan()
    assert [m.seed for m in Population(tmp_path / "refs", refs.config)._plan()] == [700, 701]
    assert [m.seed for m in members if m.role == "novel"] == [1700, 1701, 1702]
    assert plan(parse_grid(base, "test"))[0].config.ppo.seed == 0
    for bad in (-1, 1.5, True, "7"):
        with pytest.raises(NpscoError, match="'seed' must be a whole number >= 0"):
            parse_grid({**base, "seed": bad}, "test")
    with pytest.raises(NpscoError, match="base `seed`"):
        parse_grid({**base, "ppo": {"seed": 3}}, "test")
    # a sweep.json written before the `seed` key existed describes the same grid with seed 0
    sweep = Sweep(parse_grid(base, "old"), tmp_path / "sweep", log=lambda _: None)
    old_grid = sweep.grid.to_dict()
    del old_grid["seed"]
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.json").write_text(json.dumps({"grid": old_grid}))
    sweep.open()
    with pytest.raises(NpscoError, match="another grid"):
        Sweep(parse_grid({**base, "seed": 5}, "old"), tmp_path / "sweep", log=lambda _: None).open()


def test_task_method_tables_override_the_method_tables_on_their_task_only():
    grid = {
        "tasks": ["npsco/FourRewardMaze-v0", "Hopper-v5"],
        "methods": ["ppo", "ipd", "wsr"],
        "refs": 2,
        "novel": 1,
        "r0_scales": [1.0],
        "method": {"t_start": 5, "ipd": {"r0_scales": [1.0, 2.0]}},
        "task": {"Hopper-v5": {"method": {"t_start": 9, "ipd": {"r0_scales": [1.0, 0.5]}}}},
    }
    specs = {(s.task, s.method): s for s in plan(parse_grid(grid, "test"))}
    assert specs[("npsco/FourRewardMaze-v0", "ipd")].chains == ["ipd-r0x1", "ipd-r0x2"]
    assert specs[("Hopper-v5", "ipd")].chains == ["ipd-r0x1", "ipd-r0x0.5"]
    assert specs[("Hopper-v5", "wsr")].chains == ["wsr"] and specs[("Hopper-v5", "wsr")].config.method.t_start == 9
    assert specs[("npsco/FourRewardMaze-v0", "wsr")].config.method.t_start == 5
    bad = {**grid, "task": {"Hopper-v5": {"method": {"cpo": {"cpo_max_kl": 0.1}}}}}
    with pytest.raises(NpscoError, match=r"\[task.\"Hopper-v5\".method.cpo\]: 'cpo' is not in methods"):
        parse_grid(bad, "test")
    with pytest.raises(NpscoError, match="must be a table"):
        parse_grid({**grid, "task": {"Hopper-v5": {"method": 3}}}, "test")


def test_threshold_multiples_default_to_each_task_own_and_an_absolute_r0_needs_none():
    from npsco.sweep import parse_grid, plan

    grid = {
        "tasks": ["npsco/FourRewardMaze-v0", "Hopper-v5"],
        "methods": ["ppo", "ipd", "wsr", "cpo"],
        "refs": 2,
        "novel": 1,
        "method": {"ipd": {"r0_scales": ["default", 2]}, "cpo": {"r0": 0.3}},
    }
    chains = {(s.task, s.method): s.chains for s in plan(parse_grid(grid, "test"))}
    assert chains[("npsco/FourRewardMaze-v0", "ipd")] == ["ipd-r0x0.5", "ipd-r0x2"]
    assert chains[("Hopper-v5", "ipd")] == ["ipd-r0x0.5", "ipd-r0x2"]
    assert chains[("npsco/FourRewardMaze-v0", "wsr")] == ["wsr-r0x0.5"] and chains[("Hopper-v5", "wsr")] == [
        "wsr-r0x0.5"
    ]
    assert chains[("Hopper-v5", "cpo")] == ["cpo"]  # r0 = 0.3, absolute
    with pytest.raises(NpscoError, match='or "default"'):
        parse_grid({**grid, "r0_scales": ["twice"]}, "test")


def test_every_tasks_references_start_before_any_methods_jobs(tmp_path, monkeypatch):
    # a reference lies on the path of every chain that borrows it: the scheduler (longest path first) starts the
    # references of every task first (that unblocks the most work), whatever the order of the tasks in the grid
    path = tmp_path / "two.toml"
    path.write_text(
        'tasks = ["npsco/FourRewardMaze-v0", "Pendulum-v1"]\nmethods = ["ppo", "ipd", "wsr"]\nrefs = 2\n'
        "novel = 3\nsteps = 2048\n"
    )
    sweep = Sweep(load_grid(path), tmp_path / "sweep")

    class Ready:  # a population whose one job is ready and ends no chain: its path stands for its jobs
        def __init__(self, spec):
            self.path = spec.path

        def ready(self, busy):
            return [Job(self.path, print, (), steps=2048)]

    monkeypatch.setattr(sweep, "_population", Ready)
    jobs = by_critical_path(sweep.ready(set()))
    assert [job.key for job in jobs] == [
        "FourRewardMaze-v0/ppo",
        "Pendulum-v1/ppo",
        "FourRewardMaze-v0/ipd",
        "FourRewardMaze-v0/wsr",
        "Pendulum-v1/ipd",
        "Pendulum-v1/wsr",
    ]
    # the references wait for nothing; the 3-policy chains that borrow them (not yet opened) come after them
    assert [job.after for job in jobs] == [3 * 2048, 3 * 2048, 0, 0, 0, 0]


def test_experiment_takes_a_repeated_set_as_population_does_the_later_wins():
    from npsco.grid import experiment_grid

    def lr(overrides):
        grid = experiment_grid(["npsco/FourRewardMaze-v0"], ["ipd"], 2, 1, overrides=overrides)
        return {s.config.ppo.learning_rate for s in plan(grid)}

    assert lr(["learning_rate=1e-3", "learning_rate=2e-3"]) == {2e-3}
    assert lr(["learning_rate=1e-3", "num_envs=4", "learning_rate=3e-3"]) == {3e-3}
    with pytest.raises(NpscoError, match="--set expects key=value, got 'learning_rate'"):
        lr(["num_envs=4", "learning_rate"])


def test_a_grid_is_checked_as_population_checks_its_settings(tmp_path, capsys):
    # the task and the env backend are checked when the grid is planned, not in every worker
    path = tmp_path / "envpool.toml"
    path.write_text(TINY_GRID.replace("eval_every = 0", 'eval_every = 0\nenv_backend = "envpool"'))
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert "env_backend envpool runs only" in capsys.readouterr().err
    with pytest.raises(NpscoError, match="task 'CartPole-v1': CartPole-v1: Discrete actions are not supported"):
        parse_grid({"tasks": ["CartPole-v1"], "methods": ["ppo"]}, "test")


def test_a_sweep_recorded_before_a_grid_key_existed_resumes_at_its_default(tmp_path):
    base = {"tasks": ["npsco/FourRewardMaze-v0"], "methods": ["ppo", "ipd"], "refs": 2, "novel": 1}
    out = tmp_path / "sweep"
    old_grid = parse_grid(base, "old").to_dict()
    del old_grid["threshold_episodes"], old_grid["r0_scales"]  # as if npsco gained these keys after the sweep
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"grid": old_grid}))
    changed = parse_grid({**base, "threshold_episodes": 3}, "old")
    with pytest.raises(NpscoError, match=r"another grid \(threshold_episodes: not recorded in the run, 3 now\)"):
        Sweep(changed, out, log=lambda _: None).open()
    Sweep(parse_grid(base, "old"), out, log=lambda _: None).open()


def test_collect_runs_copies_policies_and_manifests_a_report_reads_and_nothing_large(
    local_sweep, tmp_path, monkeypatch, load_script
):
    collect_runs = load_script("benchmarks/collect_runs.py")
    monkeypatch.chdir(tmp_path)
    assert collect_runs.collect(local_sweep, "kept") > 0
    kept = Path("kept")
    assert tree(kept) == tree(local_sweep)
    names = {p.name for p in kept.rglob("*") if p.is_file()}
    assert names == {"sweep.json", "manifest.json", "config.json", "threshold.json", "policy.safetensors"}
    ipd = (kept / "FourRewardMaze-v0/ipd/manifest.json").read_text()
    assert str(local_sweep.resolve()) not in ipd and '"../ppo/refs/ref0"' in ipd  # relative to the population
    config = json.loads((kept / "FourRewardMaze-v0/ipd/config.json").read_text())
    assert config["refs_from"] == "../ppo"  # a sweep records it relative to the run: the copy reads its own
    for run in population_dirs(local_sweep):  # every member as trained, borrowed references included
        copy = kept / run.relative_to(local_sweep) / "manifest.json"
        members = [m["final_eval"] for m in json.loads(copy.read_text())["members"]]
        assert members == [m["final_eval"] for m in json.loads((run / "manifest.json").read_text())["members"]]
    # the copy is a sweep the tools read: its borrowed references resolve, and their hashes still match
    assert main(["report", "kept", "--out", "report", "--no-filmstrips", "--no-videos", "--episodes", "3"]) == 0
    assert (Path("report") / "evaluation.csv").exists()
    assert str(tmp_path) not in (Path("report") / "evaluation.csv").read_text()  # its paths are relative
    assert collect_runs.collect(local_sweep, "kept") == 0  # nothing new: nothing copied again
    with pytest.raises(SystemExit, match="no population run"):
        collect_runs.collect(tmp_path / "report", "elsewhere")


def test_the_python_example_of_docs_sweep_md_runs(monkeypatch, capsys, tmp_path):
    import re
    import tempfile

    block = re.findall(r"^```python\n(.*?)^```", (REPO / "docs/sweep.md").read_text(encoding="utf-8"), re.S | re.M)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its mkdtemp() lands here, removed with tmp_path
    exec(compile(block[0], "docs/sweep.md", "exec"), {"__name__": "__docs_example__"})
    assert "['FourRewardMaze-v0/ppo', 'FourRewardMaze-v0/ipd']" in capsys.readouterr().out


def test_collect_runs_rewrites_whole_paths_under_a_root_only_and_names_those_left(load_script):
    rewrite = load_script("benchmarks/collect_runs.py").rewrite_paths
    roots = {Path("/x/sweep"): Path("kept"), Path("/x"): Path(".")}
    doc = {"a": ["/x/sweep/t/ppo", "/x/sweep_refs/r0", "/y/z", "/x/sweep"], "b": {"c": "text /x/sweep"}, "n": 1.5}
    left: set[str] = set()
    out = rewrite(doc, roots, None, left)
    assert out == {"a": ["kept/t/ppo", "sweep_refs/r0", "/y/z", "kept"], "b": {"c": "text /x/sweep"}, "n": 1.5}
    assert left == {"/y/z"}
    assert rewrite(["/x/sweep/t/ppo/refs/ref0"], roots, Path("kept/t/ipd"), set()) == ["../ppo/refs/ref0"]


def sweep_without_its_last_policy(local_sweep: Path, here: Path) -> Path:
    """A copy of the tiny sweep at `here` as it stood before its IPD policy trained; returns the IPD population."""
    import shutil

    shutil.copytree(local_sweep, here)
    ipd = here / "FourRewardMaze-v0/ipd"
    doc = json.loads((ipd / "manifest.json").read_text())
    k0 = doc["members"][-1]
    shutil.rmtree(ipd / k0["path"])
    doc["members"][-1] = {**k0, "status": "pending", "final_eval": None, "eval_curve": [], "wall_seconds": None}
    (ipd / "manifest.json").write_text(json.dumps(doc))
    return ipd


def archived(sweep: Path, archive: Path) -> Path:
    """`sweep` as the lent machine returns it: a tar.gz holding the sweep folder somewhere below its root."""
    import tarfile

    with tarfile.open(archive, "w:gz") as tar:
        tar.add(sweep, arcname="runs/sweep")
    return archive


def test_device_sweep_merges_what_the_other_machine_finished_and_only_that(local_sweep, tmp_path, load_script):
    device_sweep = load_script("benchmarks/device_sweep.py")
    ipd = sweep_without_its_last_policy(local_sweep, tmp_path / "here" / "sweep")
    here = ipd.parents[1]
    archive = archived(local_sweep, tmp_path / "device.tgz")  # the whole sweep, its IPD policy finished there
    assert device_sweep.merge(archive, here) == ["FourRewardMaze-v0/ipd/ipd-r0x0.5/k0"]
    original = local_sweep / "FourRewardMaze-v0/ipd"
    assert (ipd / "manifest.json").read_text() == (original / "manifest.json").read_text()  # as npsco writes it
    policy = "novel/ipd-r0x0.5/k0/policy.safetensors"
    assert (ipd / policy).read_bytes() == (original / policy).read_bytes()
    assert device_sweep.merge(archive, here) == []  # finished here now: never replaced
    with pytest.raises(SystemExit, match="no sweep.json"):
        device_sweep.merge(archive, ipd)


def test_device_sweep_takes_no_policy_the_other_machine_did_not_finish(local_sweep, tmp_path, load_script):
    import shutil

    device_sweep = load_script("benchmarks/device_sweep.py")
    ipd = sweep_without_its_last_policy(local_sweep, tmp_path / "here" / "sweep")
    there = tmp_path / "there" / "sweep"
    shutil.copytree(local_sweep, there)
    manifest = there / "FourRewardMaze-v0/ipd/manifest.json"
    manifest.write_text(manifest.read_text().replace('"done"', '"training"'))
    assert device_sweep.merge(archived(there, tmp_path / "device.tgz"), ipd.parents[1]) == []
    assert json.loads((ipd / "manifest.json").read_text())["members"][-1]["status"] == "pending"


@pytest.mark.parametrize("change", ["another reference", "another threshold", "not started"])
def test_device_sweep_refuses_a_policy_trained_against_something_else(
    local_sweep, tmp_path, load_script, change, capsys
):
    import shutil

    device_sweep = load_script("benchmarks/device_sweep.py")
    ipd = sweep_without_its_last_policy(local_sweep, tmp_path / "here" / "sweep")
    doc = json.loads((ipd / "manifest.json").read_text())
    if change == "another reference":  # trained here meanwhile: the policy there learnt against another one
        doc["members"][1]["final_eval"]["return_mean"] += 1.0
    elif change == "another threshold":
        doc["r0_default"] *= 2
    (ipd / "manifest.json").write_text(json.dumps(doc))
    if change == "not started":
        shutil.rmtree(ipd)
    before = {p: p.read_bytes() for p in ipd.parents[1].rglob("*") if p.is_file()}
    assert device_sweep.merge(archived(local_sweep, tmp_path / "device.tgz"), ipd.parents[1]) == []
    assert {p: p.read_bytes() for p in ipd.parents[1].rglob("*") if p.is_file()} == before
    assert "not merged" in capsys.readouterr().out


def test_device_sweep_takes_the_threshold_with_the_first_policy_trained_at_it(local_sweep, tmp_path, load_script):
    device_sweep = load_script("benchmarks/device_sweep.py")
    ipd = sweep_without_its_last_policy(local_sweep, tmp_path / "here" / "sweep")
    doc = json.loads((ipd / "manifest.json").read_text())
    (ipd / "manifest.json").write_text(json.dumps({**doc, "r0_default": None}))
    (ipd / "threshold.json").unlink()
    assert len(device_sweep.merge(archived(local_sweep, tmp_path / "device.tgz"), ipd.parents[1])) == 1
    original = local_sweep / "FourRewardMaze-v0/ipd"
    assert json.loads((ipd / "manifest.json").read_text())["r0_default"] == doc["r0_default"]
    assert json.loads((ipd / "threshold.json").read_text()) == json.loads((original / "threshold.json").read_text())


def test_device_sweep_packs_the_pinned_code_the_grid_and_the_sweep_without_logs(local_sweep, tmp_path, load_script):
    import shutil
    import subprocess
    import tarfile

    device_sweep = load_script("benchmarks/device_sweep.py")
    campaign = tmp_path / "campaign"
    (campaign / "src/pkg").mkdir(parents=True)
    (campaign / "src/pkg/mod.py").write_text("X = 1\n")
    (campaign / "grid.toml").write_text(TINY_GRID)
    git = ["git", "-C", str(campaign), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "pinned"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (campaign / "src/pkg/mod.py").write_text("X = 2\n")  # changed since: not what the sweep runs
    shutil.copytree(local_sweep, campaign / "runs/sweep")
    (campaign / "runs/sweep/FourRewardMaze-v0/ppo/refs/ref0/tensorboard").mkdir(exist_ok=True)
    (campaign / "runs/sweep/FourRewardMaze-v0/ppo/refs/ref0/tensorboard/events").write_text("log")
    dest = tmp_path / "devrun"
    device_sweep.pack(campaign, "runs/sweep", "grid.toml", commit, dest, wheels=False)
    assert (dest / "src/pkg/mod.py").read_text() == "X = 1\n" and (dest / "grid.toml").read_text() == TINY_GRID
    assert (dest / "campaign_dir.txt").read_text() == f"{campaign.resolve()}\nruns/sweep\ngrid.toml\n"
    with tarfile.open(dest / "sweep.tgz") as tar:
        names = set(tar.getnames())
    assert "runs/sweep/FourRewardMaze-v0/ipd/manifest.json" in names
    assert "runs/sweep/FourRewardMaze-v0/ppo/refs/ref0/policy.safetensors" in names
    assert not any("tensorboard" in name for name in names)


def test_a_grid_gives_every_methods_population_its_candidates(tmp_path):
    grid = {"tasks": ["npsco/FourRewardMaze-v0"], "methods": ["ppo", "ipd", "lagrangian"], "refs": 2, "novel": 1}
    specs = plan(parse_grid({**grid, "candidates": 3}, "test"))
    assert {s.method: s.config.candidates for s in specs} == {"ppo": 1, "ipd": 3, "lagrangian": 3}
    assert {s.config.candidates for s in plan(parse_grid(grid, "test"))} == {1}
    for bad in (0, 21, 1.5, True):
        with pytest.raises(NpscoError, match="candidates"):
            parse_grid({**grid, "candidates": bad}, "test")


def test_a_populations_warning_and_the_utilisation_reach_the_sweeps_log(tmp_path):
    path = tmp_path / "far.toml"
    path.write_text(TINY_GRID + "\n[method.ipd]\nr0 = 1000.0\n")
    lines: list[str] = []
    sweep = Sweep(load_grid(path), tmp_path / "sweep", log=lines.append)
    sweep.run(InlineExecutor())
    warnings = [line for line in lines if ": warning: " in line]
    assert len(warnings) == 1, lines
    warning = warnings[0]
    assert warning.startswith("FourRewardMaze-v0/ipd: warning: r0 = 1000 is above the largest distance")
    assert any("utilisation" in line and "1 workers" in line for line in lines)
    saved = json.loads((tmp_path / "sweep" / "sweep.json").read_text())["utilisation"]
    assert saved["workers"] == 1 and 0 < saved["busy_seconds"] <= saved["wall_seconds"] + 1e-6
    # a re-run that trains nothing keeps the record of the run that did
    Sweep(load_grid(path), tmp_path / "sweep", log=lines.append).run(InlineExecutor())
    again = json.loads((tmp_path / "sweep" / "sweep.json").read_text())["utilisation"]
    assert [again[k] for k in ("workers", "wall_seconds", "busy_seconds")] == [
        saved[k] for k in ("workers", "wall_seconds", "busy_seconds")
    ]
