"""Bounded inputs (issue 28, item 5): sizes checked before reading (a zip bomb, an oversized checkpoint or JSON file),
special files refused before they are opened for reading (/dev/zero, a FIFO), nesting limited, grid values and
counts checked against npsco's limits, every field of the files npsco reads back type-checked, a full disk one line:
each a one-line error with exit code 2."""

from __future__ import annotations

import errno
import json
import os
import resource
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import npsco.population
import npsco.training
from npsco.cli import main
from npsco.errors import NpscoError

MIB = 2**20
MAX_JSON_BYTES, MAX_CHECKPOINT_BYTES, MAX_IMPORT_BYTES = 64 * MIB, 512 * MIB, 512 * MIB  # npsco.limits
MAX_NESTING = 64
MAX_MANIFEST_BYTES, MAX_CONFIG_BYTES = 32 * MIB, 4 * MIB
GRID = {"tasks": ["npsco/FourRewardMaze-v0"], "methods": ["ppo", "ipd"], "refs": 2, "novel": 1, "steps": 1024}


def one_line(capsys, argv: list[str], *fragments: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    return err


def limited_child(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """`npsco ARGV` in a child process with 2 GiB of address space and a minute: a file read without bounds ends it
    (MemoryError or the timeout) instead of the machine."""

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    return subprocess.run(
        [sys.executable, "-m", "npsco.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        preexec_fn=limit,
    )


def test_the_limits_here_are_npscos():
    import npsco.limits

    limits = (npsco.limits.MAX_JSON_BYTES, npsco.limits.MAX_CHECKPOINT_BYTES, npsco.limits.MAX_IMPORT_BYTES)
    assert limits == (MAX_JSON_BYTES, MAX_CHECKPOINT_BYTES, MAX_IMPORT_BYTES)
    assert npsco.limits.MAX_NESTING == MAX_NESTING
    assert (npsco.limits.MAX_MANIFEST_BYTES, npsco.limits.MAX_CONFIG_BYTES) == (MAX_MANIFEST_BYTES, MAX_CONFIG_BYTES)


# ------------------------------------------------------------------------------------------------ sizes and files
def test_an_sb3_zip_bomb_is_refused_by_its_declared_size_before_it_is_unpacked(sb3_zip, tmp_path, capsys):
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(sb3_zip) as zin, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zout:
        for name in zin.namelist():
            if name != "policy.pth":
                zout.writestr(name, zin.read(name))
        with zout.open("policy.pth", "w") as f:  # 1 MiB of zeros more than the limit, a few hundred KB packed
            zeros = bytes(2**20)
            for _ in range(MAX_IMPORT_BYTES // 2**20 + 1):
                f.write(zeros)
    assert bomb.stat().st_size < 2 * 2**20
    one_line(
        capsys,
        ["import", str(bomb), "--env", "Pendulum-v1", "--out", str(tmp_path / "out")],
        "policy.pth unpacks to",
        "past npsco's limit",
    )
    assert not (tmp_path / "out").exists()


def declared_bomb(path: Path, members: dict[str, bytes], big: str) -> Path:
    """A small zip whose central directory declares member `big` 4 GiB unpacked (a zip bomb by its header)."""
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    raw = bytearray(path.read_bytes())
    entry = raw.find(b"PK\x01\x02")
    while entry != -1:  # each central directory header: name length at +28, name at +46, unpacked size at +24
        length = int.from_bytes(raw[entry + 28 : entry + 30], "little")
        if raw[entry + 46 : entry + 46 + length].decode() == big:
            raw[entry + 24 : entry + 28] = (2**32 - 16).to_bytes(4, "little")
        entry = raw.find(b"PK\x01\x02", entry + 4)
    path.write_bytes(bytes(raw))
    with zipfile.ZipFile(path) as z:
        assert z.getinfo(big).file_size > MAX_IMPORT_BYTES
    return path


def test_a_cleanrl_checkpoint_and_npz_statistics_are_refused_by_their_declared_size(tmp_path, capsys):
    """The other zip archives npsco imports: a torch.save file (a CleanRL checkpoint) and `.npz` statistics, each
    refused by the sizes its header declares, before anything is unpacked."""
    from npsco.importers.cleanrl import read_obs_norm

    pt = declared_bomb(tmp_path / "agent.pt", {"archive/data.pkl": b"x", "archive/data/0": b"0" * 64}, "archive/data/0")
    one_line(
        capsys,
        ["import", str(pt), "--env", "Hopper-v5", "--out", str(tmp_path / "out")],
        "archive/data/0 unpacks to 4,294,967,280 bytes, past npsco's limit",
    )
    assert not (tmp_path / "out").exists()
    npz = declared_bomb(tmp_path / "stats.npz", {"mean.npy": b"0" * 64, "var.npy": b"0" * 64}, "var.npy")
    with pytest.raises(NpscoError, match="var.npy unpacks to 4,294,967,280 bytes, past npsco's limit"):
        read_obs_norm(npz)


def test_a_zip_member_larger_than_its_header_says_is_cut_at_the_limit(tmp_path):
    from npsco.importers.common import read_zip_member

    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("data", b"x" * 5000)
    with zipfile.ZipFile(path) as z, pytest.raises(NpscoError, match="unpacks to more than 1,000 bytes"):
        read_zip_member(z, "data", str(path), limit=1000)


@pytest.mark.parametrize(
    "target, limit",
    [
        ("refs/ref0/policy.safetensors", MAX_CHECKPOINT_BYTES),
        ("manifest.json", MAX_MANIFEST_BYTES),
        ("config.json", MAX_CONFIG_BYTES),
    ],
)
def test_an_oversized_file_is_refused_by_its_kinds_limit_before_it_is_read(
    target, limit, planned_run, tmp_path, capsys
):
    out = tmp_path / "run"
    planned_run(out)
    with open(out / target, "r+b") as f:  # sparse: the size on disk stays small
        f.truncate(limit + 1)
    one_line(capsys, ["evaluate", str(out)], f"{limit + 1:,} bytes, past npsco's limit of {limit:,}")


def test_a_config_of_50_mb_is_refused_before_it_is_parsed(planned_run, tmp_path, capsys):
    """Under the 64 MiB of any JSON file, past config.json's 4 MiB: once parsed, it took 2.7 GB."""
    out = tmp_path / "run"
    planned_run(out)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "notes": [0.5] * (50 * MIB // 5)}))
    one_line(capsys, ["evaluate", str(out)], "config.json: ", f"past npsco's limit of {MAX_CONFIG_BYTES:,}")


@pytest.mark.parametrize("target", ["refs/ref0/policy.safetensors", "manifest.json", "config.json"])
@pytest.mark.parametrize("special", ["/dev/zero", "a FIFO"])
def test_special_files_in_a_run_are_refused_before_they_are_read(special, target, planned_run, tmp_path, children):
    out = tmp_path / "run"
    planned_run(out)
    (out / target).unlink()
    if special == "a FIFO":
        os.mkfifo(out / target)
    else:
        os.symlink(special, out / target)
    child = limited_child(["evaluate", str(out)], children.env)
    # a link to a device inside a run is refused as a link, before anything is opened (npsco.paths)
    said = "a FIFO, not a regular file; refused" if special == "a FIFO" else f"{target}: a symbolic link inside"
    assert child.returncode == 2, child.stderr
    assert child.stderr.count("\n") == 1 and said in child.stderr, child.stderr


def test_read_bytes_and_read_json_refuse_what_is_not_a_regular_file_of_a_sane_size(tmp_path):
    from npsco.io import read_bytes, read_json

    os.mkfifo(tmp_path / "fifo")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "sock"))
    (tmp_path / "big.json").write_text("[" + "0," * 100 + "0]")
    for path, message in [
        (tmp_path / "fifo", "a FIFO, not a regular file"),
        (tmp_path / "sock", "a socket, not a regular file"),
        (Path("/dev/zero"), "a character device, not a regular file"),
        (tmp_path, "a folder, not a regular file"),
        (tmp_path / "missing", "file not found"),
    ]:
        with pytest.raises(NpscoError, match=message):
            read_bytes(path, 100)
    with pytest.raises(NpscoError, match="203 bytes, past npsco's limit of 100"):
        read_json(tmp_path / "big.json", limit=100)
    (tmp_path / "nan.json").write_text('{"r0_default": NaN}')
    with pytest.raises(NpscoError, match="NaN is not a JSON number"):
        read_json(tmp_path / "nan.json")
    listening.close()


# ------------------------------------------------------------------------------------------------------- nesting
@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 100_000])
def test_deeply_nested_json_and_toml_are_one_line_errors(depth, planned_run, tmp_path, capsys):
    out = tmp_path / "run"
    planned_run(out)
    (out / "manifest.json").write_text('{"members": ' + "[" * depth + "]" * depth + "}")
    one_line(capsys, ["evaluate", str(out)], "manifest.json: nested deeper than 64 levels")
    grid = tmp_path / "deep.toml"
    grid.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in GRID.items()) + "\nx = " + "[" * depth + "]" * depth)
    one_line(capsys, ["sweep", str(grid), "--dry-run"], str(grid), "nested")


