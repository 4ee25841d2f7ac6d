"""The `npsco` command: the arguments parsed (`npsco.cli_parser`), then one function per command that calls into the
library. Errors the user can fix print one line and exit 2 (`--debug` for a traceback), file-system errors too (a
full disk, a file past the size limit, a read-only folder: `npsco.io.file_system_message`, naming the file); Ctrl-C and
SIGTERM exit 130 after saving what was in training.

Each command imports the library modules that load torch, gymnasium, scipy, numba or matplotlib inside its function
("lazy", the comment names what it spares): `npsco --help` and every command load only their own (torch alone takes
seconds to import)."""

from __future__ import annotations

import argparse
import math
import shlex
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from npsco.cli_parser import build_parser, command_parser
from npsco.errors import NpscoError
from npsco.io import atomic_write_json, file_system_message, is_file_system_error, read_json
from npsco.layout import EVALUATION_FILE, MANIFEST_FILE
from npsco.limits import MAX_EPISODES, MAX_FRAME_SIDE, MAX_FRAMES, MAX_RENDER_PIXELS, check_at_most
from npsco.logger import Tracking
from npsco.manifest import policy_files, population_dirs
from npsco.options import PopulationOptions, TrainOptions
from npsco.paths import output_file
from npsco.selection import RETURN_RATIO
from npsco.task_ids import trust_task
from npsco.tasks import MAZE_ID, default_distance_episodes

Command = Callable[[argparse.Namespace], int]
COMMANDS: dict[str, Command] = {}


def command(name: str) -> Callable[[Command], Command]:
    """Register the decorated function as the `npsco NAME` command."""

    def register(fn: Command) -> Command:
        COMMANDS[name] = fn
        return fn

    return register


def _is_population_run(path: str) -> bool:
    return (Path(path) / MANIFEST_FILE).exists()


def tracking(args: argparse.Namespace) -> Tracking | None:
    """The W&B tracking of `--track` (None without it); `--wandb-project` or `--wandb-entity` alone are refused."""
    if not args.track:
        given = [
            flag
            for flag, value in (("--wandb-project", args.wandb_project), ("--wandb-entity", args.wandb_entity))
            if value
        ]
        if given:
            raise NpscoError(f"{given[0]} applies with --track (Weights & Biases); add --track, or leave it out")
        return None
    return Tracking(project=args.wandb_project or Tracking.project, entity=args.wandb_entity)


RESUMABLE = ("train", "population", "sweep", "experiment")
"""The commands that continue where they stopped when run again (their Ctrl-C message says so)."""


@command("train")
def cmd_train(args: argparse.Namespace) -> int:
    from npsco.training import train_policy  # lazy: torch

    options = TrainOptions.from_args(args)
    result = train_policy(
        options.config(),
        options.preset,
        options.out,
        force=args.force,
        progress=not args.no_progress,
        tensorboard=not args.no_tensorboard,
        tracking=tracking(args),
    )
    return 130 if result is not None and result.interrupted else 0


@command("evaluate")
def cmd_evaluate(args: argparse.Namespace) -> int:
    if any(_is_population_run(t) for t in args.targets):
        from npsco.evaluation.evaluate import evaluate_and_write  # lazy: scipy, numba

        stats, written = evaluate_and_write(args.targets, args.episodes, args.seed, reuse=not args.force, out=args.out)
        _print_statistics(stats)
        _print_novel_policies([p for p in written if p.name == EVALUATION_FILE])
        if args.describe:
            _print_descriptors([p for p in written if p.name == EVALUATION_FILE])
        print("results: " + ", ".join(str(p) for p in written))
        return 0
    if len(args.targets) > 1:
        raise NpscoError("give one checkpoint, or one or more population run directories")
    from npsco.episodes import evaluate_checkpoint  # lazy: gymnasium
    from npsco.evaluation.runs import trust_configured_task  # lazy: gymnasium (npsco.evaluation loads it)

    trust_configured_task(args.targets[0])  # the task its run's config.json names (the checkpoint's own is not enough)
    summary, out = evaluate_checkpoint(args.targets[0], args.episodes, args.seed, args.out)
    line = (
        f"{summary['env_id']}: return {summary['return_mean']:.2f} +- {summary['return_std']:.2f} over "
        f"{summary['episodes']} deterministic episodes"
    )
    if "goals" in summary:
        line += "; goals " + ", ".join(f"{k} {v}" for k, v in summary["goals"].items() if v)
    print(line)
    print(f"written: {out}")
    return 0


