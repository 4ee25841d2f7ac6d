"""npsco from Python: train one policy (`train`) or a population of novel policies (`train_population`), with the
same options, defaults and run directories as `npsco train` and `npsco population`. The keyword arguments are the
commands' options (`npsco.options.TrainOptions`, `PopulationOptions`: `help(npsco.train_population)` lists them),
typed values (a dict of PPO settings, a dict of the method's settings), checked before anything is written; a value
of the wrong type is npsco's one-line `NpscoError`.

    import npsco

    result = npsco.train("Hopper-v5", out="runs/hopper-ppo", steps=1_000_000, seed=0)
    members = npsco.train_population("Hopper-v5", method="lagrangian", refs=5, novel=5, out="runs/hopper-lagr",
                                     workers=2)
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from npsco.errors import NpscoError
from npsco.fields import field_types
from npsco.logger import Tracking
from npsco.manifest import Member
from npsco.options import PopulationOptions, TrainOptions, default_of, options_of
from npsco.parallel import make_executor
from npsco.population import Population, default_population_dir
from npsco.population_config import PopulationConfig
from npsco.population_jobs import PRELOAD
from npsco.ppo.config import PPOConfig
from npsco.ppo.train import train as train_in_memory
from npsco.ppo.trainer import TrainResult
from npsco.training import train_policy

Function = TypeVar("Function", bound=Callable[..., Any])


def with_options(cls: type, config_only: bool = False) -> Callable[[Function], Function]:
    """Give the decorated function (`def f(env, ..., *, ..., **options)`) the options of `cls` as keyword-only
    arguments in its signature (`help()`, `inspect.signature`), after its own; `config_only`: without the options of
    the run (`out`, `workers`), for the functions that only build a configuration."""

    def sign(fn: Function) -> Function:
        signature, hints = inspect.signature(fn), typing.get_type_hints(fn)
        own = [
            p.replace(annotation=hints[p.name])
            for p in signature.parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        named, types = {p.name for p in own}, field_types(cls)
        options = [
            inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default_of(f), annotation=types[f.name])
            for f in options_of(cls)
            if f.name not in named and not (config_only and f.metadata["kind"] == "run")
        ]
        heads = [p for p in own if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        tails = [p for p in own if p.kind is inspect.Parameter.KEYWORD_ONLY]
        parameters = [*heads, *options, *tails]
        fn.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=parameters, return_annotation=hints["return"]
        )
        return fn

    return sign


def check_keywords(fn: Callable[..., Any], options: dict[str, Any]) -> None:
    """Refuse a keyword that `fn`'s signature (`with_options`) does not name, as Python does."""
    known = inspect.signature(fn).parameters
    for name in options:
        if name not in known:
            raise TypeError(f"{fn.__name__}() got an unexpected keyword argument {name!r}")


@with_options(TrainOptions, config_only=True)
def make_ppo_config(env: str, **options: Any) -> PPOConfig:
    """The PPO settings of a run: `preset`'s for the task, then `seed`, `steps` (total timesteps), `env_backend` and
    `settings` (name -> value, any field of `PPOConfig`), checked (a one-line `NpscoError` if not valid)."""
    check_keywords(make_ppo_config, options)
    return TrainOptions.from_call({"env": env, **options}).config()


@with_options(PopulationOptions, config_only=True)
def make_population_config(env: str, method: str = "ipd", **options: Any) -> PopulationConfig:
    """The configuration of a population run, as `npsco population` makes it from its options: R `refs` PPO references
    (default 5; or borrowed: `refs_from`, `ref_checkpoints`, without `refs`), then K `novel` policies of `method` per
    threshold multiple (`r0_scales`, default the method's; or an absolute threshold `r0`), checked."""
    check_keywords(make_population_config, options)
    return PopulationOptions.from_call({"env": env, "method": method, **options}).config()


@with_options(TrainOptions)
def train(
    env: str | PPOConfig,
    out: str | Path | None = None,
    *,
    progress: bool = True,
    track: Tracking | None = None,
    **options: Any,
) -> TrainResult | None:
    """Train one PPO policy: `env` a task id (with the options of `npsco train` as keywords) or a `PPOConfig`.

    With `out`, as `npsco train --out OUT`: the run directory gets config.json, the metrics and the policy, an
    interrupted run resumes, and a run already trained there returns None. Without `out`, nothing is written. `track`:
    the metrics also go to Weights & Biases (`npsco.logger.Tracking`).
    """
    check_keywords(train, options)
    if isinstance(env, PPOConfig):
        if options:
            raise NpscoError(f"{', '.join(options)}: options of a task id; a PPOConfig holds its settings already")
        chosen = TrainOptions.from_call({"out": out})
        cfg = env.validate()
    else:
        chosen = TrainOptions.from_call({"env": env, "out": out, **options})
        cfg = chosen.config()
    if chosen.out is None:
        return train_in_memory(cfg, progress=progress, tensorboard=False, tracking=track)
    return train_policy(cfg, chosen.preset, chosen.out, progress=progress, tracking=track)


@with_options(PopulationOptions)
def train_population(
    env: str | PopulationConfig,
    method: str = "ipd",
    *,
    progress: bool = True,
    track: Tracking | None = None,
    **options: Any,
) -> list[Member]:
    """Train (or resume) a population, as `npsco population`: `env` a task id (with `method` and the options of
    `npsco population` as keywords) or a `PopulationConfig` (then `out` and `workers` only). `out` defaults to
    `runs/population/TASK-METHOD`; `workers` > 1 trains independent policies at the same time on a local process
    pool; `track`: every policy's metrics also go to Weights & Biases, one run per policy in one group. Returns the
    manifest's members (their `path`, relative to `out`, holds each policy: `npsco.load_policy(out / member.path)`)."""
    check_keywords(train_population, options)
    if isinstance(env, PopulationConfig):
        given = sorted(set(options) - {f.name for f in options_of(PopulationOptions, "run")})
        if given:
            raise NpscoError(f"{', '.join(given)}: options of a task id; a PopulationConfig holds its settings already")
        chosen = PopulationOptions.from_call(options)
        config = env
    else:
        chosen = PopulationOptions.from_call({"env": env, "method": method, **options})
        config = chosen.config()
    folder = Path(chosen.out) if chosen.out is not None else default_population_dir(config)
    pop = Population(folder, config, progress=progress, log=print, tracking=track)
    if chosen.workers == 1:
        return pop.run()
    with make_executor("local", chosen.workers, preload=PRELOAD) as executor:
        return pop.run(executor)
