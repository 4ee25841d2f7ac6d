"""A method and its settings, typed: `MethodConfig` holds the method's name, the novelty settings every novelty method
shares (threshold, t_S, distance, ...) and the method's own settings (`options`, the dataclass the method class
declares as its `Options`). Text from the command line (`--mset key=value`) and grid files is parsed here, once, into
those types; a run directory records them as one flat JSON object (`to_dict` / `from_dict`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from npsco.errors import NpscoError
from npsco.fields import field_types, parse_value, typed_value
from npsco.methods.registry import METHODS
from npsco.novelty.metrics import METRICS

SHARED = ("r0", "t_start", "metric", "novelty_action", "novelty_discount")
"""The settings every novelty method reads (the fields of `MethodConfig` besides `method` and `options`)."""


def options_class(method: str) -> type | None:
    """The settings dataclass of `method` (its class's `Options`; None for a method without settings of its own)."""
    if method not in METHODS:
        raise NpscoError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return METHODS[method].Options


@dataclass
class MethodConfig:
    """A method and its settings. Each method reads the shared novelty settings (plain PPO none) and its own."""

    method: str = "ipd"
    """The method of the novel policies: a name of the registry `npsco.methods.METHODS` (`ppo`: more seeds, no
    novelty)."""
    r0: float | None = None
    """Novelty threshold, absolute. None: a multiple of the default (the references' mean pairwise distance, in the
    method's metric), given per chain by the population's `--r0-scale`."""
    t_start: int | None = None
    """The constraint applies after this many steps of an episode (paper: t_S = 20). None: the task's default
    (20 on MuJoCo, 3 on the maze, whose episodes are shorter than 20 steps)."""
    metric: str = "deterministic"
    """Distance between policies: `deterministic` (per state ||mu - mu_j||, paper App. C), `wasserstein2` (per state
    W2 between the Gaussians, paper Sec. 3.1), or `state` (between the distributions of visited states: kernel MMD,
    the `lagrangian` method only)."""
    novelty_action: str = "mean"
    """Which action of the new policy is compared with the references': `mean` (its deterministic action, clipped, as
    the paper's App. C) or `sample` (the action actually executed, noise included)."""
    novelty_discount: float = 1.0
    """The running novelty's memory: u_t = min_j sum_k g^(t-k) d_j(s_k) / sum_k g^(t-k) with g = novelty_discount.
    1: the mean since the episode's first step (paper Alg. 1); below 1 the distant past is forgotten (0.98: a horizon
    of ~50 steps), e.g. a take-off in which all policies act alike."""
    options: Any = field(default=None, compare=True)
    """The method's own settings: an instance of its class's `Options` dataclass (None: their defaults)."""

    def __post_init__(self) -> None:
        cls = options_class(self.method)
        if self.options is None and cls is not None:
            self.options = cls()
        if cls is None and self.options is not None:
            raise NpscoError(f"method {self.method} has no settings of its own")
        if cls is not None and not isinstance(self.options, cls):
            raise NpscoError(f"method {self.method}'s settings must be a {cls.__name__}")

    @classmethod
    def of(cls, method: str, **settings: Any) -> MethodConfig:
        """`method` with settings given by name, shared and own alike: `MethodConfig.of("tnb", tnb_rule="safe")`."""
        return cls(method).with_values(settings, where=f"method {method}:")

    def validate(self) -> MethodConfig:
        """Refuse settings out of range with a one-line NpscoError; returns self."""
        checks = [
            (
                self.r0 is None or (isinstance(self.r0, (int, float)) and 0 < self.r0 < float("inf")),
                f"r0 must be a positive number, got {self.r0!r}",
            ),
            (self.t_start is None or self.t_start >= 0, "t_start must be >= 0"),
            (self.metric in METRICS, f"unknown metric {self.metric!r}; choose one of {', '.join(METRICS)}"),
            (self.novelty_action in ("mean", "sample"), "novelty_action must be mean or sample"),
            (0 < self.novelty_discount <= 1, "novelty_discount must be in (0, 1]"),
        ]
        for ok, message in checks:
            if not ok:
                raise NpscoError(f"invalid method configuration: {message}")
        if self.options is not None:
            self.options.validate()
        METHODS[self.method].check_config(self)
        return self

    @property
    def own_settings(self) -> dict[str, Any]:
        """The method's own settings by name ({} for a method without any)."""
        return dataclasses.asdict(self.options) if self.options is not None else {}

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON object a run directory records: `method`, the shared settings (none for plain PPO), then the
        method's own."""
        shared = {k: getattr(self, k) for k in SHARED} if self.method != "ppo" else {}
        return {"method": self.method, **shared, **self.own_settings}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MethodConfig:
        """Inverse of `to_dict`; a key that is neither shared nor the method's own is refused, naming it."""
        data = dict(data)
        return cls.of(str(data.pop("method", "ipd")), **data)

    def setting_types(self) -> dict[str, Any]:
        """name -> type of every setting the method reads: the shared ones (none for plain PPO), then its own."""
        shared = {k: t for k, t in field_types(MethodConfig).items() if k in SHARED and self.method != "ppo"}
        return {**shared, **(field_types(type(self.options)) if self.options is not None else {})}

    def reads(self, key: str) -> bool:
        """Whether the method reads the setting `key`."""
        return key in self.setting_types()

    def with_settings(self, assignments: list[str] | tuple[str, ...], flag: str = "--mset") -> MethodConfig:
        """A copy with `key=value` texts applied in order (later ones win), each parsed to its setting's type; a key
        that the method does not read is refused, naming the method's settings."""
        return self._with(self.parse_settings(assignments, flag))

    def parse_settings(self, assignments: list[str] | tuple[str, ...], flag: str = "--mset") -> dict[str, Any]:
        """`key=value` texts as name -> value, each parsed to its setting's type (a key given again: the later value);
        a key that the method does not read is refused, naming the method's settings."""
        values: dict[str, Any] = {}
        for item in assignments:
            key, sep, raw = item.partition("=")
            key = key.strip().replace("-", "_")
            if not sep:
                raise NpscoError(f"{flag} expects key=value, got {item!r}")
            values[key] = parse_value(key, raw, self._type_of(key, flag))
        return values

    def with_values(self, values: dict[str, Any], where: str = "method") -> MethodConfig:
        """A copy with `values` (name -> value, as a TOML or JSON file holds them) applied, each checked against its
        setting's type; a key that the method does not read is refused."""
        return self._with({k: typed_value(k, v, self._type_of(k, where)) for k, v in values.items()})

    def _type_of(self, key: str, where: str) -> Any:
        kinds = self.setting_types()
        if key not in kinds:
            listed = f"its settings: {', '.join(kinds)}" if kinds else "it has no settings"
            what = where if where.lstrip("-").replace("-", "_") == key else f"{where} {key}"  # --r0, --mset r0
            raise NpscoError(f"{what}: not a setting of method {self.method} ({listed})")
        return kinds[key]

    def _with(self, values: dict[str, Any]) -> MethodConfig:
        shared = {k: v for k, v in values.items() if k in SHARED}
        own = {k: v for k, v in values.items() if k not in SHARED}
        options = dataclasses.replace(self.options, **own) if own else self.options
        return dataclasses.replace(self, **shared, options=options)
