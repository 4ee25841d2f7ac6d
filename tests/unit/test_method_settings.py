"""A method's settings (npsco.methods.settings.MethodConfig): each method owns its own, typed from text once, and a run
records them as one flat object; the older flat form of every method's settings is read by npsco.compat."""

import json

import pytest

from npsco.compat import current_method_settings
from npsco.errors import NpscoError
from npsco.methods import METHODS
from npsco.methods.settings import SHARED, MethodConfig

OLD_FLAT = {  # a config.json `method` of a run made before each method owned its settings (the paper campaign's)
    "method": "tnb",
    "r0": None,
    "r0_scale": 1.0,
    "t_start": None,
    "metric": "deterministic",
    "novelty_action": "mean",
    "ipd_rule": "instant",
    "ipd_slack": 0.1,
    "novelty_discount": 1.0,
    "r0_warmup": 0.0,
    "r0_profile": "constant",
    "wsr_weight": None,
    "wsr_shape": "linear",
    "tnb_rule": "authors",
    "ctnb_slack": 0.0,
    "cpo_max_kl": 0.01,
    "cpo_damping": 0.1,
    "cpo_cg_iters": 10,
    "cpo_backtrack_iters": 10,
    "cpo_backtrack_coef": 0.8,
    "cpo_cost_limit": 0.0,
}


def test_each_method_owns_its_settings_and_reads_the_shared_ones():
    assert MethodConfig.of("tnb").reads("tnb_rule") and MethodConfig.of("ctnb").reads("ctnb_slack")
    assert not MethodConfig.of("ipd").reads("tnb_rule") and not MethodConfig.of("tnb").reads("ctnb_slack")
    assert not MethodConfig.of("wsr").reads("ipd_rule") and MethodConfig.of("cpo").reads("cpo_damping")
    for key in ("r0_warmup", "r0_profile", "ipd_rule"):
        assert MethodConfig.of("ipd").reads(key) and not MethodConfig.of("wsr").reads(key)
    assert all(MethodConfig.of(m).reads(k) for m in ("ipd", "wsr", "tnb", "cpo") for k in SHARED)
    assert not any(MethodConfig.of("ppo").reads(k) for k in SHARED)  # plain PPO reads no novelty setting


def test_text_is_parsed_once_into_the_settings_types():
    config = MethodConfig.of("ipd").with_settings(["r0=0.7", "t_start=10", "ipd_slack=0.25", "ipd_rule=cumulative"])
    assert (config.r0, config.t_start, config.options.ipd_slack, config.options.ipd_rule) == (
        0.7,
        10,
        0.25,
        "cumulative",
    )
    assert type(config.t_start) is int and type(config.r0) is float
    assert MethodConfig.of("wsr").with_settings(["wsr_weight=None"]).options.wsr_weight is None


@pytest.mark.parametrize(
    ("method", "assignment", "message"),
    [
        ("ipd", "wsr_weight=5", "--mset wsr_weight: not a setting of method ipd (its settings: r0, t_start"),
        ("ppo", "r0=0.5", "--mset r0: not a setting of method ppo (it has no settings)"),
        ("ipd", "t_start=soon", "bad value for t_start: 'soon' (expected int | None)"),
        ("cpo", "cpo_cg_iters=2.5", "bad value for cpo_cg_iters: '2.5' (expected int)"),
        ("ipd", "ipd_rule", "--mset expects key=value, got 'ipd_rule'"),
    ],
)
def test_a_setting_the_method_does_not_read_or_a_bad_value_is_a_one_line_error(method, assignment, message):
    with pytest.raises(NpscoError) as info:
        MethodConfig.of(method).with_settings([assignment])
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("method", list(METHODS))
def test_to_dict_is_flat_json_and_from_dict_inverts_it(method):
    config = MethodConfig.of(method)
    flat = json.loads(json.dumps(config.to_dict()))
    shared = SHARED if method != "ppo" else ()
    assert flat["method"] == method and set(flat) == {"method", *shared, *config.own_settings}
    assert MethodConfig.from_dict(flat) == config