# ------------------------------------------------------------------------------------------- counts against limits
@pytest.mark.parametrize(
    "key, value, limit",
    [
        ("refs", 1e9, "1,000"),
        ("novel", 1e9, "1,000"),
        ("eval_episodes", 1e12, "100,000"),
        ("threshold_episodes", 1e12, "100,000"),
        ("steps", 1e15, "100,000,000,000"),
        ("ppo", {"num_envs": 1e8}, "4,096"),
        ("ppo", {"eval_episodes": 1e12}, "100,000"),
    ],
)
def test_grid_values_past_the_limits_are_refused_by_a_dry_run(key, value, limit, tmp_path, capsys):
    grid = tmp_path / "big.toml"
    settings = {**GRID, **({"steps": 1e10} if key == "ppo" else {key: value})}  # a batch of 1e8 envs fits 1e10 steps
    lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    if key == "ppo":
        lines += ["[ppo]", *(f"{k} = {v}" for k, v in value.items())]
    grid.write_text("\n".join(lines) + "\n")
    one_line(capsys, ["sweep", str(grid), "--dry-run"], f"past npsco's limit of {limit}")


@pytest.mark.parametrize(
    "args, limit",
    [
        (["--refs", "1000000000"], "--refs = 1,000,000,000 is past npsco's limit of 1,000"),
        (["--novel", "1000000000"], "--novel = 1,000,000,000 is past npsco's limit of 1,000"),
        (
            ["--steps", "1e10", "--set", "num_envs=100000000"],
            "ppo.num_envs = 100,000,000 is past npsco's limit of 4,096",
        ),
        (["--set", "eval_episodes=1000000000000"], "ppo.eval_episodes = 1,000,000,000,000 is past"),
    ],
)
def test_population_counts_past_the_limits_are_refused_before_anything_is_written(args, limit, tmp_path, capsys):
    one_line(capsys, ["population", *args, "--out", str(tmp_path / "out")], limit)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------- typed fields
