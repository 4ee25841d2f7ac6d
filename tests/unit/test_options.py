"""The options objects of `npsco train` and `npsco population` (`npsco.options`): their command line reads back as
the same options (any options: hypothesis), a run's recorded configuration gives back the command that makes it, the
Python functions take them by name, and one option added there (`candidate_episodes`) reaches the parser, a config
file, a grid, a Python call and the report's reproduce command."""

from __future__ import annotations

import inspect
import pydoc
import re
import shlex
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npsco
from npsco.cli_config import parse_args
from npsco.cli_parser import build_parser
from npsco.errors import NpscoError
from npsco.fields import field_types
from npsco.grid import GRID_KEYS, parse_grid, plan
from npsco.methods.registry import METHODS
from npsco.methods.settings import MethodConfig
from npsco.options import PopulationOptions, TrainOptions, dest_of, flag_of, options_of
from npsco.ppo.config import PPOConfig
from npsco.report.provenance import population_command
from npsco.tasks import MAZE_ID

REPO = Path(__file__).resolve().parents[2]
TEXT = string.ascii_letters + string.digits + "_./:-"


PARSER = build_parser()


def command(name: str, argv: list[str]):
    """The options of `npsco NAME ARGV` as `npsco.cli` reads them."""
    cls = TrainOptions if name == "train" else PopulationOptions
    return cls.from_args(PARSER.parse_args([name, *argv]))


# ------------------------------------------------------------------------------------------ any options, round trip
def value_of(tp, optional_text_may_be_none: bool = True) -> st.SearchStrategy:
    """Any value of the type `tp` as an option or a setting holds it."""
    args = getattr(tp, "__args__", ())
    if type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        text_none = inner is str  # a text setting "none" reads back as None
        values = value_of(inner).filter(lambda v: v != () and not (text_none and str(v).lower() == "none"))
        return st.none() | values  # (no empty list where None is the default: `--r0-scale` takes one or more)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(-(10**9), 10**9)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if tp is str:
        return st.text(TEXT, min_size=1, max_size=10)
    if getattr(tp, "__origin__", None) is tuple:
        element = args[0]
        items = {
            int: st.integers(0, 10**6),
            float: st.floats(1e-6, 1e6),
            str: st.text(TEXT, min_size=1, max_size=10).filter(lambda v: not v.startswith("-")),
        }[element]
        return st.lists(items, max_size=3).map(tuple)
    raise AssertionError(f"no strategy for {tp}")


def settings_of(kinds: dict) -> st.SearchStrategy:
    """A dict of settings, each of its own type."""
    if not kinds:
        return st.just({})
    pairs = st.sampled_from(sorted(kinds)).flatmap(lambda k: st.tuples(st.just(k), value_of(kinds[k])))
    return st.lists(pairs, max_size=4).map(dict)


def options(cls: type) -> st.SearchStrategy:
    """Any options of `cls` the command line can give: every option drawn from its type (or its choices)."""
    kinds = field_types(cls)

    def draw(method: str) -> st.SearchStrategy:
        fields = {}
        for f in options_of(cls):
            tp = kinds[f.name]
            if f.metadata["assignments"] == "ppo":
                fields[f.name] = settings_of(field_types(PPOConfig))
            elif f.metadata["assignments"] == "method":
                fields[f.name] = settings_of(MethodConfig(method=method).setting_types())
            elif f.name == "method":
                fields[f.name] = st.just(method)
            elif f.metadata["choices"] is not None:
                choices = st.sampled_from(f.metadata["choices"])
                fields[f.name] = st.none() | choices if type(None) in getattr(tp, "__args__", ()) else choices
            elif f.metadata["cli_type"] is float:  # whole steps, read as a float: exact up to 2**53
                fields[f.name] = st.none() | st.integers(1, 10**11)
            else:
                fields[f.name] = value_of(tp)
        return st.builds(cls, **fields)

    return st.sampled_from(list(METHODS)).flatmap(draw) if "method" in kinds else draw("ipd")


@settings(max_examples=60, deadline=None)
@given(options(TrainOptions))
def test_any_train_options_read_back_from_their_command_line(chosen):
    assert command("train", chosen.to_argv()) == chosen


@settings(max_examples=60, deadline=None)
@given(options(PopulationOptions))
def test_any_population_options_read_back_from_their_command_line(chosen):
    argv = chosen.to_argv()
    assert argv[:4] == ["--env", chosen.env, "--method", chosen.method] or argv[0].startswith("--env=")
    assert command("population", argv) == chosen


def test_the_command_line_writes_what_differs_from_the_defaults_and_values_in_full():
    chosen = PopulationOptions(method="wsr", seed=-3, r0=0.1 + 0.2, settings={"actor_hidden": (32, 10)}, out="run")
    assert chosen.to_argv() == [
        *("--env", MAZE_ID, "--method", "wsr", "--seed=-3", "--r0", "0.30000000000000004"),
        *("--set", "actor_hidden=32,10", "--out", "run"),
    ]
    assert PopulationOptions().to_argv() == ["--env", MAZE_ID, "--method", "ipd"]
    assert TrainOptions(steps=4096, settings={"norm_obs": False}).to_argv() == [
        *("--env", MAZE_ID, "--steps", "4096", "--set", "norm_obs=false")
    ]


