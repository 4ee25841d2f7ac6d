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
from npsco.options import PopulationOptions

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


def population_command(run: str | Path, config: dict) -> str:
    """The `npsco population` command line equivalent to a run's config.json: its options
    (`npsco.options.PopulationOptions.from_record`: the preset that needs the fewest settings, then every setting
    that differs from it; settings an earlier npsco recorded read as today's, `npsco.compat`) as the command line
    writes them, which parses back to the same configuration."""
    config = {
        **config,
        "ppo": dict(current_ppo_settings(config.get("ppo") or {})),
        "method": dict(current_method_settings(config.get("method") or {})),
    }
    if not config["ppo"].get("env_id"):
        return f"# {run}: config.json has no PPO configuration"
    options = PopulationOptions.from_record(config, out=str(run))
    return shlex.join(["npsco", "population", *options.to_argv()])


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