@pytest.mark.parametrize(
    "file, edit, field",
    [
        ("manifest.json", lambda d: d.update(members="ref0"), "members must be a list of objects, got 'ref0'"),
        ("manifest.json", lambda d: d["members"][0].update(path=None), "members[0].path must be a string, got null"),
        ("manifest.json", lambda d: d["members"][0].update(final_eval=[]), "members[0].final_eval must be an object"),
        ("manifest.json", lambda d: d["members"][1].update(seed="1"), "members[1].seed must be a whole number"),
        ("manifest.json", lambda d: d["members"].__setitem__(0, 7), "members[0] must be an object, got 7"),
        ("manifest.json", lambda d: d["members"][0].update(status="finished"), "members[0].status must be one of"),
        ("manifest.json", lambda d: d.update(r0_default="big"), "r0_default must be a number above 0 or null"),
        (
            "manifest.json",
            lambda d: d["members"][0].update(eval_curve=[[1, "a"]]),
            "members[0].eval_curve[0][1] must be a",
        ),
        (
            "manifest.json",
            lambda d: d["members"][0]["final_eval"].update(return_mean=None),
            "members[0].final_eval.return_mean must",
        ),
        ("config.json", lambda d: d.update(ppo=[]), "ppo must be an object, got []"),
        ("config.json", lambda d: d["ppo"].update(max_episode_steps="10"), "ppo.max_episode_steps must be a whole"),
    ],
)
def test_every_wrongly_typed_field_is_one_line_naming_the_file_and_the_field(
    file, edit, field, planned_run, tmp_path, capsys
):
    out = tmp_path / "run"
    argv = planned_run(out)
    data = json.loads((out / file).read_text())
    edit(data)
    (out / file).write_text(json.dumps(data))
    for command in (["evaluate", str(out)], argv):  # a reader, and the writer resuming
        one_line(capsys, command, f"{out / file}: {field}")


