"""The README's quick start runs as written from the repository root, at a tiny budget: its `npsco` commands with
`--steps 1000000` replaced by a few thousand steps (and no evaluation during training), nothing else changed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from npsco.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"
TINY = ["--steps", "2048", "--set", "num_steps=512", "--set", "eval_every=0"]


def quick_start_commands() -> list[list[str]]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("npsco "):
            commands.append(shlex.split(line)[1:])
    return commands


def tiny(args: list[str]) -> list[str]:
    if "--steps" not in args:
        return args
    i = args.index("--steps")
    return [*args[:i], *TINY, *args[i + 2 :]]


def test_the_quick_start_runs_as_written_at_a_tiny_budget(tmp_path, monkeypatch, capsys):
    commands = quick_start_commands()
    assert [c[0] for c in commands] == ["population", "report"]
    assert "1000000" in commands[0]
    monkeypatch.chdir(tmp_path)
    for args in commands:
        assert main(tiny(args)) == 0, capsys.readouterr()
    out = tmp_path / "runs" / "hopper"
    assert (out / "manifest.json").exists() and (out / "report" / "report.html").exists()
    assert len(list(out.glob("*/*/policy.safetensors"))) + len(list(out.glob("novel/*/*/policy.safetensors"))) == 5
