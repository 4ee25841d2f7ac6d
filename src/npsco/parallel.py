"""Where independent training jobs run, and the scheduler that feeds them.

A *job* is a module-level function and its picklable arguments (train one policy, or compute one threshold). It runs
in a worker process (or inline) and returns its result to the parent process, which alone writes the manifests. Three
executors:

- `InlineExecutor`: runs each job in this process as it is submitted, one at a time: a population trained one policy
  after another takes the same path as a parallel one.
- `LocalExecutor` (default for sweeps): a `concurrent.futures.ProcessPoolExecutor` on this machine, `forkserver`
  context (the server imports the modules its caller names, `preload`, once; each job then runs in a freshly forked
  process, one job per process), with `torch.set_num_threads(1)` in every worker. A worker that dies (killed, out of
  memory) breaks the pool: the pool is rebuilt and the jobs it held are submitted again. Workers die with the process
  that scheduled them, however it ends (SIGKILL included: `_die_with`), and are killed when it stops on an error or
  an interrupt.
- `RayExecutor`: Ray tasks (`num_cpus=1`, one task per worker process, Ray's own `max_retries` for dead workers), on
  an existing cluster (`address`) or a local Ray instance started with `num_cpus=workers`.

`Scheduler.run(source, view)` keeps at most `executor.workers` jobs in flight: it asks the source which jobs are ready,
submits them, and hands every result back to the source (which records it) until nothing is ready or running. A job
that fails, whatever it raises, ends the run with a one-line NpscoError naming the job (`failure_message`).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from npsco.errors import NpscoError
from npsco.io import file_system_message, is_file_system_error

MAX_RETRIES = 2
"""A job whose worker process dies is submitted again at most this many times."""

SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Set in every worker before numpy and torch load: one policy per core, as BLAS threads competing for shared cores
slow these small matrix products down (benchmarks/results/throughput/design_measurements.md)."""


@dataclass
class Job:
    """One unit of work: `fn(*args)` in a worker process."""

    key: str
    """Unique among the jobs of one run (e.g. `FourRewardMaze-v0/ipd:ipd/k0`)."""
    fn: Callable[..., Any]
    args: tuple
    label: str = ""
    """What the progress view shows (defaults to the key)."""
    steps: int = 0
    """Environment steps the job trains (for the overall steps/s)."""
    group: str = ""
    """The population it belongs to (for the progress view)."""
    spare: bool = False
    """A spare candidate (`--candidates`): it starts after every needed job of the same path."""
    after: int = 0
    """Environment steps that can only start once this job is done, one after another: the longest rest of its chain
    (the scheduler starts the job with the most `steps + after` first, so the critical path is never left waiting)."""

    @property
    def path_steps(self) -> int:
        """The steps of the longest sequence of jobs that starts with this one."""
        return self.steps + self.after


@dataclass
class Utilisation:
    """How busy the workers were during one `Scheduler.run`."""

    workers: int
    wall_seconds: float
    busy_seconds: float
    """Seconds summed over jobs, from submission to completion (a job that had to be retried counts each try)."""

    @property
    def fraction(self) -> float:
        """busy worker-seconds / (workers x wall seconds)."""
        return self.busy_seconds / (self.workers * self.wall_seconds) if self.wall_seconds > 0 else 0.0

    def describe(self) -> str:
        return (
            f"utilisation {self.fraction:.0%} ({self.busy_seconds:,.0f} busy worker-seconds / "
            f"{self.workers} workers x {self.wall_seconds:,.0f} s)"
        )

    def to_dict(self) -> dict[str, float]:
        return {
            "workers": self.workers,
            "wall_seconds": round(self.wall_seconds, 1),
            "busy_seconds": round(self.busy_seconds, 1),
            "fraction": round(self.fraction, 4),
        }


PR_SET_PDEATHSIG = 1
"""Linux `prctl` option: the signal the kernel sends a process when its parent dies."""
RAY_WORKER_DEATHS = ("WorkerCrashedError", "NodeDiedError", "OutOfMemoryError", "ActorDiedError")
"""Ray's errors for a task whose worker process (or node) died, after Ray's own retries."""


def _init_worker(parent: int) -> None:
    """A worker process's setup: die with the scheduling process `parent`, one BLAS and torch thread."""
    _die_with(parent)
    os.environ.update(SINGLE_THREAD_ENV)  # in effect where numpy/torch are not loaded yet (spawn)
    import torch  # here: after the variables above, and only in worker processes

    torch.set_num_threads(1)


