"""The methods npsco trains, by name: `METHODS`, from which the method names of the configuration, the command line's
choices, the configuration's validation and the worker processes' preload list are all derived.

`METHODS` maps each name to its `Method` class. The classes are imported when first looked up, not when this module
is: the names are read by `npsco.config` and by the command line's parser, which must not load torch (seconds) to
print `--help`. This module imports nothing from npsco, so anything may import it without a cycle.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    import numpy as np

    from npsco.algos.hooks import Method
    from npsco.config import MethodConfig
    from npsco.novelty.references import ReferenceSet


class MethodRegistry(Mapping[str, "type[Method]"]):
    """name -> `Method` subclass, each given as `module:Class` and imported on first access."""

    def __init__(self, classes: dict[str, str]):
        self._paths = dict(classes)

    def __getitem__(self, name: str) -> type[Method]:
        module, _, cls = self._paths[name].partition(":")
        return getattr(importlib.import_module(module), cls)

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def modules(self) -> list[str]:
        """The modules that define the classes, each once, in registry order."""
        return list(dict.fromkeys(path.partition(":")[0] for path in self._paths.values()))


METHODS = MethodRegistry(
    {
        "ppo": "npsco.algos.hooks:Method",
        "ipd": "npsco.algos.ipd:IPD",
        "wsr": "npsco.algos.wsr:WSR",
        "tnb": "npsco.algos.tnb:TNB",
        "ctnb": "npsco.algos.tnb:CTNB",
        "cpo": "npsco.algos.cpo:CPO",
    }
)
"""Every method, plain PPO first; each class's `name` is its key (tests/unit/test_registry.py)."""

NOVELTY_METHODS: tuple[str, ...] = tuple(METHODS)[1:]
"""Every method but plain PPO: those that train against references and a threshold."""


def make_method(
    config: MethodConfig, references: ReferenceSet, r0: float | None, env_id: str, profile: np.ndarray | None = None
) -> Method:
    """The `Method` object of `config.method`, bound to `references` and threshold `r0` (and, for IPD with
    `r0_profile=reference`, the references' threshold `profile`); plain PPO takes none of them."""
    config.validate()
    return METHODS[config.method].from_config(config, references, r0, env_id, profile)