def _print_statistics(stats: dict) -> None:
    """The per-group table of `npsco evaluate RUN...` on the terminal."""
    from npsco.report.data import fmt, pm  # lazy: gymnasium (npsco.evaluation)

    print(
        f"{'method':>14s} {'task':>20s} {'n':>3s}  {'reward':>20s}  {'success':>7s}  {'final':>5s}  "
        f"{'rel. novelty':>14s}  {'/ pairwise':>14s}"
    )
    for s in stats["per_task"]:
        success, final = (fmt(s[k], 2) if s[k] is not None else "-" for k in ("success_rate", "success_rate_final"))
        print(
            f"{s['group']:>14s} {s['task']:>20s} {s['n']:>3d}  {pm(s['return']):>20s}  {success:>7s}  {final:>5s}  "
            f"{pm(s['relative_novelty_paper']):>14s}  {pm(s['relative_novelty']):>14s}"
        )
    print(
        "success: the paper's (novel policies: at some training evaluation) and on the final policies; relative "
        "novelty: the paper's (/ PPO mean novelty) and / PPO mean pairwise distance"
    )


def _print_novel_policies(documents: list[Path]) -> None:
    """Per novel policy: its return over the references' median, its nearest distance over r0, whether it meets the
    paper's criteria, and the yardstick (how many references it is more different than)."""
    rows = [r for d in documents for r in read_json(d)["policies"] if r.get("role") == "novel"]
    if not rows:
        return
    print(
        f"{'policy':>24s} {'task':>20s}  {'return':>10s}  {'/ median':>8s}  {'nearest / r0':>12s}  {'meets':>5s}  "
        "more different than"
    )
    for r in rows:
        ratio, near = (f"{r[k]:.2f}" if r.get(k) is not None else "-" for k in ("return_ratio", "nearest_ratio"))
        meets = "-" if r.get("meets") is None else ("yes" if r["meets"] else "no")
        stick = f"{r['yardstick']} of {r['yardstick_of']} refs" if r.get("yardstick") is not None else "-"
        print(
            f"{r['name']:>24s} {r['task']:>20s}  {r['return_mean']:>10.1f}  {ratio:>8s}  {near:>12s}  {meets:>5s}  "
            f"{stick}"
        )
    print(
        f"meets: return >= {RETURN_RATIO} x the references' median and nearest >= r0 (the paper's criteria); more "
        "different than: references nearer to their own nearest other reference than the policy is to its nearest"
    )


def _print_descriptors(documents: list[Path]) -> None:
    """Per policy: how it moves (`npsco.evaluation.descriptors`), on a MuJoCo locomotion task."""
    from npsco.evaluation import descriptors  # lazy: gymnasium

    rows = [r for d in documents for r in read_json(d)["policies"] if r.get("forward_speed") is not None]
    if not rows:
        print("no behaviour descriptors: they are measured on MuJoCo locomotion tasks (Hopper, Walker2d, HalfCheetah)")
        return
    print("how each policy moves (its deterministic evaluation episodes):")
    print("  ".join(["policy".rjust(24), "task".rjust(12), *descriptors.CELLS]))
    for r in rows:
        print("  ".join([r["name"].rjust(24), r["task"].rjust(12), *descriptors.cells(r)]))


@command("report")
def cmd_report(args: argparse.Namespace) -> int:
    from npsco.report.build import build_report  # lazy: scipy, numba, matplotlib

    runs = [str(p) for r in args.runs for p in population_dirs(r)]
    flags = [
        f"--episodes {args.episodes}" if args.episodes else "",
        f"--seed {args.seed}" if args.seed else "",
        "--gif" if args.gif else "",
        "--no-videos" if args.no_videos else "",
        "--no-filmstrips" if args.no_filmstrips else "",
        f"--max-filmstrips {args.max_filmstrips}" if args.max_filmstrips is not None else "",
    ]
    command = " ".join(
        ["npsco report", *map(shlex.quote, args.runs), "--out", shlex.quote(args.out), *filter(None, flags)]
    )
    path = build_report(
        runs,
        args.out,
        episodes=args.episodes,
        seed=args.seed,
        reuse=not args.force,
        filmstrips=not args.no_filmstrips,
        max_filmstrips=args.max_filmstrips,
        videos=None if args.no_videos else "gif" if args.gif else "auto",
        command=command,
    )
    print(f"report: {path}  (HTML: {path.with_suffix('.html')})")
    return 0


