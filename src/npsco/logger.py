"""Per-iteration metrics: a JSON-lines file (always), TensorBoard event files (optional) and Weights & Biases
(optional, `Tracking`), namespaced like CleanRL (`charts/`, `losses/`, `eval/`, `novelty/`, `ipd/`, ...)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npsco.errors import NpscoError
from npsco.filecheck import METRICS_ROW, check, problem
from npsco.io import NotFiniteNumber, atomic_write_text, loads_finite, named, read_bytes
from npsco.layout import METRICS_FILE, TENSORBOARD_FOLDER
from npsco.limits import MAX_METRICS_BYTES


@dataclass(frozen=True)
class Tracking:
    """Where a run's metrics also go on Weights & Biases (`--track`; `pip install 'npsco[wandb]'`)."""

    project: str = "npsco"
    """The W&B project."""
    entity: str | None = None
    """The W&B entity (user or team); None: W&B's default."""
    group: str | None = None
    """Runs of one population or sweep share a group (its folder); None: none."""
    name: str | None = None
    """The run's name; None: the run directory's path."""


NO_WANDB = "--track needs Weights & Biases: pip install 'npsco[wandb]' (or pip install wandb)"


def require_wandb() -> None:
    """Refuse tracking where W&B is not installed, without importing it (seconds): checked before a run is written."""
    try:
        found = importlib.util.find_spec("wandb") is not None
    except ValueError:  # a module loaded without a spec (made in memory): it is there
        found = True
    if not found:
        raise NpscoError(NO_WANDB)


def start_wandb(tracking: Tracking, run_dir: Path | None, config: dict[str, Any]) -> Any:
    """A W&B run for `tracking` (files under `run_dir`); W&B's own settings apply, e.g. WANDB_MODE=offline."""
    try:
        import wandb  # lazy: an optional extra (npsco[wandb]), seconds to import
    except ImportError:
        raise NpscoError(NO_WANDB) from None
    return wandb.init(
        project=tracking.project,
        entity=tracking.entity,
        group=tracking.group,
        name=tracking.name or (str(run_dir) if run_dir is not None else None),
        dir=str(run_dir.resolve()) if run_dir is not None else None,  # (the W&B service may run in another folder)
        config=config,
        reinit="create_new",
    )


class MetricsLogger:
    """Appends one JSON object per iteration to `metrics.jsonl` (flushed each time) and mirrors scalars to
    TensorBoard."""

    def __init__(
        self,
        run_dir: str | Path | None,
        tensorboard: bool = True,
        keep_rows: int | None = None,
        tracking: Tracking | None = None,
        config: dict[str, Any] | None = None,
    ):
        """`keep_rows`: a resumed run keeps that many rows of its metrics.jsonl (those its saved state had seen) and
        appends after them; None starts a new file. `tracking`: also log to W&B, with the run's `config`."""
        self.rows: list[dict[str, Any]] = []
        self._file = None
        self._path: Path | None = None
        self._tb = None
        self._tb_file: Path | None = None
        self._wandb = None
        if run_dir is not None:
            run_dir = Path(run_dir)
            run_dir.mkdir(parents=True, exist_ok=True)
            path = run_dir / METRICS_FILE
            if keep_rows is not None:
                self.rows = read_metrics(path)[:keep_rows] if path.exists() else []
                if len(self.rows) != keep_rows:
                    raise NpscoError(f"{path}: has {len(self.rows)} rows, the saved training state saw {keep_rows}")
                atomic_write_text(path, "".join(json.dumps(row) + "\n" for row in self.rows))
            mode = "w" if keep_rows is None else "a"
            self._file = open(path, mode, encoding="utf-8")  # noqa: SIM115  (closed by close())
            self._path = path
            if tensorboard:
                from torch.utils.tensorboard import SummaryWriter  # lazy: tensorboard is slow to import

                _QuietTensorBoardThread.install()
                self._tb_file = run_dir / TENSORBOARD_FOLDER
                with _naming(self._tb_file):
                    self._tb = SummaryWriter(str(self._tb_file))
                # the event file, for messages (TensorBoard keeps its name in a private field: else the folder)
                event_file = getattr(getattr(self._tb.file_writer, "event_writer", None), "_file_name", None)
                self._tb_file = Path(event_file) if isinstance(event_file, str) else self._tb_file
        if tracking is not None:
            self._wandb = start_wandb(tracking, None if run_dir is None else Path(run_dir), config or {})

    def log(self, step: int, metrics: dict[str, float]) -> None:
        row: dict[str, float | None] = {"global_step": int(step)}
        row.update({k: _clean(v) for k, v in metrics.items()})
        self.rows.append(row)
        if self._file is not None:
            with _naming(self._path):
                self._file.write(json.dumps(row) + "\n")
                self._file.flush()
        if self._tb is not None:
            with _naming(self._tb_file):
                for k, v in row.items():
                    if k != "global_step" and v is not None:
                        self._tb.add_scalar(k, v, step)
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in row.items() if k != "global_step" and v is not None}, step=int(step))

    def close(self) -> None:
        """Close the files; an error that TensorBoard's writer thread met (a full disk, a file too large) is raised
        here if no `log` raised it yet: a run whose metrics were not all written does not end as complete."""
        if self._file is not None:
            file, self._file = self._file, None
            with _naming(self._path):
                file.close()
        if self._tb is not None:
            tb, self._tb = self._tb, None
            with _naming(self._tb_file):
                tb.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


