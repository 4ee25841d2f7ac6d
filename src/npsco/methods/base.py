"""What a method is: PPO's hooks (`npsco.ppo.hooks.Hooks`) with a name, its own settings (`Options`) and a way to be
built from a `MethodConfig` and what its population knows (`MethodContext`). `Method` itself is plain PPO.

A new method is one module with a `Method` subclass (its `Options` dataclass, a docstring per field, and the hooks it
needs: a step shaper, reward streams, an update rule) and one line in `npsco.methods.registry`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from npsco.novelty.references import ReferenceSet
from npsco.ppo.hooks import Hooks

if TYPE_CHECKING:  # annotations only
    from npsco.methods.settings import MethodConfig
    from npsco.novelty.states import StateDistance


@dataclass
class MethodContext:
    """What a population knows when it builds a novel policy's method."""

    env_id: str
    """Gymnasium id of the task."""
    references: ReferenceSet = field(default_factory=lambda: ReferenceSet([]))
    """The policies the new one must differ from (the population's references and the chain's earlier policies)."""
    r0: float | None = None
    """The threshold it trains at, in the method's metric (None for plain PPO)."""
    r0_profile: np.ndarray | None = None
    """The references' threshold profile rho(t) (`threshold.json`), for a method whose settings ask for it."""
    states: StateDistance | None = None
    """The visited-state distributions of the policies in `references`, for the `state` metric."""
    reference_returns: tuple[float, ...] = ()
    """The final deterministic returns of the population's references (a return constraint's yardstick)."""
    state_r0: float | None = None
    """The state-distance threshold of a method that constrains visited states beside actions (the Lagrangian's
    `lagrangian_joint`): the references' mean pairwise state distance, scaled as r0 is."""


class Method(Hooks):
    """Plain PPO; every other method subclasses it."""

    name = "ppo"
    """The method's name in the registry (`npsco.methods.METHODS`), the checkpoints and the logs."""
    Options: ClassVar[type | None] = None
    """The dataclass of the method's own settings (a docstring per field, a `validate()` method); None: none."""

    @classmethod
    def from_config(cls, config: MethodConfig, context: MethodContext) -> Method:
        """The method of `config` in `context`; plain PPO needs neither."""
        return cls()

    @classmethod
    def check_config(cls, config: MethodConfig) -> None:
        """Refuse settings that do not go together (one-line NpscoError); after each setting's own checks."""

    @classmethod
    def uses_profile(cls, config: MethodConfig) -> bool:
        """Whether `config` asks for the references' threshold profile (IPD's `r0_profile=reference`)."""
        return False

    @classmethod
    def uses_states(cls, config: MethodConfig) -> bool:
        """Whether `config` needs the avoided policies' visited-state distributions (`MethodContext.states`)."""
        return config.metric == "state"
