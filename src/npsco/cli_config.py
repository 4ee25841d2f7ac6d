"""`--config FILE.toml` of `npsco train`, `npsco population` and `npsco experiment`: a TOML file whose keys are the
command's options, spelled as their argparse names (`env`, `steps`, `env_package`, `r0_scale`, ...), read as the
command line's defaults, so that a flag given on the command line wins over the file.

`set` and `mset` are a list of "key=value" texts or a table (`[set]`, `learning_rate = 1e-3`); the file's come first
and the command line's after them, so those win too. Every key and value is checked before anything runs: an unknown
key, a value of the wrong type (true, 3, 3.0 and "3" are four different things) or outside the option's choices is a
one-line NpscoError naming the file and the key (docs/configuration.md).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npsco.cli_parser import command_parser
from npsco.compat import removed_ppo_setting
from npsco.errors import NpscoError
from npsco.fields import field_types, parse_value, typed_value
from npsco.io import read_toml
from npsco.methods.settings import MethodConfig
from npsco.ppo.config import PPOConfig

NOT_IN_FILES = ("help", "config", "force")
"""Options a file does not give: `--force` deletes a run, so it is asked for on the command line each time."""

SETTINGS = ("set", "mset")
"""The options whose file value is a list of "key=value" texts or a table of settings."""


@dataclass(frozen=True)
class ConfigFile:
    """A checked `--config` file."""

    path: Path
    """The file."""
    defaults: dict[str, Any]
    """Option name (argparse dest) -> value, as the command line would give it (`set` and `mset` as texts)."""
    settings: dict[str, list[str] | dict[str, Any]]
    """`set` and `mset` as the file gives them, for `check_settings` once the method is known."""


def read_config(path: str | Path, parser: argparse.ArgumentParser, command: str) -> ConfigFile:
    """The `--config` file at `path` for `npsco COMMAND` (`parser` its sub-parser), every key and value checked."""
    path = Path(path)
    options = {a.dest: a for a in parser._actions if a.option_strings and a.dest not in NOT_IN_FILES}
    defaults: dict[str, Any] = {}
    settings: dict[str, list[str] | dict[str, Any]] = {}
    for key, value in read_toml(path).items():
        action = options.get(key)
        if action is None:
            raise NpscoError(f"{path}: {unknown_key(key, command, list(options))}")
        if key in SETTINGS:
            settings[key] = value
            defaults[key] = assignments(path, key, value)
        else:
            defaults[key] = option_value(path, key, value, action)
    return ConfigFile(path, defaults, settings)


def unknown_key(key: str, command: str, known: list[str]) -> str:
    """The message for a key that is no option of `npsco COMMAND`."""
    if key in NOT_IN_FILES[1:]:
        return f"{key!r} is not read from a file; give --{key} on the command line"
    hint = f" (write {key.replace('-', '_')!r})" if key.replace("-", "_") in known else ""
    return f"unknown key {key!r}{hint}; npsco {command} reads {', '.join(known)}"


def option_value(path: Path, key: str, value: Any, action: argparse.Action) -> Any:
    """`value` checked as the option `action` takes it: a flag true or false, a list where it takes several values,
    each of its type and among its choices."""
    if action.nargs == 0:  # a flag (store_true)
        if not isinstance(value, bool):
            raise NpscoError(f"{path}: {key} must be true or false, got {shown(value)}")
        return value
    if action.nargs in ("+", "*"):
        if not isinstance(value, list):  # one value alone: a list of one (`env = "Hopper-v5"`)
            return [scalar(path, key, value, action)]
        if not value and action.default != []:
            raise NpscoError(f"{path}: {key} must be a list of {type_words(action.type)}, got {shown(value)}")
        return [scalar(path, f"{key}[{i}]", v, action) for i, v in enumerate(value)]
    return scalar(path, key, value, action)


def shown(value: Any) -> str:
    """A value as the TOML file writes it: true, 3, "3"."""
    return json.dumps(value, default=str)


def type_words(kind: Any) -> str:
    return "whole numbers" if kind is int else "numbers" if kind is float else "texts"


def scalar(path: Path, key: str, value: Any, action: argparse.Action) -> Any:
    """One value of the option `action`: of its type (an int where a float is asked for; never a bool for a number),
    and one of its choices if it has some."""
    kind = action.type
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and not math.isfinite(value):
            raise NpscoError(f"{path}: {key} must be a finite number, got {shown(value)}")
        value = float(value) if ok else value
    elif kind is None:
        ok = isinstance(value, str)
    else:  # pragma: no cover  (no option of train or population has another type)
        raise TypeError(f"no file reader for option type {kind!r}")
    if not ok:
        word = {int: "a whole number", float: "a number", None: "a text (in quotes)"}[kind]
        raise NpscoError(f"{path}: {key} must be {word}, got {shown(value)}")
    if action.choices is not None and value not in action.choices:
        raise NpscoError(f"{path}: {key} must be one of {', '.join(map(str, action.choices))}, got {shown(value)}")
    return value


def assignments(path: Path, key: str, value: Any) -> list[str]:
    """`set` or `mset` as the command line's "key=value" texts: a list of them, or a table of values."""
    if isinstance(value, list) and all(isinstance(v, str) and "=" in v for v in value):
        return list(value)
    if not isinstance(value, dict):
        raise NpscoError(f'{path}: {key} must be a list of "key=value" texts or a table ([{key}]), got {shown(value)}')
    return [f"{k}={as_text(path, f'{key}.{k}', v)}" for k, v in value.items()]


def as_text(path: Path, key: str, value: Any) -> str:
    """A table's value as `--set` text that reads back as the same value (`npsco.fields.parse_value`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return ",".join(map(str, value))
    raise NpscoError(f"{path}: {key} must be a number, text, true/false or a list of whole numbers, got {shown(value)}")


def check_settings(config: ConfigFile, method: str | None) -> None:
    """The file's `set` (PPO settings) and `mset` (settings of `method`) checked: each key a setting, each value of
    its type (a table's strictly: `typed_value`; a text as the command line's: `parse_value`)."""
    for key, given in config.settings.items():
        kinds = field_types(PPOConfig) if key == "set" else MethodConfig(method=str(method)).setting_types()
        pairs = given.items() if isinstance(given, dict) else (text.partition("=")[::2] for text in given)
        for name, value in pairs:
            name = name.strip().replace("-", "_")
            if key == "set" and (message := removed_ppo_setting(name)):
                raise NpscoError(f"{config.path}: set: {message}")
            if name not in kinds and key == "set":
                raise NpscoError(f"{config.path}: set: unknown setting {name!r}; known: {', '.join(sorted(kinds))}")
            if name not in kinds:
                listed = f"its settings: {', '.join(kinds)}" if kinds else "it has no settings"
                raise NpscoError(f"{config.path}: mset {name}: not a setting of method {method} ({listed})")
            try:
                if isinstance(given, dict):
                    typed_value(name, value, kinds[name])
                else:
                    parse_value(name, value, kinds[name])
            except NpscoError as e:
                raise NpscoError(f"{config.path}: {key}: {e}") from None


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None, args: argparse.Namespace) -> argparse.Namespace:
    """`args` (the command line parsed by `parser`) with its `--config` file's values as the defaults: the command
    line parsed again, so that what it gives wins; the file's settings checked against the method chosen."""
    command = args.command
    sub = command_parser(parser, command)
    config = read_config(args.config, sub, command)
    sub.set_defaults(**config.defaults)
    args = parser.parse_args(argv)
    check_settings(config, getattr(args, "method", None))
    return args