def _die_with(parent: int) -> None:
    """End this process (SIGKILL) as soon as the process `parent` ends, however it ends: a daemon thread waits on a
    pidfd of it (Linux >= 5.3), or checks every second that it lives. A worker's own parent is the forkserver, which
    lives as long as any worker does, so the worker watches the scheduling process itself; on Linux it also asks the
    kernel for SIGKILL when the forkserver dies (`PR_SET_PDEATHSIG`)."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        pidfd: int | None = os.pidfd_open(parent)
    except ProcessLookupError:  # the scheduling process is already gone
        os.kill(os.getpid(), signal.SIGKILL)
        pidfd = None
    except (AttributeError, OSError):  # no pidfd on this platform: poll
        pidfd = None

    def watch() -> None:
        if pidfd is not None:
            select.select([pidfd], [], [])  # readable when the process has ended
        else:
            while _alive(parent):
                time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="npsco-watch-parent", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's (the pid was reused)
        return True
    return True


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore them."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Executor:
    """What the scheduler asks of an executor (inline, local process pool, Ray). `with make_executor(...) as ex:`
    closes it, cancelling running jobs on an error."""

    workers: int
    """How many jobs may run at the same time."""

    def describe(self) -> str:
        """One line for logs and `sweep.json`."""
        raise NotImplementedError

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Start `fn(*args)`; its future."""
        raise NotImplementedError

    def worker_died(self, exc: BaseException) -> bool:
        """Whether a job failed with `exc` because its worker process died (then it may be retried)."""
        raise NotImplementedError

    def recover(self, future: Future) -> None:
        """Make the executor usable again after `future`'s worker died."""
        raise NotImplementedError

    def forget(self, future: Future) -> None:
        """Drop what the executor keeps of a finished `future`."""
        raise NotImplementedError

    def close(self, cancel: bool = False) -> None:
        raise NotImplementedError

    def __enter__(self) -> Executor:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(cancel=exc_type is not None)


class InlineExecutor(Executor):
    """One worker: this process. `submit` runs the job to its end and returns its finished future; an exception the
    job raises propagates from `submit`, as from a plain call (there is nothing else running to wait for)."""

    name = "inline"
    workers = 1

    def describe(self) -> str:
        return "this process, one job at a time"

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        future.set_result(fn(*args))
        return future

    def worker_died(self, exc: BaseException) -> bool:
        return False

    def recover(self, future: Future) -> None:
        pass

    def forget(self, future: Future) -> None:
        pass

    def close(self, cancel: bool = False) -> None:
        pass


class LocalExecutor(Executor):
    """A process pool on this machine; every job runs in a fresh process (`max_tasks_per_child=1`)."""

    name = "local"

    def __init__(self, workers: int | None = None, preload: Sequence[str] = ()):
        """`preload`: the modules the forkserver imports once, so that a fresh worker does not import them again (the
        jobs' modules: `npsco.population_jobs.PRELOAD`)."""
        self.workers = max(1, workers or os.cpu_count() or 1)
        methods = multiprocessing.get_all_start_methods()
        self._context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        if self._context.get_start_method() == "forkserver":
            from multiprocessing import forkserver  # POSIX only: not importable where there is no forkserver

            self._context.set_forkserver_preload(list(preload))
            with _environment(SINGLE_THREAD_ENV):  # the server loads numpy and torch, once, single-threaded
                forkserver.ensure_running()
        self._generation = 0
        self._generation_of: dict[Future, int] = {}
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=self._context,
            initializer=_init_worker,
            initargs=(os.getpid(),),
            max_tasks_per_child=1,
        )

    def describe(self) -> str:
        return f"local process pool, {self.workers} worker(s) ({self._context.get_start_method()})"

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future = self._pool.submit(fn, *args)
        self._generation_of[future] = self._generation
        return future

    def worker_died(self, exc: BaseException) -> bool:
        return isinstance(exc, BrokenProcessPool)

    def recover(self, future: Future) -> None:
        """After a worker died: replace the broken pool (once, whichever of its futures reports it first)."""
        if self._generation_of.pop(future, None) == self._generation:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._generation += 1
            self._pool = self._new_pool()

    def forget(self, future: Future) -> None:
        self._generation_of.pop(future, None)

    def close(self, cancel: bool = False) -> None:
        """Wait for the running jobs; with `cancel` (an error or an interrupt), kill their workers instead: no worker
        outlives the command, and nothing waits for one at exit."""
        if not cancel:
            self._pool.shutdown(wait=True)
            return
        # The standard library has no public way to stop running jobs: the pool's workers are its `_processes`. The
        # pool shuts down in a thread while this one kills every worker, replacements included, until it is done: a
        # worker killed while it held the pool's queue lock leaves the others waiting for it, and the shutdown too.
        processes = getattr(self._pool, "_processes", None) or {}
        stopping = threading.Thread(target=self._pool.shutdown, kwargs={"cancel_futures": True}, daemon=True)
        stopping.start()
        killed: set[int] = set()
        while True:
            for pid, process in list(processes.items()):
                if pid not in killed:  # once each: a pid is not killed again after it may have been reused
                    killed.add(pid)
                    with contextlib.suppress(OSError, ValueError):  # already ended
                        process.kill()
            if not stopping.is_alive():
                return
            stopping.join(0.1)


