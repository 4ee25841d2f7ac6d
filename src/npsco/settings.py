"""Settings as the command line gives them, and as a run directory records them.

- `ppo_settings`: a task's preset with the command line's seed, budget, backend and `--set` overrides, checked before
  anything trains (`npsco train`, `npsco population`).
- `differences`: a run directory's `config.json` against the configuration of a new command, tolerant of settings
  npsco gained after the run was made (they match at their default), so that upgrading npsco does not stop a run
  from resuming.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from npsco.compat import removed_ppo_setting
from npsco.envs.make import check_env_backend, check_task, with_package
from npsco.errors import NpscoError
from npsco.fields import apply_overrides, apply_values
from npsco.ppo.config import PPOConfig, preset


def ppo_settings(
    env: str,
    preset_name: str = "default",
    seed: int = 0,
    steps: int | None = None,
    env_backend: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    env_package: str | None = None,
    values: dict[str, Any] | None = None,
) -> PPOConfig:
    """The PPO configuration of a command: `preset_name`'s for the task `env` (`PKG:ENV` with `env_package`), then
    `seed`, `steps` (total timesteps), `env_backend`, the `key=value` texts `overrides` of the command line and the
    `values` of a file, in that order (later ones win). The task is made once and the backend checked: a bad task
    fails here, with a one-line NpscoError, and so does a setting that an earlier npsco had (with a hint)."""
    for name in [text.partition("=")[0] for text in overrides] + list(values or {}):
        if message := removed_ppo_setting(name):
            raise NpscoError(message)
    env_id = with_package(env, env_package)
    check_task(env_id)
    cfg = dataclasses.replace(preset(env_id, preset_name), seed=seed)
    if steps is not None:
        cfg = dataclasses.replace(cfg, total_timesteps=steps)
    if env_backend is not None:
        cfg = dataclasses.replace(cfg, env_backend=env_backend)
    cfg = apply_values(apply_overrides(cfg, list(overrides)), values or {}, where="ppo").validate()
    check_env_backend(cfg.env_id, cfg.env_backend)
    return cfg


def differences(stored: dict[str, Any], current: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """The settings in which a run's recorded configuration `stored` and `current` differ, e.g.
    `"ppo.seed: 1 in the run, 0 now"`. A setting missing from `stored` matches when `current` has its value in
    `defaults` (the same nesting as the configurations); a setting only in `stored` is a difference."""
    out: list[str] = []

    def short(value: Any) -> str:  # a value as the message shows it: a long table or list by its size, text whole
        text = repr(value)
        if len(text) <= 40 or isinstance(value, str):
            return text
        return f"{type(value).__name__} of {len(value)}" if hasattr(value, "__len__") else "..."

    def walk(old: dict, new: dict, default: dict, prefix: str) -> None:
        for key in sorted(set(old) - set(new)):
            out.append(f"{prefix}{key}: {short(old[key])} in the run, not a setting now")
        for key, value in new.items():
            if key not in old:
                if key not in default or default[key] != value:
                    out.append(f"{prefix}{key}: not recorded in the run, {short(value)} now")
            elif isinstance(value, dict) and isinstance(old[key], dict):
                below = default.get(key)
                walk(old[key], value, below if isinstance(below, dict) else {}, f"{prefix}{key}.")
            elif old[key] != value:
                out.append(f"{prefix}{key}: {short(old[key])} in the run, {short(value)} now")

    walk(stored, current, defaults, "")
    return out


def ppo_defaults() -> dict[str, Any]:
    """The defaults of every PPO setting, as `differences` takes them under a configuration's `ppo` key."""
    return PPOConfig().to_dict()
