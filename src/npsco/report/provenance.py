"""Where the report's numbers come from: the package versions, the `npsco population` command equivalent to a run's
configuration, and paths written relative to the folder the report is made in (so that a report and its runs can
move together)."""

from __future__ import annotations

import os
import platform
import shlex
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from npsco.compat import current_method_settings, current_ppo_settings
from npsco.methods.registry import METHODS, default_r0_scale
from npsco.methods.settings import MethodConfig
from npsco.ppo.config import PRESETS, preset

PACKAGES = ("npsco", "numpy", "scipy", "torch", "gymnasium", "mujoco", "matplotlib", "safetensors", "pillow")


# ------------------------------------------------------------------------------------------------- provenance
def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def _diff(base: dict, actual: dict) -> dict:
    return {k: v for k, v in actual.items() if k in base and base[k] != v}


def _value(v: object) -> str:
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def closest_preset(ppo: dict) -> tuple[str, dict]:
    """The preset that gives a run's PPO settings (its config.json's `ppo`) with the fewest overrides, and the
    settings that differ from it."""
    ppo = {
        **ppo,
        "actor_hidden": list(ppo.get("actor_hidden", [])),
        "critic_hidden": list(ppo.get("critic_hidden", [])),
    }
    diffs = {p: _diff(preset(ppo["env_id"], p).to_dict(), ppo) for p in PRESETS}
    chosen = min(PRESETS, key=lambda p: len(diffs[p]))
    return chosen, diffs[chosen]


def set_flags(settings: dict) -> list[str]:
    """`--set key=value` for each setting, as the command line takes them."""
    return [a for k, v in settings.items() for a in ("--set", f"{k}={_value(v)}")]


def population_command(run: str | Path, config: dict) -> str:
    """The `npsco population` command line equivalent to a run's config.json (the preset that needs the fewest
    overrides, then --set/--mset for every setting that differs from it)."""
    ppo = dict(current_ppo_settings(config.get("ppo") or {}))
    method = dict(current_method_settings(config.get("method") or {}))
    env = ppo.get("env_id")
    if not env:
        return f"# {run}: config.json has no PPO configuration"
    chosen, extra = closest_preset(ppo)
    args = ["npsco", "population", "--env", env]
    if chosen != "default":
        args += ["--preset", chosen]
    name = str(method.get("method", "ipd"))
    args += ["--method", name]
    if config.get("refs_from"):
        args += ["--refs-from", str(config["refs_from"])]
    elif config.get("ref_checkpoints"):
        args += ["--ref-checkpoints", *map(str, config["ref_checkpoints"])]
    else:
        args += ["--refs", str(config.get("refs"))]
    args += ["--novel", str(config.get("novel"))]
    scales = list(config.get("r0_scales") or [1.0])
    if method.get("r0") is None and (name not in METHODS or scales != [default_r0_scale(name)]):
        args += ["--r0-scale", *[f"{s:g}" for s in scales]]
    if "total_timesteps" in extra:
        args += ["--steps", str(extra.pop("total_timesteps"))]
    args += set_flags(extra)
    flags = {"r0": "--r0", "t_start": "--t-start", "ipd_rule": "--ipd-rule"}
    for k, v in _diff(method_defaults(name), method).items():
        if k != "method":
            args += [flags[k], _value(v)] if k in flags else ["--mset", f"{k}={_value(v)}"]
    args += ["--out", str(run)]
    return " ".join(shlex.quote(a) for a in args)


def method_defaults(method: str) -> dict:
    """The default of every setting `method` reads, as a run's config.json records them ({} for an unknown
    method); builds the method's settings, which imports its module (torch for TNB, CTNB, CPO)."""
    return MethodConfig(method=method).to_dict() if method in METHODS else {}


# ------------------------------------------------------------------------------------------------------ paths
def shown(path: str | Path) -> str:
    """A path as the report shows it: relative to the current folder (where the report is made), never absolute, so
    that the report names the same runs on another machine."""
    return os.path.relpath(Path(path).resolve())


def relative_command(command: str) -> str:
    """`command` with every argument that names an existing file or folder written as `shown` does."""

    def arg(a: str) -> str:
        return shown(a) if not a.startswith("-") and ("/" in a or Path(a).is_dir()) and Path(a).exists() else a

    return " ".join(shlex.quote(arg(a)) for a in shlex.split(command))


def portable(doc: dict) -> dict:
    """A run's evaluation document with its run, checkpoint paths and command as `shown` writes them."""
    return {
        **doc,
        "run": shown(doc["run"]),
        "command": relative_command(doc["command"]),
        "policies": [{**r, "run": shown(r["run"]), "checkpoint": shown(r["checkpoint"])} for r in doc["policies"]],
    }