class RayExecutor(Executor):
    """Ray tasks with `num_cpus=1`: on the cluster at `address`, or on a local Ray instance with `workers` CPUs."""

    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None, max_retries: int = MAX_RETRIES):
        try:
            import ray  # an optional dependency (npsco[cluster])
        except ImportError:
            raise NpscoError(
                "the Ray backend needs Ray: pip install 'npsco[cluster]' (or pip install 'ray>=2.9')"
            ) from None
        self._ray = ray
        self._started_here = not ray.is_initialized()
        if self._started_here:
            kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
            try:
                if address:
                    ray.init(address=address, **kwargs)
                else:
                    ray.init(num_cpus=max(1, workers or os.cpu_count() or 1), **kwargs)
            except Exception as e:  # Ray raises plain Exception too (e.g. "node timed out during startup")
                ray.shutdown()
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise NpscoError(f"could not start or reach {where}: {reason}") from None
        self.address = address
        self.workers = max(1, workers or int(ray.cluster_resources().get("CPU", 1)))
        self.max_retries = max_retries
        self._remote: dict[Callable, Any] = {}
        self._refs: dict[Future, Any] = {}

    def describe(self) -> str:
        where = f"cluster {self.address}" if self.address else "local instance"
        return f"Ray {self._ray.__version__} ({where}), {self.workers} task(s) at a time"

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        if fn not in self._remote:
            # one task per worker process (max_calls=1); Ray sets OMP_NUM_THREADS=1 in a one-CPU task's worker,
            # which OpenBLAS honours too (a runtime_env would only keep Ray from using its pre-started workers)
            self._remote[fn] = self._ray.remote(num_cpus=1, max_retries=self.max_retries, max_calls=1)(fn)
        ref = self._remote[fn].remote(*args)
        future = ref.future()
        self._refs[future] = ref
        return future

    def worker_died(self, exc: BaseException) -> bool:
        return False  # Ray has already retried the task max_retries times

    def recover(self, future: Future) -> None:
        self.forget(future)

    def forget(self, future: Future) -> None:
        self._refs.pop(future, None)

    def close(self, cancel: bool = False) -> None:
        if cancel:
            for ref in self._refs.values():
                with contextlib.suppress(Exception):  # already finished or gone
                    self._ray.cancel(ref, force=True)
        self._refs.clear()
        if self._started_here:
            self._ray.shutdown()


def make_executor(
    backend: str = "local", workers: int | None = None, address: str | None = None, preload: Sequence[str] = ()
) -> Executor:
    """The executor for `--backend` (`local` or `ray`); `preload`: the modules a local pool's workers import once."""
    if workers is not None and workers < 1:
        raise NpscoError(f"--workers must be >= 1, got {workers}")
    if backend == "local":
        if address:
            raise NpscoError("--address is for --backend ray")
        return LocalExecutor(workers, preload)
    if backend == "ray":
        return RayExecutor(workers, address)
    raise NpscoError(f"unknown backend {backend!r}; choose local or ray")


def error_message(exc: BaseException) -> str:
    """One line of what went wrong in a job (unwrapping Ray's task error): an NpscoError's message; a file-system
    error the user can fix (a full disk, a file past the size limit, a read-only folder) naming the file
    (`npsco.io.file_system_message`); a worker that Ray could not keep alive; else the exception's type and first
    line."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(cause, NpscoError):
        return first
    if is_file_system_error(cause):
        assert isinstance(cause, OSError)
        return file_system_message(cause)
    if type(cause).__name__ in RAY_WORKER_DEATHS:
        return (
            f"its worker process died ({type(cause).__name__}, after Ray's {MAX_RETRIES} retries); finished policies "
            "are kept: run the same command again to resume"
        )
    return f"{type(cause).__name__}: {first}"


class Source(Protocol):
    """What the scheduler runs: the jobs that can start now, and where their results go."""

    def ready(self, busy: set[str]) -> list[Job]: ...
    def started(self, job: Job) -> None: ...
    def finished(self, job: Job, result: Any) -> str | None: ...  # records the result; returns a short description


class View(Protocol):
    def event(self, kind: str, job: Job, detail: str = "") -> None: ...
    def tick(self) -> None: ...


def by_critical_path(jobs: list[Job]) -> list[Job]:
    """The jobs in the order to start them: the longest path of steps first (`Job.path_steps`), a spare candidate
    after the needed jobs of the same path; otherwise the source's order."""
    return sorted(jobs, key=lambda job: (-job.path_steps, job.spare))


