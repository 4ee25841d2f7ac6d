"""Settings dataclasses as the command line and the files give them: each field's docstring (`field_docs`), and
`key=value` text turned into a field's typed value (`parse_value`, `apply_overrides`), once, at the edge.

Types are read from the dataclass itself (`typing.get_type_hints`), not from the text of an annotation. Imports
nothing from npsco but its error type, so any settings class may use it.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import types
import typing
from itertools import pairwise
from typing import Any

from npsco.errors import NpscoError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def field_docs(cls: type) -> dict[str, str]:
    """The docstring of each dataclass field (the string literal under it), read from the source."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = re.sub(r"\s+", " ", nxt.value.value).strip()
    return docs


def field_types(cls: type) -> dict[str, Any]:
    """name -> type of each field of the dataclass `cls` (annotations resolved)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def type_name(tp: Any) -> str:
    """A type as a message shows it: `int`, `float | None`, `tuple[int, ...]`."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "")


def parse_value(key: str, raw: str, tp: Any) -> Any:
    """`raw` text as a value of type `tp` (bool, int, float, str, tuple[int, ...], or one of them `| None`); an
    NpscoError naming `key` and the expected type when it is not one."""
    text = raw.strip()
    try:
        return _parse(text, tp)
    except (ValueError, TypeError):
        raise NpscoError(f"bad value for {key}: {raw!r} (expected {type_name(tp)})") from None


def _parse(text: str, tp: Any) -> Any:
    args = typing.get_args(tp)
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        if text.lower() == "none" and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _parse(text, inner)
    if tp is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(text)
    if tp is int:
        value = float(text)
        if not value.is_integer():
            raise ValueError(text)
        return int(value)
    if tp is float:
        return float(text)
    if tp is str:
        return text
    if typing.get_origin(tp) is tuple:  # tuple[int, ...], tuple[float, ...]: comma-separated
        return tuple(_parse(x.strip(), args[0]) for x in text.strip("()[]").split(",") if x.strip())
    raise TypeError(f"no parser for {tp!r}")


def typed_value(key: str, value: Any, tp: Any) -> Any:
    """A value read from a TOML or JSON file as a value of type `tp`: the same checks as `parse_value`, without text
    in between (an int is a float where a float is expected; a list is a tuple where a tuple is expected); text is
    parsed as `parse_value` does."""
    if isinstance(value, str) and tp is not str:
        return parse_value(key, value, tp)
    try:
        return _typed(value, tp)
    except (ValueError, TypeError):
        raise NpscoError(f"bad value for {key}: {value!r} (expected {type_name(tp)})") from None


def _typed(value: Any, tp: Any) -> Any:
    args = typing.get_args(tp)
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _typed(value, inner)
    if tp is bool and isinstance(value, bool):
        return value
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is str and isinstance(value, str):
        return value
    if typing.get_origin(tp) is tuple and isinstance(value, (list, tuple)):
        return tuple(_typed(v, args[0]) for v in value)
    raise TypeError(f"{value!r} is not a {tp!r}")


def apply_values(cfg: Any, values: dict[str, Any], where: str = "settings") -> Any:
    """A copy of the settings dataclass `cfg` with `values` (name -> value, as a TOML or JSON file holds them)
    applied, each checked against its field's type (`typed_value`); an unknown key is a one-line NpscoError."""
    kinds = field_types(type(cfg))
    unknown = sorted(set(values) - set(kinds))
    if unknown:
        raise NpscoError(f"{where}: unknown setting {unknown[0]!r}; known: {', '.join(sorted(kinds))}")
    return dataclasses.replace(cfg, **{k: typed_value(k, v, kinds[k]) for k, v in values.items()})


def apply_overrides(cfg: Any, assignments: list[str] | tuple[str, ...], flag: str = "--set") -> Any:
    """A copy of the settings dataclass `cfg` with the `key=value` `assignments` applied in order (later ones win),
    each value parsed to its field's type; an unknown key or a bad value is a one-line NpscoError."""
    return dataclasses.replace(cfg, **parse_assignments(field_types(type(cfg)), assignments, flag))


def parse_assignments(kinds: dict[str, Any], assignments: list[str] | tuple[str, ...], flag: str = "--set") -> dict:
    """The `key=value` texts `assignments` as name -> typed value (`kinds`: name -> type), in order (a key given again:
    the later value); an unknown key or a bad value is a one-line NpscoError."""
    updates: dict[str, Any] = {}
    for item in assignments:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise NpscoError(f"{flag} expects key=value, got {item!r}")
        if key not in kinds:
            raise NpscoError(f"unknown setting {key!r}; known: {', '.join(sorted(kinds))}")
        updates[key] = parse_value(key, raw, kinds[key])
    return updates
