"""The methods npsco trains, by name: `METHODS`, the one list. The command line's choices, the settings' validation,
the worker processes' preload list and each method's default threshold multiple are all read from it.

Each entry names its class as `module:Class`, imported when first looked up, not when this module is: the names are
read by the command line's parser, which must not load torch (seconds) to print `--help`. This module imports nothing
from npsco, not even for annotations, so that anything may import it (the methods' settings and classes included).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class MethodClass(Protocol):
    """What the registry hands out: a `Method` subclass (`npsco.methods.base`), seen through the class-level members
    its users call. Described here rather than imported: `Method` takes a `MethodConfig`, whose module reads this
    one."""

    name: str
    """The method's name: its key in the registry."""
    Options: type | None
    """The dataclass of the method's own settings; None: none."""

    def from_config(self, config: Any, context: Any) -> Any:
        """The method object of `config` (a `MethodConfig`) in `context` (a `MethodContext`)."""

    def check_config(self, config: Any) -> None:
        """Refuse settings that do not go together."""

    def uses_profile(self, config: Any) -> bool:
        """Whether `config` asks for the references' threshold profile."""

    def uses_states(self, config: Any) -> bool:
        """Whether `config` needs the avoided policies' visited-state distributions."""


@dataclass(frozen=True)
class MethodEntry:
    """One method of the registry."""

    path: str
    """Its class, as `module:Class`."""
    r0_scale: float = 0.5
    """Its default threshold, as a multiple of r0_default (the references' mean pairwise distance), used when a
    population gives none: 0.5 for IPD and the paper's baselines (the multiple with which IPD did best on Hopper and
    the maze: docs/methods/ipd.md), 1 for the methods built to meet the paper's own threshold."""


class MethodRegistry(Mapping[str, MethodClass]):
    """name -> `Method` subclass, each imported on first access."""

    def __init__(self, entries: dict[str, MethodEntry]):
        self.entries = dict(entries)

    def __getitem__(self, name: str) -> MethodClass:
        module, _, cls = self.entries[name].path.partition(":")
        return getattr(importlib.import_module(module), cls)

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def modules(self) -> list[str]:
        """The modules that define the classes, each once, in registry order."""
        return list(dict.fromkeys(entry.path.partition(":")[0] for entry in self.entries.values()))


METHODS = MethodRegistry(
    {
        "ppo": MethodEntry("npsco.methods.base:Method"),
        "ipd": MethodEntry("npsco.methods.ipd:IPD"),
        "wsr": MethodEntry("npsco.methods.wsr:WSR"),
        "tnb": MethodEntry("npsco.methods.tnb:TNB"),
        "ctnb": MethodEntry("npsco.methods.tnb:CTNB"),
        "cpo": MethodEntry("npsco.methods.cpo:CPO"),
        "rspo": MethodEntry("npsco.methods.rspo:RSPO", r0_scale=1.0),
        "lagrangian": MethodEntry("npsco.methods.lagrangian:Lagrangian", r0_scale=1.0),
    }
)
"""Every method, plain PPO first; each class's `name` is its key (tests/unit/test_registry.py)."""

NOVELTY_METHODS: tuple[str, ...] = tuple(METHODS)[1:]
"""Every method but plain PPO: those that train against references and a threshold."""


def default_r0_scale(method: str) -> float:
    """The default threshold multiple of `method` (`MethodEntry.r0_scale`)."""
    return METHODS.entries[method].r0_scale
