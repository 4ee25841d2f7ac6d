"""Every JSON field of every file npsco reads, mutated (issue 36, item 4): a wrong type, a negative number, a number
too large for a float (1e400), null, a huge whole number, an empty list; each file read back by the functions npsco
reads it with. Each mutation is either taken (the value is allowed, and what reads it works) or refused by a one-line
NpscoError of a bounded length: never another exception, never a hang. The mutations the issue found accepted or
crashing are checked to be refused."""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from npsco.errors import MAX_MESSAGE_CHARS, NpscoError
from npsco.evaluation.evaluate import cached_evaluation, evaluate_runs
from npsco.evaluation.runs import load_run
from npsco.logger import read_metrics
from npsco.manifest import population_dirs
from npsco.ppo.config import preset
from npsco.report.build import _config, eval_intervals
from npsco.tasks import MAZE_ID
from npsco.training import prepare_train_dir, train_record

INF = "__1e400__"
"""Written as the JSON number 1e400 (read as infinity by a plain `json.loads`)."""
MUTATIONS: dict[str, Any] = {"string": "x", "negative": -1, "1e400": INF, "null": None, "huge": 10**30, "list": []}
SECONDS = 30
"""Time allowed for one mutation's reading (a hang fails the test)."""


def dump(doc: Any) -> str:
    return json.dumps(doc).replace(f'"{INF}"', "1e400")