def test_from_dict_refuses_another_methods_setting():
    with pytest.raises(NpscoError, match="not a setting of method wsr"):
        MethodConfig.from_dict({"method": "wsr", "tnb_rule": "authors"})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"tnb_rule": "sum"}, "tnb_rule must be one of"),
        ({"metric": "manhattan"}, "unknown metric"),
        ({"r0": -1.0}, "r0 must be a positive number"),
        ({"novelty_discount": 0.0}, "novelty_discount must be in (0, 1]"),
        ({"metric": "state"}, "metric=state (visited states) is the lagrangian method's"),
    ],
)
def test_validate_refuses_out_of_range_settings(values, message):
    with pytest.raises(NpscoError) as info:
        MethodConfig.of("tnb", **values).validate()
    assert message in str(info.value)


def test_an_older_runs_flat_settings_read_as_todays():
    today = current_method_settings(OLD_FLAT)
    assert today == {**MethodConfig.of("tnb").to_dict()}  # every other method's setting and r0_scale dropped
    assert MethodConfig.from_dict(today) == MethodConfig.of("tnb")
    assert current_method_settings({**OLD_FLAT, "method": "ctnb"})["ctnb_slack"] == 0.0
    assert "ipd_rule" in current_method_settings({**OLD_FLAT, "method": "ipd"})
    assert current_method_settings(MethodConfig.of("ipd").to_dict()) == MethodConfig.of("ipd").to_dict()
    assert current_method_settings({**OLD_FLAT, "method": "ppo"}) == {"method": "ppo"}


def test_a_run_made_with_an_earlier_default_is_told_the_flag_that_gives_it_back():
    from npsco.compat import old_default_hints

    today = {"r0_scales": [0.5], "method": {"method": "tnb", "tnb_rule": "authors"}}
    old = {"r0_scales": [1.0], "method": {"method": "tnb", "tnb_rule": "safe"}}
    hints = old_default_hints(old, today)
    assert "default threshold multiple was 1: add --r0-scale 1 to resume" in hints
    assert "default tnb_rule was safe: add --mset tnb_rule=safe to resume" in hints
    assert old_default_hints(today, today) == ""
    # today's configuration as a dataclass gives tuples: compared as the lists JSON reads back
    assert old_default_hints({"r0_scales": [1.0]}, {"r0_scales": (1.0,)}) == ""
    assert old_default_hints({"r0_scales": [1.0]}, {"r0_scales": (0.5,), "method": {"method": "ipd"}}).count("add") == 1


def test_population_flags_reach_the_method_typed_and_name_themselves_when_refused():
    from npsco.cli_parser import build_parser
    from npsco.options import PopulationOptions
    from npsco.tasks import MAZE_ID

    def population(**values):
        return PopulationOptions.from_call({"env": MAZE_ID, **values}).config()

    def command(*argv):
        return PopulationOptions.from_args(build_parser().parse_args(["population", *argv])).config()

    config = population(method="ipd", r0=0.25, t_start=7, ipd_rule="cumulative")
    assert (config.method.r0, config.method.t_start, config.method.options.ipd_rule) == (0.25, 7, "cumulative")
    assert command("--r0", "0.25", "--t-start", "7", "--ipd-rule", "cumulative") == config
    # --mset comes after the flags: it wins
    assert population(method="ipd", r0=0.25, method_settings={"r0": 0.5}).method.r0 == 0.5
    assert command("--r0", "0.25", "--mset", "r0=0.5").method.r0 == 0.5
    with pytest.raises(NpscoError, match=r"^--r0: not a setting of method ppo \(it has no settings\)$"):
        population(method="ppo", r0=0.5)
    with pytest.raises(NpscoError, match="^--ipd-rule: not a setting of method wsr"):
        population(method="wsr", ipd_rule="instant")
    with pytest.raises(NpscoError, match="^--mset wsr_weight: not a setting of method ipd"):
        command("--mset", "wsr_weight=2")
    with pytest.raises(NpscoError, match="t_start"):
        population(method="ipd", t_start=2.5)  # a typed value of the wrong type is refused too