# ------------------------------------------------------------------------------------------------------------ render
@command("render")
def cmd_render(args: argparse.Namespace) -> int:
    from npsco.evaluation.runs import trust_configured_task  # lazy: gymnasium (npsco.evaluation loads it)
    from npsco.policy import load_policy, resolve_checkpoint  # lazy: gymnasium
    from npsco.report.behaviour import episode_frames, filmstrip_image, save_animation, save_image  # lazy: gymnasium

    for name, value, limit in (("--frames", args.frames, MAX_FRAMES), ("--size", args.size, MAX_FRAME_SIDE)):
        if value is not None:
            check_at_most(name, value, limit, least=1)
    if args.frames is not None and args.size is not None and args.frames * args.size**2 > MAX_RENDER_PIXELS:
        raise NpscoError(
            f"--frames {args.frames} x --size {args.size} is {args.frames * args.size**2 * 3 / 2**30:.1f} GiB of "
            f"frames, past npsco's limit of {MAX_RENDER_PIXELS * 3 / 2**30:.1f} GiB: fewer frames or smaller ones"
        )
    path = resolve_checkpoint(args.checkpoint)
    trust_configured_task(path)
    policy = load_policy(path)
    start = tuple(args.start) if args.start else None
    if start is not None and policy.metadata["env_id"] != MAZE_ID:
        raise NpscoError("--start applies to the Four Reward Maze only")
    frames = episode_frames(
        policy, args.frames, args.every, seed=args.seed, start=start, size=args.size, animation=args.gif
    )
    out = Path(args.out) if args.out else path.with_suffix(".gif" if args.gif else ".filmstrip.png")
    if args.gif:
        save_animation(frames.images, out, fps=args.fps)
    else:
        save_image(filmstrip_image(frames, columns=args.frames), out)
    end = " (the episode ended)" if frames.ended else ""
    print(
        f"{len(frames.images)} frames at steps {frames.steps[0]}..{frames.steps[-1]}{end}, "
        f"return {frames.episode_return:.2f}; written: {out}"
    )
    return 0


# ------------------------------------------------------------------------------------------------------------ export
@command("export")
def cmd_export(args: argparse.Namespace) -> int:
    from npsco.export import export_onnx  # lazy: onnx
    from npsco.policy import load_policy, resolve_checkpoint  # lazy: gymnasium

    path = resolve_checkpoint(args.checkpoint)
    out = export_onnx(load_policy(path), args.out or path.with_suffix(".onnx"))
    print(f"written: {out}  (input `obs` [batch, obs_dim] float32, output `action` [batch, action_dim] float32)")
    return 0


# ------------------------------------------------------------------------------------------------------------ import
@command("import")
def cmd_import(args: argparse.Namespace) -> int:
    from npsco.envs.make import with_package  # lazy: gymnasium
    from npsco.importers.convert import import_policy  # lazy: torch

    out = Path(args.out or f"runs/imported/{Path(args.source).stem}")
    result = import_policy(
        args.source,
        with_package(args.env, args.env_package),
        out,
        fmt=args.source_format,
        vecnormalize=args.vecnormalize,
        obs_norm=args.obs_norm,
        seed=args.seed,
        force=args.force,
    )
    print(f"imported {result.description}")
    for line in result.lost:
        print(f"  not imported: {line}")
    for line in result.notes:
        print(f"  note: {line}")
    print(
        f"policy: {result.checkpoint}   (use it as a reference: npsco population --env "
        f"{result.policy.metadata['env_id']} --ref-checkpoints {out} ...)"
    )
    return 0


@command("experiment")
def cmd_experiment(args: argparse.Namespace) -> int:
    """PPO references, every method's novel policies against them (a sweep, in parallel), then the report."""
    from npsco.experiment import run_experiment  # lazy: torch, matplotlib
    from npsco.grid import experiment_grid  # lazy: torch

    grid = experiment_grid(
        args.env,
        args.methods,
        args.refs,
        args.novel,
        args.preset,
        args.set,
        args.steps,
        args.ablation,
        args.env_package,
    )
    run_experiment(
        grid,
        Path(args.out),
        workers=args.workers,
        episodes=args.episodes,
        report=not args.no_report,
        log=lambda line: print(line, flush=True),
        tracking=tracking(args),
    )
    return 0