def test_a_wrongly_typed_threshold_and_sweep_file_are_one_line(planned_run, tmp_path, capsys):
    out = tmp_path / "run"
    planned_run(out)
    (out / "threshold.json").write_text(json.dumps({"r0_default": "0.3"}))
    data = json.loads((out / "manifest.json").read_text())
    data["r0_default"] = None
    (out / "manifest.json").write_text(json.dumps(data))
    one_line(
        capsys, ["evaluate", str(out)], f"{out / 'threshold.json'}: r0_default must be a number above 0, got '0.3'"
    )
    (tmp_path / "sweep.json").write_text(json.dumps({"populations": [{"path": 3}]}))
    one_line(capsys, ["report", str(tmp_path), "--out", str(tmp_path / "r")], "populations[0].path must be a string")
    (tmp_path / "sweep.json").write_text(json.dumps({"populations": [{"path": "../../etc"}]}))
    one_line(capsys, ["report", str(tmp_path), "--out", str(tmp_path / "r")], "is not inside the sweep folder")


# ------------------------------------------------------------------------------------------------------ full disk
def full_disk(path, obj):
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


@pytest.mark.parametrize("command", ["population", "train"])
def test_a_full_disk_is_one_line_saying_what_was_kept(command, monkeypatch, tmp_path, capsys):
    module = npsco.population if command == "population" else npsco.training
    monkeypatch.setattr(module, "atomic_write_json", full_disk)
    out = tmp_path / "out"
    one_line(
        capsys,
        [command, "--steps", "1024", "--no-progress", "--out", str(out)],
        f"npsco {command}: error: the disk is full while writing {out / 'config.json'}: every file npsco wrote "
        "before is whole (files are replaced atomically) and finished policies are kept; free some space and run "
        "the same command again to resume",
    )


