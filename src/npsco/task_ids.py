"""Where a task id came from, and so whether it may choose code to run.

A task id of the form `module:Class` or `PKG:ID` makes npsco import that module and call what it names
(`npsco.envs.make.env_spec`). Such an id may come from the user: the command line (`--env`, `--env-package`), a grid
file, a run's `config.json` (which the user's command wrote), or Python code calling npsco. It must never come from a
checkpoint: a policy file from someone else would choose the code npsco runs.

So `npsco.policy.load_policy` marks the task id it reads from a checkpoint's metadata as a `CheckpointTaskId`, and
`npsco.envs.make` refuses to import or call anything for such an id unless the same id was trusted (`trust_task`) by
the command line or a run's configuration in this process. A plain registered id (`Hopper-v5`) imports nothing and
needs no trust. Imports nothing from npsco, so that anything may import it.
"""

from __future__ import annotations

_TRUSTED: set[str] = set()


class CheckpointTaskId(str):
    """A task id read from a checkpoint's metadata: a string like any other, but `npsco.envs.make` makes no task of
    it that names a module unless that id is trusted."""

    __slots__ = ()


def names_module(env_id: str) -> bool:
    """Whether making the task `env_id` imports a module (`module:Class`, `PKG:ID`)."""
    return ":" in env_id


def trust_task(env_id: str | None) -> None:
    """Record that the user named the task `env_id` (on the command line, in a grid file or in a run's config.json):
    this process may import and call the module it names, also where the id is read from a checkpoint."""
    if env_id:
        _TRUSTED.add(str(env_id))


def may_import(env_id: str) -> bool:
    """Whether making the task `env_id` may import and call the module it names: any id but one read from a
    checkpoint, and that one when the user named it too."""
    return not isinstance(env_id, CheckpointTaskId) or str(env_id) in _TRUSTED