@command("population")
def cmd_population(args: argparse.Namespace) -> int:
    from npsco.population import train_population  # lazy: torch

    options = PopulationOptions.from_args(args)
    config, track = options.config(), tracking(args)
    train_population(config, options.out, progress=not args.no_progress, workers=options.workers, tracking=track)
    return 0


@command("sweep")
def cmd_sweep(args: argparse.Namespace) -> int:
    from npsco.sweep import train_sweep  # lazy: torch

    train_sweep(
        args.grid,
        args.out,
        backend=args.backend,
        workers=args.workers,
        address=args.address,
        dry_run=args.dry_run,
        log=lambda line: print(line, flush=True),
        tracking=tracking(args),
    )
    return 0


@command("threshold")
def cmd_threshold(args: argparse.Namespace) -> int:
    from npsco.evaluation.runs import trust_configured_task  # lazy: gymnasium (npsco.evaluation loads it)
    from npsco.novelty.threshold import default_threshold  # lazy: gymnasium
    from npsco.policy import load_policy  # lazy: gymnasium

    if args.out:
        output_file(args.out)  # before anything is computed (npsco.paths)
    for item in args.policies:
        trust_configured_task(item)
    paths, names = policy_files(args.policies)
    policies = [load_policy(p) for p in paths]
    episodes = args.episodes or default_distance_episodes(policies[0].metadata["env_id"])
    th = default_threshold(policies, names, episodes=episodes, seed=args.seed, metric=args.metric)
    metric = "" if args.metric == "deterministic" else f", {args.metric} metric"
    print(f"r0 = {th.r0:.6f}  (mean pairwise distance of {len(policies)} policies{metric})")
    width = max(len(n) for n in names)
    for n, row in zip(names, th.matrix, strict=True):
        print(f"{n:>{width}s} " + " ".join(f"{v:7.4f}" for v in row))
    if args.out:
        atomic_write_json(args.out, th.to_dict())
        print(f"written: {args.out}")
    return 0


def _trust_command_line_tasks(args: argparse.Namespace) -> None:
    """The tasks the command line names (`--env`, with `--env-package`) may import what they name, also where a
    checkpoint names them (`npsco.task_ids`)."""
    envs = getattr(args, "env", None)
    if not envs:
        return
    from npsco.envs.make import with_package  # lazy: gymnasium

    for env in [envs] if isinstance(envs, str) else envs:
        trust_task(with_package(env, getattr(args, "env_package", None)))


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C: what is in training is saved, a sweep records `interrupted`, workers are stopped."""
    raise KeyboardInterrupt


def _check_counts(args: argparse.Namespace) -> None:
    """Counts every command reads the same way, checked before it runs: `--episodes` (None: the default)."""
    if getattr(args, "episodes", None) is not None:
        check_at_most("--episodes", args.episodes, MAX_EPISODES, least=1)


def _check_finite(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every number option of the command is finite (`inf`, `nan` and 1e400 are refused in one line)."""
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        values = value if isinstance(value, list) else [value]
        if action.type is float and any(isinstance(v, float) and not math.isfinite(v) for v in values):
            raise NpscoError(f"{'/'.join(action.option_strings)} must be a finite number, got {value}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the command's own parser, with its usage (the top-level usage names no option)
        command = getattr(args, "command", None)
        (command_parser(parser, command) if command else parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    try:
        if getattr(args, "config", None) is not None:  # the options of a --config file, under those given here
            from npsco import cli_config  # lazy: numpy (the method settings' types)

            args = cli_config.parse_args(parser, argv, args)
        _check_finite(command_parser(parser, args.command), args)
        if getattr(args, "steps", None) is not None:
            args.steps = int(args.steps)
        _check_counts(args)
        _trust_command_line_tasks(args)
        return COMMANDS[args.command](args)
    except NpscoError as e:
        if args.debug:
            raise
        print(f"npsco {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        if args.debug or not is_file_system_error(e):
            raise
        print(f"npsco {args.command}: error: {file_system_message(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        again = ""
        if args.command in RESUMABLE:
            words = ["npsco", *(sys.argv[1:] if argv is None else argv)]
            again = f"; run the same command again to resume: {shlex.join(words)}"
        print(f"npsco {args.command}: interrupted{again}", file=sys.stderr)
        return 130
    finally:
        if main_thread and previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
