"""Reading what earlier versions of npsco wrote: every translation of an older run's files into today's form lives
here, each with a test of the old form it still reads (tests/unit/test_method_settings.py).

- Method settings (a run's `config.json` `method`, a checkpoint's `method_config`) until 2026-11-27: one flat
  object with every method's settings, each method reading its own by name prefix, and `r0_scale` (always 1); plain
  PPO's held the novelty settings too. Today's object holds only the method's own settings and the shared ones, none
  for plain PPO (`npsco.methods.settings.MethodConfig.to_dict`).
- PPO settings that were removed (`REMOVED_PPO_SETTINGS`): `update_backend` until 2026-11-28 (`numpy`, the default,
  or `torch`, autograd). Every update runs in numpy now; a recorded `update_backend: "numpy"` is what runs today and
  is read as absent (`current_ppo_settings`), `torch` stays a difference; giving the setting is refused with a hint
  (`removed_ppo_setting`; tested on a committed run: tests/integration/test_removed_settings.py).
- Defaults that changed (`OLD_DEFAULTS`): a population run made with an earlier default cannot resume under today's;
  the refusal says which flag gives the old value back (`old_default_hints`).
"""

from __future__ import annotations

from typing import Any

LEGACY_METHOD_SETTINGS: dict[str, tuple[str, ...]] = {
    "ipd": ("ipd_rule", "ipd_slack", "r0_warmup", "r0_profile"),
    "wsr": ("wsr_weight", "wsr_shape"),
    "tnb": ("tnb_rule",),
    "ctnb": ("tnb_rule", "ctnb_slack"),
    "cpo": ("cpo_max_kl", "cpo_damping", "cpo_cg_iters", "cpo_backtrack_iters", "cpo_backtrack_coef", "cpo_cost_limit"),
}
"""The method-specific settings of the flat object of earlier runs, by the method that read them."""
LEGACY_ONLY = ("r0_scale",)
"""Settings of earlier runs that no method reads today (`r0_scale` was always 1: multiples are per chain)."""
LEGACY_SHARED = ("r0", "t_start", "metric", "novelty_action", "novelty_discount")
"""The novelty settings, which earlier runs recorded for plain PPO too (which reads none)."""


def current_method_settings(data: Any) -> Any:
    """A run's recorded method settings as today's npsco records them: an earlier run's flat object without the other
    methods' settings and `r0_scale`; anything else (today's form, or not an object) unchanged."""
    if not isinstance(data, dict):
        return data
    method = str(data.get("method", "ipd"))
    foreign = {k for m, keys in LEGACY_METHOD_SETTINGS.items() if m != method for k in keys}
    foreign -= set(LEGACY_METHOD_SETTINGS.get(method, ()))
    if method == "ppo":
        foreign |= set(LEGACY_SHARED)
    return {k: v for k, v in data.items() if k not in foreign and k not in LEGACY_ONLY}


REMOVED_PPO_SETTINGS: dict[str, tuple[Any, str]] = {
    "update_backend": (
        "numpy",
        "every update runs in numpy since 2026-11-28 (what update_backend=numpy chose; the torch update was removed)",
    ),
}
"""PPO settings of earlier runs that are not settings now: name -> (the value that means what runs today, why)."""


def current_ppo_settings(data: Any) -> Any:
    """A run's recorded PPO settings (its config.json's `ppo`) as today's npsco records them: without the removed
    settings (`REMOVED_PPO_SETTINGS`) that hold the value that means what runs today; a removed setting with any other
    value is kept (a difference from today's configuration), as is anything that is not an object."""
    if not isinstance(data, dict):
        return data
    return {k: v for k, v in data.items() if k not in REMOVED_PPO_SETTINGS or v != REMOVED_PPO_SETTINGS[k][0]}


def removed_ppo_setting(name: str) -> str | None:
    """The one-line message for a PPO setting given by `name` (`--set`, a config file) that an earlier npsco had and
    this one has not, or None when `name` is no such setting."""
    key = name.strip().replace("-", "_")
    if key not in REMOVED_PPO_SETTINGS:
        return None
    return f"{key} is not a setting now: {REMOVED_PPO_SETTINGS[key][1]}; leave it out"


OLD_DEFAULTS: tuple[tuple[str, Any, str, str], ...] = (
    ("r0_scales", [1.0], "default threshold multiple was 1", "--r0-scale 1"),
    ("method.tnb_rule", "safe", "default tnb_rule was safe", "--mset tnb_rule=safe"),
)
"""(setting, its earlier default, what changed, the flag that gives it back) for each changed default."""


def recorded_method(config: dict[str, Any]) -> str | None:
    """The method a population's `config.json` (or today's configuration as one) names, or None where it names none."""
    section = config.get("method")
    return section.get("method") if isinstance(section, dict) else None


def old_default_hints(stored: dict[str, Any], current: dict[str, Any]) -> str:
    """For a population run's recorded `config.json` (`stored`) that differs from today's configuration (`current`),
    a hint per changed default that explains the difference: `" (an earlier npsco's default ...: add ... to resume a
    run made with it)"`, or "" when none does."""
    hints: list[str] = []
    methods = recorded_method(stored), recorded_method(current)
    if None not in methods and methods[0] != methods[1]:  # a run of another method: its defaults are not this one's
        return ""
    for key, old, what, flag in OLD_DEFAULTS:
        section, _, name = key.rpartition(".")
        was = (stored.get(section) or {}) if section else stored
        now = (current.get(section) or {}) if section else current
        if not isinstance(was, dict) or not isinstance(now, dict) or name not in now:
            continue
        if _plain(was.get(name)) == old != _plain(now[name]):
            hints.append(f" (an earlier npsco's {what}: add {flag} to resume a run made with it)")
    return "".join(hints)


def _plain(value: Any) -> Any:
    """A tuple as the list JSON reads back."""
    return list(value) if isinstance(value, tuple) else value
