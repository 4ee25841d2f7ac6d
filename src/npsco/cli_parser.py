"""The `npsco` command line: the arguments of every command, their defaults and help texts (`build_parser`, one
builder per command). `npsco train` and `npsco population` take the options of `npsco.options` (`add_arguments`),
with the flags of the session (`--no-progress`, `--config`, `--track`) beside them. `npsco.cli` parses with it and
runs the command."""

from __future__ import annotations

import argparse

from npsco.methods.registry import NOVELTY_METHODS
from npsco.options import ENV_PACKAGE_HELP, PopulationOptions, TrainOptions, add_arguments
from npsco.ppo.config import PRESETS
from npsco.tasks import MAZE_ID
from npsco.version import __version__

Subparsers = argparse._SubParsersAction
TASK_OF_CHECKPOINT_HELP = (
    "the task of a checkpoint whose task id names a Python module (module:Class, PKG:ID) and that lies in no run "
    "whose config.json names it: a checkpoint's own metadata never chooses code to run (docs/reliability.md)"
)


def command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The sub-parser of `npsco COMMAND` in the parser of `build_parser`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[command]
    raise KeyError(command)


def add_config(parser: argparse.ArgumentParser) -> None:
    """`--config FILE.toml`: the command's options from a file (`npsco.cli_config`)."""
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE.toml",
        help="read the options from a TOML file (keys: the options' names with _ for -, e.g. env_package; --set as a "
        "table [set]); options given here win over the file (see docs/configuration.md)",
    )


def add_tracking(parser: argparse.ArgumentParser) -> None:
    """`--track` and its W&B project and entity (`npsco.logger.Tracking`)."""
    parser.add_argument(
        "--track",
        action="store_true",
        help="also log the metrics to Weights & Biases (pip install 'npsco[wandb]'; WANDB_MODE=offline works)",
    )
    parser.add_argument("--wandb-project", default=None, metavar="NAME", help="W&B project (default npsco)")
    parser.add_argument("--wandb-entity", default=None, metavar="NAME", help="W&B entity (default: W&B's own)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every `npsco` command."""
    p = argparse.ArgumentParser(
        prog="npsco", description="Novel policy seeking with constrained optimization (IPD on PPO)."
    )
    p.add_argument("--version", action="version", version=f"npsco {__version__}")
    p.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (
        add_train,
        add_evaluate,
        add_report,
        add_render,
        add_export,
        add_import,
        add_experiment,
        add_population,
        add_sweep,
        add_threshold,
    ):
        add(sub)
    return p


def add_train(sub: Subparsers) -> None:
    """`npsco train`: the options of `TrainOptions`, then the session's."""
    t = sub.add_parser("train", help="train one PPO policy", description="Train one PPO policy and save it.")
    add_arguments(t, TrainOptions)
    t.add_argument(
        "--force",
        action="store_true",
        help="retrain in an existing run directory of another configuration (its files are deleted first)",
    )
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--no-tensorboard", action="store_true", help="no TensorBoard event files")
    add_config(t)
    add_tracking(t)


def add_evaluate(sub: Subparsers) -> None:
    e = sub.add_parser(
        "evaluate",
        help="evaluate a checkpoint or population runs",
        description="Deterministic evaluation. A checkpoint: its return (JSON next to it). Population "
        "run directories: every policy's return, novelty, relative novelty, success and "
        "state novelty, with per-method statistics (RUN/evaluation/evaluation.csv and "
        ".json; see docs/report.md).",
    )
    e.add_argument(
        "targets",
        nargs="+",
        metavar="RUN_OR_CHECKPOINT",
        help="population run directories, or one policy .safetensors file / run directory holding one",
    )
    e.add_argument(
        "--episodes", type=int, default=None, help="episodes per policy (default 100 on the maze, 10 otherwise)"
    )
    e.add_argument("--seed", type=int, default=0, help="episode i runs on an env seeded seed + i")
    e.add_argument(
        "--out",
        default=None,
        help="checkpoint: JSON output (default: next to it, .eval.json); runs: a "
        "folder for one combined evaluation.csv/.json (default: RUN/evaluation/)",
    )
    e.add_argument("--force", action="store_true", help="runs: re-evaluate even when RUN/evaluation/ is up to date")
    e.add_argument(
        "--describe",
        action="store_true",
        help="runs on a MuJoCo locomotion task: also print how each policy moves (forward speed, touchdowns per "
        "second, torso height and pitch, each foot's time on the floor; docs/report.md)",
    )
    e.add_argument("--env", default=None, metavar="ENV_ID", help=TASK_OF_CHECKPOINT_HELP)


def add_report(sub: Subparsers) -> None:
    r = sub.add_parser(
        "report",
        help="Markdown/HTML report of population runs",
        description="Table 1, Figs. 2-4, training curves, behaviour filmstrips, per-policy results and "
        "the configuration of population runs (evaluated first where needed).",
    )
    r.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="population run directories (e.g. one per method), or sweep "
        "/ experiment directories (all their population runs)",
    )
    r.add_argument("--out", required=True, help="folder for report.md, report.html, figures/ and evaluation.csv")
    r.add_argument(
        "--episodes", type=int, default=None, help="evaluation episodes per policy (default 100 maze, 10 otherwise)"
    )
    r.add_argument("--seed", type=int, default=0, help="evaluation episode i runs on an env seeded seed + i")
    r.add_argument("--force", action="store_true", help="re-evaluate even when RUN/evaluation/ is up to date")
    r.add_argument("--no-filmstrips", action="store_true", help="no behaviour pictures (they need rendering)")
    r.add_argument("--max-filmstrips", type=int, default=None, metavar="N", help="at most N filmstrips")
    r.add_argument(
        "--gif",
        action="store_true",
        help="videos as animated GIFs (default: MP4 when imageio-ffmpeg is installed, else GIF)",
    )
    r.add_argument("--no-videos", action="store_true", help="no video per policy (filmstrips only; faster)")