def paths(doc: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every field of `doc` (object keys, and the first three items of each list), as paths of keys and indices."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc[:3]) if isinstance(doc, list) else []
    for key, value in items:
        yield (*prefix, key)
        yield from paths(value, (*prefix, key))


def mutated(doc: Any, path: tuple, value: Any) -> Any:
    copy = json.loads(json.dumps(doc))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return copy


class Timeout(Exception):
    pass


def outcome(read: Callable[[], Any]) -> str | None:
    """None when `read()` took the file; its one-line message when it refused it. Anything else fails the test."""

    def alarm(signum, frame):
        raise Timeout

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(SECONDS)
    try:
        read()
        return None
    except NpscoError as e:
        message = str(e)
        assert "\n" not in message and len(message) <= MAX_MESSAGE_CHARS, message
        return message
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_every_mutation(doc: Any, write: Callable[[str], None], read: Callable[[], Any]) -> dict[tuple, str | None]:
    """Each field of `doc` mutated in every way, written (`write`) and read (`read`): {(path, mutation): message or
    None}; a traceback or a hang fails."""
    results = {}
    for path in list(paths(doc)):
        for name, value in MUTATIONS.items():
            write(dump(mutated(doc, path, value)))
            try:
                results[(".".join(map(str, path)), name)] = outcome(read)
            except Timeout:
                pytest.fail(f"{'.'.join(map(str, path))} = {name}: still reading after {SECONDS} s")
            except Exception as e:  # noqa: BLE001
                pytest.fail(f"{'.'.join(map(str, path))} = {name}: {type(e).__name__}: {e}")
    write(dump(doc))
    return results


# ---------------------------------------------------------------------------------------------------------- a run
@pytest.fixture
def run(planned_run, tmp_path) -> Path:
    """A maze population run (two hand-made references done, a novel policy pending, the default threshold at 2x)
    with a threshold.json, a metrics.jsonl in a reference's folder and an up-to-date evaluation."""
    out = tmp_path / "run"
    planned_run(out, threshold=["--r0-scale", "2"])
    (out / "threshold.json").write_text(
        json.dumps(
            {
                "r0_default": 0.25,
                "names": ["ref0", "ref1"],
                "distance_matrix": [[0.0, 0.25], [0.25, 0.0]],
                "episodes_per_policy": 5,
                "seed": 0,
                "metric": "deterministic",
            }
        )
    )
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["r0_default"] = 0.25
    manifest["members"][0]["eval_curve"] = [[1024, 0.5], [2048, 1.0]]
    (out / "manifest.json").write_text(json.dumps(manifest))
    rows = [{"global_step": 1024, "charts/SPS": 900.0}, {"global_step": 2048, "eval/return_mean": 1.0}]
    (out / "refs" / "ref0" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    evaluate_runs([out], episodes=2, log=lambda _: None)
    return out


def readers(run: Path) -> Callable[[], Any]:
    """What reads a run's manifest, config and threshold: evaluation's loading, the report's, an evaluation's reuse."""

    def read():
        load_run(run)
        eval_intervals([_config(str(run))])
        cached_evaluation(run, episodes=2)

    return read


def test_the_run_of_these_tests_reads_back(run):
    assert outcome(readers(run)) is None
    assert cached_evaluation(run, episodes=2) is not None  # reused: the mutations below reach its fields


@pytest.mark.parametrize("name", ["manifest.json", "config.json", "threshold.json"])
def test_every_field_of_a_run_file_mutated_is_taken_or_one_line(name, run):
    doc = json.loads((run / name).read_text())
    results = check_every_mutation(doc, (run / name).write_text, readers(run))
    assert len(results) > 6 * 8
    assert any(message is not None for message in results.values())
    refused = EXPECTED_REFUSED[name]
    assert {k: results[k] for k in refused if results[k] is None} == {}, "accepted"
    for key, fragment in refused.items():
        assert fragment in results[key], (key, results[key])


EXPECTED_REFUSED: dict[str, dict[tuple[str, str], str]] = {
    "manifest.json": {
        ("r0_default", "1e400"): "the number 1e400 is too large",
        ("format_version", "negative"): "format_version must be a whole number >= 1, got -1",
        ("members.0.final_eval.episodes", "negative"): "episodes must be a whole number from 1 to 100,000",
        ("members.0.eval_curve.0", "list"): "members[0].eval_curve[0] must be a list of 2 numbers, got []",
        ("members.2.threshold", "negative"): "members[2].threshold must be a number above 0 or null, got -1",
        ("members.0.seed", "huge"): "the number 1000000000000000000000000000000 is too large (past 64 bits)",
        ("members.0.seed", "negative"): "members[0].seed must be a whole number from 0 to",
    },
    "config.json": {
        ("refs", "negative"): "refs must be a whole number from 0 to 1,000, got -1",
        ("ppo.max_episode_steps", "negative"): "ppo.max_episode_steps must be a whole number from 1 to 10,000,000",
        ("ppo.max_episode_steps", "huge"): "is too large (past 64 bits)",
        ("ppo.num_envs", "string"): "ppo.num_envs must be a whole number from 1 to 4,096, got 'x'",
        ("ppo.eval_every", "1e400"): "the number 1e400 is too large",
    },
    "threshold.json": {
        ("r0_default", "1e400"): "the number 1e400 is too large",
        ("r0_default", "negative"): "r0_default must be a number above 0, got -1",
        ("episodes_per_policy", "negative"): "episodes_per_policy must be a whole number from 1 to 100,000",
    },
}
"""Mutations that must be refused, and a part of their message (the issue's cases among them)."""


def test_a_config_with_max_episode_steps_0_or_a_zero_eval_episodes_is_refused(run):
    config = json.loads((run / "config.json").read_text())
    for edit, fragment in [
        ({"ppo": {**config["ppo"], "max_episode_steps": 0}}, "ppo.max_episode_steps must be a whole number from 1"),
        ({"eval_episodes": 0}, "eval_episodes must be a whole number from 1 to 100,000 or null, got 0"),
    ]:
        (run / "config.json").write_text(json.dumps({**config, **edit}))
        assert fragment in outcome(readers(run))


def test_every_field_of_an_evaluation_mutated_is_recomputed_or_taken(run):
    """A reused evaluation.json is npsco's own cache: one whose fields are not of their type and range is recomputed
    (as a damaged one is), never a TypeError in `evaluate` or `report`."""
    path = run / "evaluation" / "evaluation.json"
    doc = json.loads(path.read_text())
    seen: list[dict | None] = []

    def read():
        found = cached_evaluation(run, episodes=2)
        seen.append(found)
        if found is not None:  # what `evaluate` prints and the report tabulates from it
            assert isinstance(found["statistics"], dict) and isinstance(found["policies"], list)

    results = check_every_mutation(doc, path.write_text, read)
    assert all(message is None for message in results.values()), {k: v for k, v in results.items() if v}
    assert any(s is None for s in seen) and any(s is not None for s in seen)
    for edit in ({"policies": None}, {"statistics": "x"}, {"policies": [{"name": 1}]}):
        path.write_text(json.dumps({**doc, **edit}))
        found = cached_evaluation(run, episodes=2)
        assert found is None or found["statistics"] == cached_statistics(doc, run, path)


def cached_statistics(doc: dict, run: Path, path: Path) -> dict:
    path.write_text(json.dumps(doc))
    found = cached_evaluation(run, episodes=2)
    assert found is not None
    return found["statistics"]


def test_every_field_of_a_metrics_row_mutated_is_taken_or_one_line(run):
    path = run / "refs" / "ref0" / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]

    def write(text: str) -> None:
        path.write_text("\n".join(dump(r) for r in json.loads(text.replace("1e400", f'"{INF}"'))) + "\n")

    results = check_every_mutation(rows, write, lambda: read_metrics(path))
    assert "line 2: eval/return_mean must be a number or null, got 'x'" in results[("1.eval/return_mean", "string")]
    assert "line 1: global_step must be a whole number >= 0, got -1" in results[("0.global_step", "negative")]
    assert "the number 1e400 is too large" in results[("1.eval/return_mean", "1e400")]


def test_every_field_of_a_sweep_file_mutated_is_taken_or_one_line(run, tmp_path):
    sweep = tmp_path / "sweep"
    shutil.move(run, sweep / "run")
    doc = {
        "format": "npsco-sweep",
        "format_version": 1,
        "wall_seconds": 12.5,
        "utilisation": {"workers": 2, "wall_seconds": 12.5, "busy_seconds": 20.0, "fraction": 0.8},
        "populations": [
            {"task": "maze", "method": "ipd", "path": "run", "policies": 3, "done": 2, "r0_default": 0.25},
        ],
    }

    def read():
        for found in population_dirs(sweep):
            load_run(found)

    results = check_every_mutation(doc, (sweep / "sweep.json").write_text, read)
    assert "the number 1e400 is too large" in results[("wall_seconds", "1e400")]
    assert "populations[0].done must be a whole number >= 0, got -1" in results[("populations.0.done", "negative")]
    assert "populations[0].path must be a string, got null" in results[("populations.0.path", "null")]


def test_every_field_of_a_train_config_mutated_is_taken_or_one_line(tmp_path):
    out = tmp_path / "train"
    record = train_record(preset(MAZE_ID), "default")
    out.mkdir()
    results = check_every_mutation(record, (out / "config.json").write_text, lambda: prepare_train_dir(out, record))
    assert "ppo.seed must be a whole number from 0 to" in results[("ppo.seed", "negative")]
    assert "the number 1e400 is too large" in results[("ppo.learning_rate", "1e400")]
