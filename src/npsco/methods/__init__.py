"""The methods that train novel policies on PPO (`npsco.ppo`), by name (`METHODS`), and `make_method`, which builds
one from its settings. Each method is one module: `ipd`, `wsr`, `tnb` (TNB and CTNB), `cpo`; `base` (plain PPO, the
method API), `novelty` (what the novelty methods share), `settings` (`MethodConfig`), `constrained` (the maths of
the constrained updates)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from npsco.methods.registry import METHODS, NOVELTY_METHODS

if TYPE_CHECKING:  # annotations only: building a method imports its module (torch for some)
    from npsco.methods.base import Method, MethodContext
    from npsco.methods.settings import MethodConfig

__all__ = ["METHODS", "NOVELTY_METHODS", "make_method"]


def make_method(config: MethodConfig, context: MethodContext) -> Method:
    """The `Method` object of `config.method` in `context` (its references, threshold, ...), settings validated."""
    config.validate()
    return METHODS[config.method].from_config(config, context)