def add_render(sub: Subparsers) -> None:
    rd = sub.add_parser(
        "render",
        help="filmstrip (PNG) or animation (GIF) of one policy",
        description="Frames of one deterministic episode: N frames spread over the whole episode (or every K "
        "steps), side by side (or a GIF). MuJoCo renders offscreen (MUJOCO_GL=egl by default), by a camera that "
        "follows the body.",
    )
    rd.add_argument("checkpoint", help="a policy .safetensors file or a run directory holding policy.safetensors")
    rd.add_argument("--out", default=None, help="output file (default: next to the checkpoint, .filmstrip.png or .gif)")
    rd.add_argument("--frames", type=int, default=None, help="frames (default: maze 6, MuJoCo 8; GIF 40 / 100)")
    rd.add_argument(
        "--every", type=int, default=None, help="steps between frames (default: spread over the whole episode)"
    )
    rd.add_argument("--gif", action="store_true", help="an animated GIF instead of a filmstrip")
    rd.add_argument("--fps", type=float, default=10.0, help="GIF frames per second (default 10)")
    rd.add_argument("--seed", type=int, default=0, help="seed of the episode's environment")
    rd.add_argument("--size", type=int, default=None, help="frame side in pixels (default: maze 160, MuJoCo 240)")
    rd.add_argument("--start", type=float, nargs=2, default=None, metavar=("X", "Y"), help="maze start position")
    rd.add_argument("--env", default=None, metavar="ENV_ID", help=TASK_OF_CHECKPOINT_HELP)


def add_export(sub: Subparsers) -> None:
    ex = sub.add_parser(
        "export",
        help="a policy as an ONNX model (runs without npsco)",
        description="Write a policy's deterministic action (raw observations in, the executed action out: its "
        "normalisation, MLP and action clipping) as an ONNX model, readable by ONNX Runtime and other ONNX tools "
        "(pip install 'npsco[onnx]'; docs/checkpoints.md).",
    )
    ex.add_argument("checkpoint", help="a policy .safetensors file or a run directory holding policy.safetensors")
    ex.add_argument("--onnx", action="store_true", required=True, help="export as ONNX (the one format today)")
    ex.add_argument("--out", default=None, help="the .onnx file (default: next to the checkpoint, policy.onnx)")


def add_import(sub: Subparsers) -> None:
    im = sub.add_parser(
        "import",
        help="a Stable-Baselines3 or CleanRL policy -> an npsco checkpoint",
        description="Turn a Stable-Baselines3 .zip (PPO, A2C, SAC, TD3; MLP policy, Box actions; with "
        "its VecNormalize statistics) or a CleanRL continuous-action PPO checkpoint into "
        "OUT/policy.safetensors, usable wherever an npsco policy is (references, evaluate, "
        "render, report). Nothing in the files is unpickled into code (docs/import.md).",
    )
    im.add_argument("source", help="the SB3 .zip, or the CleanRL .cleanrl_model file")
    im.add_argument("--env", required=True, help="Gymnasium id of the task the policy acts in, e.g. Hopper-v5")
    im.add_argument("--env-package", default=None, metavar="PKG", help=ENV_PACKAGE_HELP)
    im.add_argument(
        "--out",
        default=None,
        help="an empty or new folder for policy.safetensors (default runs/imported/SOURCE_STEM)",
    )
    im.add_argument(
        "--force", action="store_true", help="replace the policy of an earlier import in --out (never a trained run)"
    )
    im.add_argument(
        "--vecnormalize",
        default=None,
        metavar="PKL",
        help="SB3: the VecNormalize statistics file (VecNormalize.save), applied to observations",
    )
    im.add_argument(
        "--obs-norm",
        default=None,
        metavar="NPZ",
        help="CleanRL: observation statistics (.npz with mean, var; optional clip, eps), which CleanRL does not save",
    )
    im.add_argument(
        "--from",
        dest="source_format",
        default="auto",
        choices=("auto", "sb3", "cleanrl"),
        help="the file's library (default: auto, an SB3 zip or else a CleanRL checkpoint)",
    )
    im.add_argument("--seed", type=int, default=0, help="CleanRL: the training seed to record (SB3 zips store theirs)")


