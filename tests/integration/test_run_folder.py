"""Paths come from the layout, never from a file (issue 28, item 1): a manifest whose member paths point outside the
run, at the whole run, or through a symbolic link is refused before anything is deleted or trained; readers refuse
it too; one function deletes (`npsco.io.remove_inside`), and it deletes only inside a folder, through no link."""

from __future__ import annotations

import ast
import json
import os
import shutil
from pathlib import Path

import pytest

from npsco.cli import main
from npsco.errors import NpscoError
from npsco.paths import output_file
from npsco.ppo.trainer import Trainer

SRC = Path(__file__).resolve().parents[2] / "src" / "npsco"


@pytest.fixture
def no_training(monkeypatch):
    """Training fails the test at once: every case below must be refused before anything trains."""

    def refuse(*args, **kwargs):
        raise AssertionError("a run with a forged manifest started training")

    monkeypatch.setattr(Trainer, "train", refuse)


@pytest.fixture
def victim(tmp_path) -> Path:
    """A folder outside the run with a file in it, which nothing may touch."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me")
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` and its bytes, but the lock file (a command that takes the lock writes its pid)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".npsco.lock"
    }


def edit_member(out: Path, member: str, **fields) -> None:
    path = out / "manifest.json"
    data = json.loads(path.read_text())
    for m in data["members"]:
        if m["name"] == member:
            m.update(fields)
    path.write_text(json.dumps(data))


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "name, fields",
    [
        ("ref1", {"path": "../victim", "status": "training"}),
        ("ref1", {"path": "VICTIM", "status": "pending"}),  # an absolute path
        ("ref1", {"path": "../victim", "status": "done"}),  # a finished reference, read by the resume
        ("ref1", {"path": "VICTIM", "status": "done"}),
        ("ipd/k0", {"path": "../victim", "status": "training"}),
        ("ipd/k0", {"path": "VICTIM", "status": "pending"}),
        ("ref1", {"path": "", "status": "training"}),  # the whole run
        ("ipd/k0", {"path": "", "status": "training"}),
        ("ipd/k0", {"path": ".", "status": "pending"}),
        ("ipd/k0", {"path": "novel/ipd/k7"}),  # inside the run, but not where the layout puts it
        ("ipd/k0", {"chain": "../../x", "name": "../../x/k0", "path": "novel/../../x/k0"}),
        ("ref1", {"seed": 5}),  # not the plan's seed
    ],
)
def test_a_member_path_that_is_not_the_layouts_is_refused_and_nothing_is_deleted(
    name, fields, planned_run, victim, tmp_path, capsys, no_training
):
    out = tmp_path / "run"
    argv = planned_run(out)
    fields = {k: str(victim) if v == "VICTIM" else v for k, v in fields.items()}
    if name == "ref1" and fields.get("status") in ("training", "pending"):  # to train: the run must not hold it done
        (out / "refs" / "ref1" / "policy.safetensors").unlink()
    edit_member(out, name, **fields)
    before, run_before = snapshot(victim), snapshot(out)
    assert main(argv) == 2
    err = one_line_error(capsys)
    assert str(out / "manifest.json") in err and "member" in err, err
    assert snapshot(victim) == before
    assert snapshot(out) == run_before  # nothing deleted, nothing written (but the lock file)


def test_readers_refuse_a_manifest_whose_novel_policy_lies_elsewhere(planned_run, victim, tmp_path, capsys):
    out = tmp_path / "run"
    planned_run(out)
    edit_member(out, "ipd/k0", path="../victim", status="done", final_eval={"return_mean": 0.0, "return_std": 0.0})
    for argv in (["evaluate", str(out)], ["report", str(out), "--out", str(tmp_path / "report")]):
        assert main(argv) == 2
        err = one_line_error(capsys)
        assert "member 'ipd/k0'" in err and "not where this run keeps it (novel/ipd/k0)" in err, err


def test_a_novel_folder_that_is_a_symbolic_link_is_never_written_through(
    planned_run, victim, tmp_path, capsys, no_training
):
    out = tmp_path / "run"
    argv = planned_run(out)
    (victim / "ipd" / "k0").mkdir(parents=True)
    (victim / "ipd" / "k0" / "metrics.jsonl").write_text("{}\n")
    os.symlink(victim, out / "novel")  # the resume would train ipd/k0 in novel/ipd/k0
    edit_member(out, "ipd/k0", status="training")
    before = snapshot(victim)
    assert main(argv) == 2
    err = one_line_error(capsys)
    assert "a symbolic link inside" in err and str(out / "novel") in err, err
    assert snapshot(victim) == before


def test_a_borrowed_reference_is_read_where_it_lies_and_never_trained(planned_run, tmp_path, capsys):
    """A committed run's references borrowed by relative paths outside it (benchmarks/results/paper/extra: its
    config.json names them relative to the repository's root) load; a borrowed reference that claims to need
    training is refused."""
    out = tmp_path / "run"
    planned_run(out)
    config = json.loads((out / "config.json").read_text())
    config["ref_checkpoints"] = ["sweep/refs/ref0", "sweep/refs/ref1"]  # from the folder above the run
    (out / "config.json").write_text(json.dumps(config))
    data = json.loads((out / "manifest.json").read_text())
    elsewhere = tmp_path / "sweep" / "refs"
    (out / "refs").rename(tmp_path / "moved")
    elsewhere.parent.mkdir()
    (tmp_path / "moved").rename(elsewhere)
    for m in data["members"][:2]:
        m["path"] = f"../sweep/refs/{m['name']}"
    data["members"][2].update(status="done", final_eval={"return_mean": 0.0, "return_std": 0.0})
    (out / "novel" / "ipd" / "k0").mkdir(parents=True)
    os.link(elsewhere / "ref0" / "policy.safetensors", out / "novel" / "ipd" / "k0" / "policy.safetensors")
    (out / "manifest.json").write_text(json.dumps(data))
    assert main(["evaluate", str(out), "--episodes", "2"]) == 0
    capsys.readouterr()
    data["members"][1]["status"] = "training"
    (out / "manifest.json").write_text(json.dumps(data))
    assert main(["evaluate", str(out), "--episodes", "2", "--force"]) == 2
    assert "a borrowed reference" in one_line_error(capsys)


# ---------------------------------------------------------------------------------------------- the delete function
def test_inside_refuses_paths_outside_the_folder_and_through_links(tmp_path):
    from npsco.io import inside

    root = tmp_path / "run"
    (root / "refs" / "ref0").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "link")
    assert inside(root, "refs/ref0") == root / "refs" / "ref0"
    assert inside(root, root / "refs" / "ref0") == root / "refs" / "ref0"  # absolute, inside
    assert inside(root, "novel/ipd/k0") == root / "novel" / "ipd" / "k0"  # not there yet
    for bad in ("", ".", "..", "../elsewhere", "refs/../..", str(tmp_path / "elsewhere"), "/etc/passwd"):
        with pytest.raises(NpscoError, match="not inside the folder"):
            inside(root, bad)
    for linked in ("link", "link/x", "link/x/y"):
        with pytest.raises(NpscoError, match="a symbolic link inside"):
            inside(root, linked)


def test_remove_inside_deletes_files_and_folders_but_never_follows_a_link(tmp_path):
    from npsco.io import remove_inside

    root = tmp_path / "run"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "keep").write_text("keep")
    os.symlink(tmp_path / "elsewhere", root / "a" / "link")  # inside the folder it deletes: removed, not followed
    os.symlink(tmp_path / "elsewhere", root / "top")
    remove_inside(root, "a")
    assert not (root / "a").exists() and (tmp_path / "elsewhere" / "keep").read_text() == "keep"
    with pytest.raises(NpscoError, match="a symbolic link inside"):
        remove_inside(root, "top")
    with pytest.raises(NpscoError, match="not inside the folder"):
        remove_inside(root, "")
    remove_inside(root, "missing")  # nothing there: nothing to do


def test_fresh_dir_empties_the_folder_in_place_keeping_its_lock_file(tmp_path):
    from npsco.io import fresh_dir

    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    for name in ("config.json", "policy.safetensors", "checkpoints/last.safetensors", ".npsco.lock"):
        (out / name).write_text(name)
    (out / ".npsco-trash-1").mkdir()  # what a killed emptying left
    inode = out.stat().st_ino
    fresh_dir(out)
    assert sorted(p.name for p in out.iterdir()) == [".npsco.lock"] and out.stat().st_ino == inode


def test_stale_temp_files_of_killed_atomic_writes_are_removed(tmp_path):
    from npsco.io import STALE_TEMP, remove_stale_temps

    (tmp_path / ".manifest.json.k2j_8x0q.tmp").write_text("{")
    (tmp_path / ".sweep.json.abcdefgh.tmp").write_text("{")
    (tmp_path / "notes.tmp").write_text("mine")
    (tmp_path / "manifest.json").write_text("{}")
    assert sorted(remove_stale_temps(tmp_path)) == [".manifest.json.k2j_8x0q.tmp", ".sweep.json.abcdefgh.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "notes.tmp"]
    assert STALE_TEMP.match(".policy.safetensors.abc_1234.tmp")


# Deletions in src/ go through npsco.io.remove_inside alone. Three deletions in modules that this change leaves to
# their owners (report/, ppo/) are the known exceptions until they call remove_inside too.
DELETERS = {"rmtree", "unlink", "remove", "rmdir", "removedirs"}
DELETE_EXCEPTIONS = {
    "io.py:remove_inside: shutil.rmtree(target)",
    "io.py:remove_inside: target.unlink()",
}


def test_nothing_in_src_deletes_but_the_one_checked_function(module_calls):
    def deletions(tree: ast.AST) -> list[str]:
        return [f"{c.scope}: {c.text}" for c in module_calls(tree) if c.name in DELETERS]

    found = {
        f"{path.relative_to(SRC)}:{call}"
        for path in sorted(SRC.rglob("*.py"))
        for call in deletions(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert {c for c in DELETE_EXCEPTIONS if c.startswith("io.py")} <= found, "the scan does not see remove_inside"
    assert sorted(found - DELETE_EXCEPTIONS) == [], "delete through npsco.io.remove_inside"
    assert deletions(ast.parse("def f(p):\n    shutil.rmtree(p)\n    os.unlink(p)\n    p.unlink()\n")) == [
        "f: shutil.rmtree(p)",
        "f: os.unlink(p)",
        "f: p.unlink()",
    ]


def test_an_evaluation_folder_that_is_a_symbolic_link_is_never_written_through(
    planned_run, victim, tmp_path, capsys, monkeypatch
):
    """`npsco evaluate` writes RUN/evaluation/ only when it is a real folder of the run: a link to elsewhere is refused
    before anything is evaluated, and what it points to is left as it was."""
    out = tmp_path / "run"
    planned_run(out)
    edit_member(out, "ipd/k0", status="done", final_eval={"return_mean": 0.0, "return_std": 0.0})
    (out / "novel" / "ipd" / "k0").mkdir(parents=True)
    shutil.copy(out / "refs" / "ref0" / "policy.safetensors", out / "novel" / "ipd" / "k0" / "policy.safetensors")
    os.symlink(victim, out / "evaluation")
    before = snapshot(victim)
    assert main(["evaluate", str(out), "--episodes", "2"]) == 2
    err = one_line_error(capsys)
    assert "a symbolic link inside" in err and str(out / "evaluation") in err, err
    assert snapshot(victim) == before
    (out / "evaluation").unlink()  # the same run with a real folder: evaluated and written there (a relative path too)
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "run", "--episodes", "2"]) == 0
    assert (out / "evaluation" / "evaluation.json").is_file() and not (out / "run").exists()


# ---------------------------------------------------------------------------------------- links below a run folder
@pytest.mark.parametrize("below", ["checkpoints", "tensorboard", "metrics.jsonl"])
def test_a_training_folder_with_a_link_below_it_is_refused_before_anything_is_read(below, victim, tmp_path):
    """The Trainer (`npsco train`'s, and a population's in its worker) checks its folder before it reads the saved
    state or writes anything: a link to elsewhere is refused, and the folder it points to is left as it was."""
    from npsco.ppo.config import preset
    from npsco.tasks import MAZE_ID

    run = tmp_path / "run"
    run.mkdir()
    (victim / "state.safetensors").write_bytes(b"not a state")
    os.symlink(victim / "precious.txt" if below == "metrics.jsonl" else victim, run / below)
    before = snapshot(victim)
    with pytest.raises(NpscoError, match=f"{run / below}: a symbolic link inside {run}"):
        Trainer(preset(MAZE_ID), run_dir=run, resume=True)
    assert snapshot(victim) == before


def test_a_population_member_with_a_link_below_it_is_refused_before_it_trains(
    planned_run, victim, tmp_path, capsys, no_training
):
    """`novel/ipd/k0/checkpoints` a link (the member in training): the resume refuses before anything is read."""
    out = tmp_path / "run"
    argv = planned_run(out)
    (out / "novel" / "ipd" / "k0").mkdir(parents=True)
    os.symlink(victim, out / "novel" / "ipd" / "k0" / "checkpoints")
    edit_member(out, "ipd/k0", status="training")
    before = snapshot(victim)
    assert main(argv) == 2
    assert f"{out / 'novel' / 'ipd' / 'k0' / 'checkpoints'}: a symbolic link inside {out}" in one_line_error(capsys)
    assert snapshot(victim) == before


@pytest.mark.parametrize("reader", ["threshold", "--refs-from", "evaluate", "report"])
def test_every_reader_refuses_a_run_with_a_link_below_a_member_before_it_reads(
    reader, planned_run, victim, tmp_path, capsys
):
    """A reference's `tensorboard/` a link out of the run: `threshold RUN`, a population borrowing from RUN, `evaluate`
    and `report` refuse in one line naming the link, before anything is read or written there."""
    out = tmp_path / "run"
    planned_run(out)
    os.symlink(victim, out / "refs" / "ref0" / "tensorboard")
    argv = {
        "threshold": ["threshold", str(out), "--episodes", "2"],
        "--refs-from": ["population", "--refs-from", str(out), "--novel", "1", "--out", str(tmp_path / "new")],
        "evaluate": ["evaluate", str(out), "--episodes", "2"],
        "report": ["report", str(out), "--episodes", "2", "--no-videos", "--out", str(tmp_path / "report")],
    }[reader]
    before = snapshot(victim)
    assert main(argv) == 2
    assert f"{out / 'refs' / 'ref0' / 'tensorboard'}: a symbolic link inside {out}" in one_line_error(capsys)
    assert snapshot(victim) == before and not (tmp_path / "new").exists() and not (tmp_path / "report").exists()


def test_a_sweep_with_a_link_below_a_run_is_refused_before_it_reads(victim, tmp_path, capsys):
    """A finished sweep whose reference run holds a link out of the sweep: its resume and its report refuse in one
    line naming the link."""
    from npsco.tasks import task_name

    grid = tmp_path / "grid.toml"
    grid.write_text(
        'name = "tiny"\ntasks = ["npsco/FourRewardMaze-v0"]\nmethods = ["ppo", "ipd"]\nrefs = 2\nnovel = 1\n'
        "steps = 1024\neval_episodes = 2\nthreshold_episodes = 2\n[ppo]\neval_every = 0\n"
    )
    out = tmp_path / "sweep"
    assert main(["sweep", str(grid), "--out", str(out)]) == 0
    capsys.readouterr()
    link = out / task_name("npsco/FourRewardMaze-v0") / "ppo" / "refs" / "ref0" / "tensorboard"
    shutil.rmtree(link, ignore_errors=True)
    os.symlink(victim, link)
    before = snapshot(victim)
    for argv in (
        ["sweep", str(grid), "--out", str(out)],
        ["report", str(out), "--no-videos", "--out", str(tmp_path / "r")],
    ):
        assert main(argv) == 2
        assert f"{link}: a symbolic link inside" in one_line_error(capsys)
    assert snapshot(victim) == before and not (tmp_path / "r").exists()


def test_a_run_folder_reached_through_a_link_is_read_and_resumed(planned_run, tmp_path, capsys, no_training):
    """`runs/` on another disk, reached through a link: the run itself may lie behind links (only what is below it
    may not); evaluate reads it, and the resume gets past every path check to training."""
    real = tmp_path / "disk" / "runs"
    real.mkdir(parents=True)
    os.symlink(real, tmp_path / "runs")
    out = tmp_path / "runs" / "run"
    argv = planned_run(out)
    assert main(["evaluate", str(out), "--episodes", "2"]) == 0
    assert (real / "run" / "evaluation" / "evaluation.json").exists()
    with pytest.raises(AssertionError, match="started training"):  # every check passed: it would train now
        main(argv)


def test_an_output_folder_inside_a_run_is_reached_through_no_link(planned_run, victim, tmp_path):
    """`npsco report OTHER --out RUN/report` with RUN/report a link: refused (`npsco.paths.output_folder`), though the
    run it lies in is not one the command reads."""
    from npsco.paths import output_folder

    out = tmp_path / "run"
    planned_run(out)
    os.symlink(victim, out / "report")
    with pytest.raises(NpscoError, match=f"--out {out / 'report'}: {out / 'report'} is a symbolic link inside {out}"):
        output_folder(out / "report")
    assert output_folder(tmp_path / "elsewhere") == tmp_path / "elsewhere"  # outside any run: nothing to check


def test_a_borrowed_reference_must_be_where_config_json_borrows_it_from(planned_run, tmp_path, capsys):
    """A borrowing run whose manifest points a reference at another folder than its config.json's `refs_from` run
    keeps it: refused by every reader, though the checkpoint there is a real policy."""
    refs = tmp_path / "refs"
    planned_run(refs)
    out = tmp_path / "run"
    (out / "refs").mkdir(parents=True)
    shutil.copytree(refs / "refs" / "ref0", tmp_path / "other" / "ref0")
    data = json.loads((refs / "manifest.json").read_text())
    data["members"] = [{**m, "path": str(refs / m["path"])} for m in data["members"] if m["role"] == "reference"]
    config = {**json.loads((refs / "config.json").read_text()), "refs_from": str(refs)}
    (out / "config.json").write_text(json.dumps(config))
    (out / "manifest.json").write_text(json.dumps(data))
    assert main(["threshold", str(out), "--episodes", "2"]) == 0  # where refs_from keeps them: read
    capsys.readouterr()
    data["members"][0]["path"] = str(tmp_path / "other" / "ref0")
    (out / "manifest.json").write_text(json.dumps(data))
    assert main(["threshold", str(out), "--episodes", "2"]) == 2
    assert f"is not where this run's config.json says it borrows its references from ({refs}" in one_line_error(capsys)


def test_an_output_file_is_no_folder_and_its_folder_is_checked(tmp_path):
    assert output_file(tmp_path / "th.json") == tmp_path / "th.json"
    with pytest.raises(NpscoError, match="is a folder; give the path of a file"):
        output_file(tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_text("{}")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "run" / "link")
    with pytest.raises(NpscoError, match="symbolic link inside"):
        output_file(tmp_path / "run" / "link" / "th.json")