# --------------------------------------------------------------------------------------------- memory and time
def test_evaluate_runs_many_episodes_in_groups_in_bounded_memory(constant_policy, tmp_path, children):
    """2,000 Hopper episodes side by side took 2.2 GB (one ~1.1 MB MuJoCo env each; 100,000 were killed at 24 GB):
    they run in groups of 128 now, every return kept. 1,200 episodes (~1.3 GB before) peak within 150 MB of what
    one group of 128 does (the same child process otherwise)."""
    policy = constant_policy("Hopper-v5", 0.0)
    policy.metadata["config"] = {"max_episode_steps": 5}  # short episodes: the test is about memory
    policy.save(tmp_path / "policy.safetensors")
    measured = (
        "import resource, runpy, sys\n"
        "sys.argv = ['npsco', 'evaluate', sys.argv[1], '--episodes', sys.argv[2]]\n"
        "try:\n    runpy.run_module('npsco.cli', run_name='__main__')\n"
        "finally:\n    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    )
    peaks = {}
    for episodes in (128, 1200):
        child = subprocess.run(
            [sys.executable, "-c", measured, str(tmp_path / "policy.safetensors"), str(episodes)],
            capture_output=True,
            text=True,
            env=children.env,
            timeout=300,
        )
        assert child.returncode == 0, child.stderr[-2000:]
        peaks[episodes] = int(child.stderr.split()[-1])  # KiB
        written = json.loads((tmp_path / "policy.eval.json").read_text())
        assert written["episodes"] == episodes and len(written["returns"]) == episodes
    assert peaks[1200] < peaks[128] + 150 * 1024, peaks


def test_a_policys_distances_are_measured_on_at_most_the_cap_of_states_and_its_return_on_every_episode(
    maze_policies, monkeypatch
):
    """`evaluate RUN` measures distances and descriptors on at most `MAX_MEASURED_STATES` visited states per policy
    (those of the first episodes), its return on every episode (the cap lowered to 50 here: 100,000 in use)."""
    import npsco.evaluation.measure as measure

    monkeypatch.setattr(measure, "MAX_MEASURED_STATES", 50)
    policy = maze_policies.const((1.0, 0.0))
    measured = measure.measure_policy(policy, 6, seed=0, max_episode_steps=20)
    assert len(measured.states) == 50 and len(measured.episodes.returns) == 6
    full = measure.run_episodes(policy, 6, seed=0, max_episode_steps=20, record_states=True)
    assert np.array_equal(measured.states, np.concatenate(full.states)[:50])  # the first episodes' states


def test_episodes_in_groups_are_those_run_side_by_side(maze_policies, monkeypatch):
    """Episode i is seeded seed + i in any group; a group's first episodes are those of a run of that group alone."""
    from npsco import episodes as module

    sizes = []
    make = module.make_vector_env
    monkeypatch.setattr(module, "make_vector_env", lambda env_id, n, **kw: sizes.append(n) or make(env_id, n, **kw))
    policy = maze_policies.step()
    every = module.run_episodes(policy, 300, seed=7, record_states=True, max_states=500)
    assert sizes == [128, 128, 44]
    alone = module.run_episodes(policy, 44, seed=7 + 256)
    assert np.array_equal(every.returns[256:], alone.returns) and np.array_equal(every.lengths[256:], alone.lengths)
    first = module.run_episodes(policy, 128, seed=7)
    assert np.array_equal(every.returns[:128], first.returns)
    assert sum(len(s) for s in every.states) == 500 and len(every.states) == 300  # the states kept are bounded
    assert every.final_obs is not None and every.final_obs.shape == (300, 2)


def test_a_checkpoint_listing_millions_of_layers_is_refused_at_once(maze_policies, tmp_path, capsys):
    """Its metadata listed 2,000,000 hidden layers: refused after 9-42 s at 1.1 GB, with a 90 MB message."""
    from safetensors.numpy import load, save

    path = maze_policies.const((1.0, 0.0)).save(tmp_path / "p.safetensors")
    raw = path.read_bytes()
    header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
    meta = json.loads(header["__metadata__"]["npsco"])
    for layers, fragment in [
        (2_000_000, "its header (metadata) is 6,0"),  # past the header's 1 MiB
        (100_000, "100,000 hidden layers, but the file holds"),
    ]:
        meta["architecture"]["actor_hidden"] = [2] * layers
        forged = tmp_path / f"forged{layers}.safetensors"
        forged.write_bytes(save(load(raw), metadata={"npsco": json.dumps(meta)}))
        start = time.monotonic()
        err = one_line(capsys, ["evaluate", str(forged)], fragment)
        assert time.monotonic() - start < 5 and len(err) < 700


def test_every_message_is_one_line_of_a_bounded_length():
    from npsco.errors import MAX_MESSAGE_CHARS

    e = NpscoError("bad value: " + "x" * 90_000_000 + "\nsecond line")
    assert len(str(e)) == MAX_MESSAGE_CHARS and "\n" not in str(e)
    assert str(e).startswith("bad value: xxx") and str(e).endswith("more characters cut)")
    assert str(NpscoError("short\n\tmessage")) == "short message"


@pytest.mark.parametrize("field", ["threshold", "wall_seconds", "return_mean"])
def test_a_members_number_too_large_for_a_float_is_refused_too(field, planned_run, tmp_path, capsys):
    """The issue's other 1e400 fields, of a finished reference: refused by a reader and by the resume, not only kept
    from a traceback."""
    out = tmp_path / "run"
    argv = planned_run(out)
    manifest = json.loads((out / "manifest.json").read_text())
    member = manifest["members"][0]
    (member["final_eval"] if field == "return_mean" else member)[field] = "__BIG__"
    (out / "manifest.json").write_text(json.dumps(manifest).replace('"__BIG__"', "1e400"))
    for command in (["evaluate", str(out)], argv):
        one_line(capsys, command, "manifest.json: the number 1e400 is too large (it would be read as infinity)")


def test_a_manifest_number_too_large_for_a_float_is_refused_by_readers_and_resume(planned_run, tmp_path, capsys):
    """`"r0_default": 1e400` parsed as infinity and passed; the resume then failed with a traceback."""
    out = tmp_path / "run"
    argv = planned_run(out, threshold=["--r0-scale", "2"])
    text = (out / "manifest.json").read_text().replace('"r0_default": null', '"r0_default": 1e400')
    (out / "manifest.json").write_text(text)
    for command in (["evaluate", str(out)], argv):
        one_line(capsys, command, "manifest.json: the number 1e400 is too large (it would be read as infinity)")