def add_experiment(sub: Subparsers) -> None:
    x = sub.add_parser(
        "experiment",
        help="the default experiment: references, every method, report",
        description="PPO references, then K novel policies of each method against them, trained in "
        "parallel (a sweep: OUT/TASK/ppo, OUT/TASK/METHOD), then `npsco report` "
        "(OUT/report). Re-running the same command resumes.",
    )
    x.add_argument("--env", nargs="+", default=[MAZE_ID], metavar="ENV_ID", help=f"task(s) (default {MAZE_ID})")
    x.add_argument("--env-package", default=None, metavar="PKG", help=ENV_PACKAGE_HELP)
    x.add_argument("--out", default="runs/experiment", help="experiment folder (default runs/experiment)")
    x.add_argument("--refs", type=int, default=5, help="PPO references per task (default 5)")
    x.add_argument("--novel", type=int, default=3, help="novel policies per method and threshold (default 3)")
    x.add_argument(
        "--methods",
        nargs="+",
        default=list(NOVELTY_METHODS),  # every registered method but PPO (which trains the references)
        metavar="METHOD",
        help=f"methods of the novel policies (default: all of {' '.join(NOVELTY_METHODS)})",
    )
    x.add_argument(
        "--ablation",
        type=float,
        nargs="+",
        default=[],
        metavar="S",
        help="also train IPD at these multiples of the references' mean pairwise distance (Fig. 4), e.g. --ablation 2",
    )
    x.add_argument("--steps", type=float, default=None, help="steps per policy (default: the preset's)")
    x.add_argument("--workers", type=int, default=None, help="policies trained at once (default: the CPU count)")
    x.add_argument("--episodes", type=int, default=None, help="evaluation episodes per policy in the report")
    x.add_argument("--preset", default="default", choices=PRESETS)
    x.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a PPO setting")
    x.add_argument("--no-report", action="store_true", help="train only")
    add_config(x)
    add_tracking(x)


def add_population(sub: Subparsers) -> None:
    """`npsco population`: the options of `PopulationOptions`, then the session's."""
    pp = sub.add_parser(
        "population",
        help="train R PPO references then K novel policies",
        description="The paper's workflow: R PPO references (seeds S..S+R-1), the threshold r0, then K "
        "novel policies one after another. Re-running the same command resumes.",
    )
    add_arguments(pp, PopulationOptions)
    pp.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_config(pp)
    add_tracking(pp)


def add_sweep(sub: Subparsers) -> None:
    sw = sub.add_parser(
        "sweep",
        help="a grid of population runs (tasks x methods x thresholds), in parallel",
        description="Train the population runs of a grid file (docs/sweep.md) in one folder, the "
        "independent policies in parallel on a local process pool or a Ray cluster. "
        "Re-running the same command resumes.",
    )
    sw.add_argument("grid", help="grid file (TOML), e.g. examples/maze_grid.toml")
    sw.add_argument("--out", default=None, help="sweep folder (default runs/sweep/GRID_NAME)")
    sw.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="local: a process pool on this machine (default); ray: Ray tasks",
    )
    sw.add_argument(
        "--workers",
        type=int,
        default=None,
        help="policies trained at the same time (default: the CPU count; with Ray, the cluster's CPUs)",
    )
    sw.add_argument(
        "--address", default=None, metavar="HOST:PORT", help="Ray cluster to join (default: start a local Ray instance)"
    )
    sw.add_argument("--dry-run", action="store_true", help="check the grid and print the plan, train nothing")
    add_tracking(sw)


def add_threshold(sub: Subparsers) -> None:
    th = sub.add_parser(
        "threshold",
        help="the default r0 of a set of policies",
        description="r0 = mean pairwise distance between policies, each measured on its own visited "
        "states (deterministic episodes).",
    )
    th.add_argument("policies", nargs="+", help="checkpoints, or population run directories (their references)")
    th.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="deterministic episodes per policy (default: as npsco population, 50 on the maze, 5 otherwise)",
    )
    th.add_argument("--seed", type=int, default=0)
    th.add_argument(
        "--metric",
        choices=("deterministic", "wasserstein2"),
        default="deterministic",
        help="per-state distance (default deterministic; wasserstein2 for populations trained with "
        "--mset metric=wasserstein2)",
    )
    th.add_argument("--out", default=None, help="write the matrix and r0 as JSON here")
    th.add_argument("--env", default=None, metavar="ENV_ID", help=TASK_OF_CHECKPOINT_HELP)
