"""`npsco import`: read a policy file of another library, build the npsco policy, write `OUT/policy.safetensors`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from npsco.envs.make import check_env_id
from npsco.errors import NpscoError
from npsco.importers.cleanrl import read_cleanrl, read_obs_norm
from npsco.importers.common import build_policy
from npsco.importers.sb3 import is_sb3_zip, read_sb3
from npsco.importers.vecnormalize import read_vecnormalize
from npsco.io import STALE_TEMP, remove_stale_temps, run_entries
from npsco.layout import CONFIG_FILE, MANIFEST_FILE, POLICY_FILE
from npsco.locks import FolderLock
from npsco.paths import run_folder
from npsco.policy import Policy

FORMATS = ("auto", "sb3", "cleanrl")


@dataclass
class ImportResult:
    """What `import_policy` wrote and what the user should know about it."""

    policy: Policy
    checkpoint: Path
    description: str
    """One line: library, algorithm, architecture, normalisation."""
    lost: list[str]
    notes: list[str]


def detect_format(path: Path) -> str:
    """`sb3` for a zip with SB3's entries, else `cleanrl` (a `torch.save` file)."""
    return "sb3" if is_sb3_zip(path) else "cleanrl"


def check_import_folder(out: Path, force: bool) -> None:
    """Refuse to import into a folder that holds anything (saying what), but for an earlier import's lone
    policy.safetensors with `force`: an import never overwrites a trained policy or a run without a word."""
    # (a temporary file that a killed import left is not something to keep: it goes when the import writes)
    entries = [e for e in run_entries(out) if not STALE_TEMP.match(e)] if out.is_dir() else []
    if not entries or (force and entries == [POLICY_FILE]):
        return
    if CONFIG_FILE in entries or MANIFEST_FILE in entries:
        raise NpscoError(f"{out} holds an npsco run ({', '.join(entries[:4])}); import into another --out")
    if entries == [POLICY_FILE]:
        raise NpscoError(
            f"{out} already holds a policy (policy.safetensors); choose another --out, or --force to replace it"
        )
    raise NpscoError(
        f"{out} is not empty ({', '.join(entries[:4])}{', ...' if len(entries) > 4 else ''}); choose another --out"
    )


def import_policy(
    source: str | Path,
    env_id: str,
    out: str | Path,
    fmt: str = "auto",
    vecnormalize: str | Path | None = None,
    obs_norm: str | Path | None = None,
    seed: int = 0,
    force: bool = False,
) -> ImportResult:
    """Import `source` (an SB3 zip or a CleanRL checkpoint) as a policy of task `env_id` into folder `out`: an empty
    or new folder, or with `force` one that holds only an earlier import's policy.safetensors."""
    source = Path(source)
    run_folder(out)  # before anything there is read: no symbolic link below it (npsco.paths)
    check_import_folder(Path(out), force)
    if not source.exists():
        raise NpscoError(f"{source}: no such file")
    if not source.is_file():
        kind = "a folder" if source.is_dir() else "not a regular file"
        raise NpscoError(f"{source} is {kind}: give the checkpoint file itself (an SB3 .zip, a CleanRL .pt)")
    if fmt not in FORMATS:
        raise NpscoError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    check_env_id(env_id)
    fmt = detect_format(source) if fmt == "auto" else fmt
    notes: list[str] = []
    if fmt == "sb3":
        if obs_norm is not None:
            raise NpscoError(
                "--obs-norm is for CleanRL checkpoints; an SB3 model's statistics come with --vecnormalize"
            )
        actor = read_sb3(source)
        norm = read_vecnormalize(vecnormalize) if vecnormalize is not None else None
        if vecnormalize is None:
            notes.append(
                "no --vecnormalize given: if the model was trained inside VecNormalize, import it with that "
                "file, or the policy sees unnormalised observations"
            )
        elif norm is None:
            notes.append(f"{vecnormalize} did not normalise observations (norm_obs=False): none applied")
    else:
        if vecnormalize is not None:
            raise NpscoError("--vecnormalize is for Stable-Baselines3 models; CleanRL statistics come with --obs-norm")
        norm = read_obs_norm(obs_norm) if obs_norm is not None else None
        actor = read_cleanrl(source, seed=seed, with_obs_norm=norm is not None)
    stats = vecnormalize or obs_norm
    policy = build_policy(actor, env_id, norm, source, Path(stats) if stats else None)
    with FolderLock(out):  # one writer per folder; everything was read and checked before the folder is made
        check_import_folder(Path(out), force)  # again under the lock: another process may have written it meanwhile
        remove_stale_temps(out)
        checkpoint = policy.save(Path(out) / POLICY_FILE)
    hidden = "x".join(str(w.shape[0]) for w, _ in policy.weights[:-1]) or "no hidden layer"
    description = (
        f"{actor.source.get('library')} {actor.source.get('algorithm')}: MLP {hidden} {actor.activation}, "
        f"{'tanh-squashed' if actor.output == 'tanh' else 'clipped'} actions, "
        f"{'with' if norm is not None else 'without'} observation normalisation, on {env_id}"
    )
    return ImportResult(policy=policy, checkpoint=checkpoint, description=description, lost=actor.lost, notes=notes)
