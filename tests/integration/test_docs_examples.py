"""The documentation's examples run, and its generated tables and format description match the code.

Every fenced ```python block of the pages below is executed on its own (fresh namespace, a temporary working
directory), with `NPSCO_CHECKPOINT` set to a checkpoint trained here with a tiny budget — the variable the examples
document."""

import dataclasses
import json
import re
import shlex
from pathlib import Path

import pytest

from npsco.cli import main
from npsco.policy import REQUIRED_METADATA
from npsco.ppo.config import preset
from npsco.ppo.train import train
from npsco.tasks import MAZE_ID

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ["checkpoints.md", "configuration.md", "environments.md", "methods/api.md", "python.md"]


def python_blocks(page: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (DOCS / page).read_text(encoding="utf-8"), re.S | re.M)


EXAMPLES = [(page, i) for page in PAGES for i in range(len(python_blocks(page)))]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    cfg = dataclasses.replace(preset(MAZE_ID), total_timesteps=1024, eval_every=0)
    run_dir = tmp_path_factory.mktemp("docs") / "run"
    train(cfg, run_dir=run_dir, progress=False, tensorboard=False)
    return run_dir / "policy.safetensors"


def bash_commands(page: str) -> list[tuple[dict[str, str], list[str]]]:
    """The `npsco` commands of a page's ```bash blocks: (the environment variables set before it, its arguments)."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", (DOCS / page).read_text(encoding="utf-8"), re.S | re.M):
        for line in block.splitlines():
            words = shlex.split(line.split("#", 1)[0])
            env = {}
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                key, _, value = words.pop(0).partition("=")
                env[key] = value
            if words[:1] == ["npsco"]:
                commands.append((env, words[1:]))
    return commands


def run_example(page: str, index: int) -> None:
    code = python_blocks(page)[index]
    exec(compile(code, f"docs/{page} python block {index + 1}", "exec"), {"__name__": "__docs_example__"})


def test_the_pages_have_examples():
    assert len(python_blocks("checkpoints.md")) >= 2
    assert len(python_blocks("configuration.md")) == 1 and len(python_blocks("environments.md")) >= 1


@pytest.mark.parametrize(("page", "index"), EXAMPLES, ids=[f"{p}-{i + 1}" for p, i in EXAMPLES])
def test_example_runs(page, index, checkpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("NPSCO_CHECKPOINT", str(checkpoint))
    monkeypatch.chdir(tmp_path)
    run_example(page, index)


def test_configuration_tables_are_the_generators_output(capsys):
    run_example("configuration.md", 0)
    tables = capsys.readouterr().out.strip().split("\n\n")
    assert len(tables) == 2
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for table in tables:
        assert table in page, "docs/configuration.md is out of date: paste the output of its generator script"


def test_checkpoints_page_describes_every_metadata_field_and_tensor(checkpoint):
    raw = checkpoint.read_bytes()
    header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
    meta = json.loads(header.pop("__metadata__")["npsco"])
    page = (DOCS / "checkpoints.md").read_text(encoding="utf-8")
    for key in meta:
        assert f"| `{key}` |" in page, f"metadata field {key!r} is not described in docs/checkpoints.md"
    for key in REQUIRED_METADATA:
        assert f"`{key}`" in page.split("Required when loading:")[1].split("\n\n")[0]
    for name, info in header.items():
        generic = re.sub(r"^actor\.\d+\.", "actor.{i}.", name)
        assert f"`{generic}`" in page, f"tensor {name} is not described in docs/checkpoints.md"
        assert info["dtype"] == "F32"


def test_the_configuration_files_example_is_the_example_file():
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```toml\n(.*?)^```", page, re.S | re.M)
    assert block == (DOCS.parent / "examples" / "maze_population.toml").read_text(encoding="utf-8")


def test_the_config_and_track_commands_run_at_a_tiny_budget(tmp_path, monkeypatch, capsys):
    """docs/configuration.md's commands as written from the repository root, with a tiny budget given on the command
    line (which wins over the file: what the page says), W&B in offline mode as the page runs it."""
    commands = bash_commands("configuration.md")
    assert [(env, args[0]) for env, args in commands] == [
        ({}, "population"),
        ({}, "population"),
        ({"WANDB_MODE": "offline"}, "train"),
    ]
    pytest.importorskip("wandb")  # (the dev extra installs it)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(DOCS.parent / "examples")
    monkeypatch.setenv("WANDB_SILENT", "true")
    tiny = ["--steps", "1024", "--set", "num_steps=32", "--set", "eval_every=0", "--no-progress"]
    for env, args in commands:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        if "--steps" in args:  # the track example's budget
            i = args.index("--steps")
            args = [*args[:i], *args[i + 2 :]]
        extra = ["--novel", "1"] if args[0] == "population" else ["--no-tensorboard"]
        assert main([*args, *tiny, *extra]) == 0, capsys.readouterr()
    first, second = (
        json.loads((tmp_path / "runs" / r / "config.json").read_text()) for r in ("maze-ipd", "maze-ipd-seed1")
    )
    assert (first["refs"], first["novel"], first["method"]["ipd_rule"], first["ppo"]["learning_rate"]) == (
        2,
        1,
        "cumulative",
        1e-3,
    )
    assert (first["ppo"]["seed"], second["ppo"]["seed"]) == (0, 1)
    assert {k: v for k, v in first.items() if k != "ppo"} == {k: v for k, v in second.items() if k != "ppo"}
    (run_file,) = (tmp_path / "runs" / "maze-tracked").glob("wandb/offline-run-*/run-*.wandb")
    assert run_file.stat().st_size > 0