# ----------------------------------------------------------------------------------- a run's reproduce command
RECORDED = [
    {"method": "lagrangian", "refs": 3, "novel": 2, "candidates": 3, "seed": 7},  # --candidates: once left out
    {"method": "ipd", "refs_from": "runs/ppo", "novel": 1, "r0_scales": (0.5, 2.0), "t_start": 4},
    {"method": "wsr", "ref_checkpoints": ("a", "b"), "r0": 0.25, "method_settings": {"wsr_weight": 3.0}},
    {"method": "ipd", "preset": "paper", "env": "Hopper-v5", "steps": 4096, "settings": {"gamma": 0.9}},
    {"method": "tnb", "eval_episodes": 7, "threshold_episodes": 3, "candidate_episodes": 2, "candidates": 2},
    {"method": "ipd", "env_backend": "sync", "ipd_rule": "cumulative", "method_settings": {"ipd_slack": 0.1}},
]


@pytest.mark.parametrize("values", RECORDED, ids=lambda v: v["method"])
def test_the_reproduce_command_of_a_run_makes_its_configuration(values, tmp_path):
    config = PopulationOptions.from_call(values).config()
    line = population_command(tmp_path / "run", config.to_dict())
    words = shlex.split(line)
    assert words[:2] == ["npsco", "population"] and words[-2:] == ["--out", str(tmp_path / "run")]
    assert command("population", words[2:]).config().to_dict() == config.to_dict()
    if config.candidates > 1:
        assert f"--candidates {config.candidates}" in line


# --------------------------------------------------------------------------------------------- Python calls
def test_the_python_functions_name_every_option_in_their_signature():
    train, population = inspect.signature(npsco.train), inspect.signature(npsco.train_population)
    assert list(train.parameters)[:2] == ["env", "out"] and list(population.parameters)[:2] == ["env", "method"]
    for name in ("seed", "steps", "preset", "settings", "env_backend", "progress", "track"):
        assert train.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
    assert {f.name for f in options_of(PopulationOptions)} <= set(population.parameters)
    assert population.parameters["candidates"].default == 1
    assert str(population.parameters["candidate_episodes"]).startswith("candidate_episodes: int | None = None")
    assert "out" not in inspect.signature(npsco.make_population_config).parameters  # a configuration only
    assert "candidates=1" in pydoc.render_doc(npsco.train_population).replace(": int = ", "=")
    assert {"train", "train_population", "make_population_config", "load_policy"} <= set(dir(npsco))


def test_a_python_call_takes_every_option_and_refuses_wrong_ones():
    config = npsco.make_population_config(MAZE_ID, "lagrangian", refs=2, candidates=3, r0=0.5, t_start=4)
    assert (config.candidates, config.method.r0, config.method.t_start) == (3, 0.5, 4)
    assert npsco.make_population_config(MAZE_ID, ref_checkpoints=[Path("a")]).ref_checkpoints == ("a",)
    with pytest.raises(TypeError, match="unexpected keyword argument 'candidate'"):
        npsco.make_population_config(MAZE_ID, candidate=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        npsco.make_ppo_config(MAZE_ID, out="x")
    for call, message in (
        (lambda: npsco.make_population_config(MAZE_ID, candidates="3x"), "bad value for candidates: '3x'"),
        (lambda: npsco.make_population_config(MAZE_ID, r0_scales="0.5"), "bad value for r0_scales: '0.5'"),
        (lambda: npsco.make_population_config(MAZE_ID, settings=[1]), "bad value for settings: [1]"),
        (lambda: npsco.make_ppo_config(MAZE_ID, env_backend=3), "bad value for env_backend: 3"),
    ):
        with pytest.raises(NpscoError, match=re.escape(message)) as info:
            call()
        assert "\n" not in str(info.value)


# ------------------------------------------------------------------------- one option added: it is everywhere
def test_the_candidate_episodes_option_reaches_every_place_that_takes_population_options(tmp_path):
    # the command line
    assert command("population", ["--candidate-episodes", "7"]).config().candidate_episodes == 7
    # a --config file
    (tmp_path / "p.toml").write_text("candidate_episodes = 7\n")
    parser, argv = build_parser(), ["population", "--config", str(tmp_path / "p.toml")]
    assert PopulationOptions.from_args(parse_args(parser, argv, parser.parse_args(argv))).candidate_episodes == 7
    # a grid: every population of it (the references' too, which have no candidates to check)
    grid = parse_grid({"tasks": [MAZE_ID], "methods": ["ipd"], "candidate_episodes": 7, "candidates": 2}, "g")
    assert "candidate_episodes" in GRID_KEYS and grid.to_dict()["candidate_episodes"] == 7
    assert [spec.config.candidate_episodes for spec in plan(grid)] == [7, 7]
    with pytest.raises(NpscoError, match="'candidate_episodes' must be a whole number >= 1, got 0"):
        parse_grid({"tasks": [MAZE_ID], "methods": ["ipd"], "candidate_episodes": 0}, "g")
    # a Python call
    config = npsco.make_population_config(MAZE_ID, "ipd", candidates=3, candidate_episodes=7)
    assert (config.candidate_episodes, config.check_episodes, config.to_dict()["candidate_episodes"]) == (7, 7, 7)
    assert inspect.signature(npsco.train_population).parameters["candidate_episodes"].default is None
    # the report's reproduce command
    line = population_command(tmp_path / "run", config.to_dict())
    assert "--candidates 3 --candidate-episodes 7" in line
    # and by default, the candidate check runs on the final evaluation's episodes, as before
    default = npsco.make_population_config(MAZE_ID, "ipd")
    assert (default.candidate_episodes, default.check_episodes) == (None, default.final_episodes) == (None, 100)


def test_docs_list_every_population_option_once():
    text = (REPO / "docs/population.md").read_text(encoding="utf-8")
    table = text[text.index("## Options") :]
    for f in options_of(PopulationOptions):
        assert table.count(f"`{flag_of(f)}") >= 1, flag_of(f)
        assert f"`{f.name}`" in table or dest_of(f) == f.name, f.name
