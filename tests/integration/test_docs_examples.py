"""The documentation's examples run, and its generated tables and format description match the code.

Every fenced ```python block of the pages below is executed on its own (fresh namespace, a temporary working
directory), with `NPSCO_CHECKPOINT` set to a checkpoint trained here with a tiny budget — the variable the examples
document."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

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
