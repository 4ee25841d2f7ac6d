"""The method registry (`npsco.methods.METHODS`) and what is derived from it: the configuration's method names and
validation, the command line's choices, `make_method`, and the worker processes' preload list."""

from __future__ import annotations

import subprocess
import sys

import pytest

from npsco.cli_parser import build_parser
from npsco.errors import NpscoError
from npsco.methods import METHODS, NOVELTY_METHODS, make_method
from npsco.methods.base import Method, MethodContext
from npsco.methods.novelty import NoveltyMethod
from npsco.methods.settings import MethodConfig
from npsco.novelty.references import ReferenceSet
from npsco.population_jobs import PRELOAD
from npsco.tasks import MAZE_ID


def test_each_name_maps_to_the_class_of_that_name():
    assert list(METHODS) == ["ppo", "ipd", "wsr", "tnb", "ctnb", "cpo", "rspo", "lagrangian"]
    for name, cls in METHODS.items():
        assert issubclass(cls, Method) and cls.name == name
        assert issubclass(cls, NoveltyMethod) == (name in NOVELTY_METHODS)
    assert METHODS["ppo"] is Method and NOVELTY_METHODS == tuple(METHODS)[1:]


def test_names_choices_and_validation_come_from_the_registry():
    parser = build_parser()
    assert parser.parse_args(["experiment"]).methods == list(NOVELTY_METHODS)
    assert [parser.parse_args(["population", "--method", name]).method for name in METHODS] == list(METHODS)
    with pytest.raises(SystemExit):
        parser.parse_args(["population", "--method", "sac"])
    with pytest.raises(
        NpscoError, match="unknown method 'sac'; choose one of ppo, ipd, wsr, tnb, ctnb, cpo, rspo, lagrangian"
    ):
        MethodConfig.of("sac").validate()


def test_make_method_builds_every_method_and_only_ppo_without_a_threshold(maze_policies):
    refs = ReferenceSet([maze_policies.const([0.0, 0.0])])
    for name in METHODS:
        method = make_method(MethodConfig.of(name), MethodContext(MAZE_ID, refs, 0.1))
        assert type(method) is METHODS[name]
    assert type(make_method(MethodConfig.of("ppo"), MethodContext(MAZE_ID, refs, None))) is Method
    for name in NOVELTY_METHODS:
        with pytest.raises(NpscoError, match=f"method {name} needs a threshold r0"):
            make_method(MethodConfig.of(name), MethodContext(MAZE_ID, refs, None))


def test_workers_preload_every_method_module():
    assert set(METHODS.modules()) <= set(PRELOAD)
    assert {cls.__module__ for cls in METHODS.values()} == set(METHODS.modules())


def test_reading_the_names_imports_no_method_class():
    """The settings modules and the command line's parser read the names without loading torch (`--help` stays
    fast)."""
    code = (
        "import sys, npsco.methods.settings, npsco.ppo.config, npsco.cli; npsco.cli.build_parser(); "
        "print(sorted(m for m in ('torch', 'npsco.ppo.hooks', 'npsco.methods.ipd') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