class Scheduler:
    """Runs the jobs of a `Source` on an executor, at most `executor.workers` at a time: whenever a worker is free and a
    job is ready, the ready job on the longest path (`by_critical_path`) starts. `utilisation` measures the last run."""

    def __init__(self, executor: Executor, max_retries: int = MAX_RETRIES, tick_seconds: float = 1.0):
        self.executor, self.max_retries, self.tick_seconds = executor, max_retries, tick_seconds
        self.utilisation: Utilisation | None = None

    def run(self, source: Source, view: View | None = None) -> Utilisation:
        """Until nothing is ready or running. A job that raises stops new submissions; the running ones finish and
        are recorded, then the error is raised (as an NpscoError naming the job). Returns how busy the workers were
        (also kept in `utilisation`, when the run ends by an error too)."""
        running: dict[Future, Job] = {}
        submitted: dict[Future, float] = {}
        start = time.monotonic()
        self.utilisation = Utilisation(self.executor.workers, 0.0, 0.0)
        try:
            self._loop(source, view, running, submitted)
        finally:
            for began in submitted.values():  # jobs still running (an interrupt): busy until now
                self.utilisation.busy_seconds += time.monotonic() - began
            self.utilisation.wall_seconds = time.monotonic() - start
        return self.utilisation

    def _loop(
        self,
        source: Source,
        view: View | None,
        running: dict[Future, Job],
        submitted: dict[Future, float],
    ) -> None:
        """`run`'s loop; `running` and `submitted` (each running job's start time) are shared with `run`."""
        assert self.utilisation is not None
        deaths: dict[str, int] = {}
        failed: tuple[Job, BaseException] | None = None
        while True:
            if failed is None:
                busy = {job.key for job in running.values()}
                ready = source.ready(busy)
                # with one worker the order changes no wall time: the source's (a chain after another, as logs count)
                for job in by_critical_path(ready) if self.executor.workers > 1 else ready:
                    if len(running) >= self.executor.workers:
                        break
                    if job.key in busy:
                        continue
                    source.started(job)
                    if view:  # before submitting: an inline job has ended when `submit` returns
                        view.event("start", job)
                    began = time.monotonic()
                    try:
                        future = self.executor.submit(job.fn, *job.args)
                    except BaseException:  # an inline job that raised: its time was busy too
                        self.utilisation.busy_seconds += time.monotonic() - began
                        raise
                    running[future], submitted[future] = job, began
                    busy.add(job.key)
            if not running:
                break
            done, _ = wait(list(running), timeout=self.tick_seconds, return_when=FIRST_COMPLETED)
            for future in done:
                job = running.pop(future)
                self.utilisation.busy_seconds += time.monotonic() - submitted.pop(future)
                exc = future.exception()
                if exc is None:
                    self.executor.forget(future)
                    detail = source.finished(job, future.result())
                    if view:
                        view.event("done", job, detail or "")
                    continue
                if self.executor.worker_died(exc):
                    self.executor.recover(future)
                    deaths[job.key] = deaths.get(job.key, 0) + 1
                    if deaths[job.key] <= self.max_retries:
                        if view:
                            view.event("retry", job, f"worker died, attempt {deaths[job.key] + 1}")
                        continue  # still not done: the source offers it again
                    exc = NpscoError(f"its worker process died {deaths[job.key]} times")
                self.executor.forget(future)
                if view:
                    view.event("error", job, error_message(exc))
                if failed is None:
                    failed = (job, exc)
            if view:
                view.tick()
        if failed is not None:
            job, exc = failed
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C reached the worker too: an interrupt, not a failure
                raise exc
            message = f"{job.label or job.key}: {error_message(exc)}"
            if isinstance(exc, NpscoError) or isinstance(getattr(exc, "cause", None), NpscoError):
                raise NpscoError(message) from None
            raise NpscoError(message) from exc  # one line; `npsco --debug` shows the worker's traceback


class LogView:
    """One line per event (start, done, retry, error), through `log`."""

    def __init__(self, log: Callable[[str], None] = print):
        self.log = log

    def event(self, kind: str, job: Job, detail: str = "") -> None:
        self.log(f"{kind:>5s} {job.label or job.key}" + (f": {detail}" if detail else ""))

    def tick(self) -> None:
        pass