@contextlib.contextmanager
def _naming(path: Path | None) -> Iterator[None]:
    """An OSError inside names `path` (a write to an open file, or TensorBoard's thread, names none)."""
    try:
        yield
    except OSError as e:
        if path is None or e.filename is not None:
            raise
        raise named(e, path) from e


class _QuietTensorBoardThread:
    """`threading.excepthook`: an OSError of TensorBoard's writer thread prints no traceback (TensorBoard raises it
    again in the thread that logs or closes, where `MetricsLogger` names the file); anything else goes to the hook
    that was there before."""

    def __init__(self, previous: Callable[[threading.ExceptHookArgs], Any]):
        self.previous = previous

    def __call__(self, args: threading.ExceptHookArgs) -> None:
        if isinstance(args.exc_value, OSError) and type(args.thread).__name__ == "_AsyncWriterThread":
            return
        self.previous(args)

    @classmethod
    def install(cls) -> None:
        if not isinstance(threading.excepthook, cls):
            threading.excepthook = cls(threading.excepthook)


def _clean(v: Any) -> float | None:
    v = float(v)
    return v if math.isfinite(v) else None


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a `metrics.jsonl` file (a regular file of at most `MAX_METRICS_BYTES`). Only a torn last line (no
    newline: a crash in the middle of writing it) is skipped; any other line that is not a JSON object, or whose
    fields npsco reads are not of their type and range (`npsco.filecheck.METRICS_ROW`), raises an NpscoError naming
    the file and line."""
    text = read_bytes(path, MAX_METRICS_BYTES).decode("utf-8", errors="replace")
    lines = text.split("\n")
    torn = lines.pop()  # "" when the file ends with a newline; else the last line, cut short or not
    rows = []
    for number, line in enumerate(lines, 1):
        where = f"{path}, line {number}"
        try:
            row = loads_finite(line)
        except NotFiniteNumber as e:
            raise NpscoError(f"{where}: {e}; refused") from None
        except (ValueError, RecursionError):
            row = None
        if not isinstance(row, dict):
            raise NpscoError(f"{where}: not a JSON object (the file is damaged)")
        rows.append(check(row, METRICS_ROW, where))
    if torn:
        try:
            row = loads_finite(torn)
        except (ValueError, RecursionError):
            row = None
        if isinstance(row, dict) and problem(row, METRICS_ROW, "") is None:
            rows.append(row)
    return rows
