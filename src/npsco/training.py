"""`npsco train`: one PPO policy in a run directory of its own.

    OUT/config.json     the command, preset and PPO settings; a rerun with the same settings finds the policy trained
                        (a setting npsco gained since the run was made matches at its default)
    OUT/...             what `npsco.ppo.train.train` writes: policy.safetensors, metrics.jsonl, checkpoints/, ...

A rerun of the same command after an interruption (Ctrl-C, SIGTERM, a kill) continues from the training state saved
in the folder (`checkpoints/state.safetensors`, `npsco.ppo.state`). Any other training (a new folder, or `force`)
starts in an empty folder: no file of an earlier attempt or of another configuration stays beside the new ones. One
process trains in a folder at a time: it holds the folder's lock (`npsco.locks`) while it writes there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from npsco.compat import current_ppo_settings
from npsco.errors import NpscoError
from npsco.filecheck import TRAIN_CONFIG, read_checked
from npsco.io import atomic_write_json, fresh_dir, read_json, run_entries
from npsco.layout import (
    CHECKPOINTS_FOLDER,
    CONFIG_FILE,
    INTERRUPTED_FILE,
    METRICS_FILE,
    POLICY_FILE,
    TENSORBOARD_FOLDER,
)
from npsco.limits import check_ppo_sizes
from npsco.locks import FolderLock
from npsco.logger import Tracking, require_wandb
from npsco.paths import run_folder
from npsco.ppo.config import PPOConfig
from npsco.ppo.state import read_state, state_path
from npsco.ppo.train import train
from npsco.ppo.trainer import TrainResult
from npsco.settings import differences, ppo_defaults
from npsco.tasks import task_name


def default_train_dir(cfg: PPOConfig) -> Path:
    """`runs/train/TASK-seedS`."""
    return Path(f"runs/train/{task_name(cfg.env_id)}-seed{cfg.seed}")


def train_record(cfg: PPOConfig, preset_name: str) -> dict[str, Any]:
    """What `config.json` holds."""
    return {"command": "train", "preset": preset_name, "ppo": cfg.to_dict()}


def prepare_train_dir(out: Path, record: dict[str, Any], force: bool = False) -> bool:
    """Check `out` against `record` (`train_record`); True when the run there is already trained with it (nothing to
    do). Refuses a folder that is not an npsco train run, and one of another configuration unless `force`."""
    run_folder(out)  # before anything there is read: no symbolic link below it (npsco.paths)
    stored = read_json(out / CONFIG_FILE) if (out / CONFIG_FILE).exists() else None
    if out.exists() and run_entries(out) and not (isinstance(stored, dict) and stored.get("command") == "train"):
        # never empty a folder that is not an npsco train run (a population run, the current directory, ...)
        raise NpscoError(f"{out} exists and is not an npsco train run directory; choose another --out")
    if stored is not None:
        read_checked(out / CONFIG_FILE, TRAIN_CONFIG)
    if stored is None or force:
        return False
    changed = differences({**stored, "ppo": current_ppo_settings(stored.get("ppo"))}, record, {"ppo": ppo_defaults()})
    if changed:
        raise NpscoError(
            f"{out} holds a run with a different configuration: "
            + "; ".join(changed[:6])
            + ("; ..." if len(changed) > 6 else "")
            + "; choose another --out or pass --force"
        )
    return (out / POLICY_FILE).exists()


def train_policy(
    cfg: PPOConfig,
    preset_name: str,
    out: str | Path | None = None,
    force: bool = False,
    progress: bool = True,
    tensorboard: bool = True,
    log: Callable[[str], None] = print,
    tracking: Tracking | None = None,
) -> TrainResult | None:
    """`npsco train`: train `cfg` into `out` (default `default_train_dir`), or find it trained there (returns None)."""
    out = Path(out) if out else default_train_dir(cfg)
    check_ppo_sizes(cfg.to_dict())
    if tracking is not None:
        require_wandb()
    record = train_record(cfg, preset_name)
    if not prepare_train_dir(out, record, force):  # checked before the lock: a refusal leaves the folder as it was
        with FolderLock(out):
            # again under the lock: another process may have trained it meanwhile
            if not prepare_train_dir(out, record, force):
                return _train_in(cfg, preset_name, record, out, force, progress, tensorboard, log, tracking)
    log(f"{out}: already trained with this configuration (policy.safetensors); --force retrains")
    return None


def _train_in(
    cfg: PPOConfig,
    preset_name: str,
    record: dict[str, Any],
    out: Path,
    force: bool,
    progress: bool,
    tensorboard: bool,
    log: Callable[[str], None],
    tracking: Tracking | None,
) -> TrainResult:
    """Train `cfg` in `out`, whose lock this process holds: from the state an interrupted attempt saved there, or in
    the emptied folder; log where everything is."""
    resume = not force and state_path(out).exists()
    if resume:
        step = read_state(state_path(out)).global_step
        log(f"{out}: resuming from the state saved at step {step:,} of {cfg.policy_steps:,}")
    else:
        fresh_dir(out)
        atomic_write_json(out / CONFIG_FILE, record)
    log(f"training PPO on {cfg.env_id} (preset {preset_name}, seed {cfg.seed}, {cfg.budget()} steps) -> {out}")
    result = train(cfg, run_dir=out, progress=progress, tensorboard=tensorboard, resume=resume, tracking=tracking)
    if result.interrupted:
        where = f"; run the same command again to resume from {state_path(out)}" if state_path(out).exists() else ""
        log(f"interrupted: the policy in training is saved at {out / CHECKPOINTS_FOLDER / INTERRUPTED_FILE}{where}")
        return result
    if result.eval_curve:
        last = result.eval_curve[-1]
        log(
            f"final deterministic evaluation: {last['eval/return_mean']:.2f} +- {last['eval/return_std']:.2f} "
            f"({cfg.eval_episodes} episodes)"
        )
    log(f"policy: {out / POLICY_FILE}   metrics: {out / METRICS_FILE}   tensorboard: {out / TENSORBOARD_FOLDER}")
    return result
