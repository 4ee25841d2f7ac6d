"""The scheduler: with the inline executor (the sequential case of every population run, one job at a time in this
process, in the order the source offers them), and with two workers (the longest path of steps first)."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from npsco.parallel import Executor, InlineExecutor, Job, Scheduler, Utilisation, by_critical_path


def record(log: list, name: str) -> str:
    log.append(f"run {name}")
    return name.upper()


def fail(message: str) -> None:
    raise ValueError(message)


class Chain3:
    """Three jobs a, b, c offered together; c only once b is done (like the k-th policy of a chain)."""

    def __init__(self, log: list):
        self.log, self.done = log, []

    def ready(self, busy):
        names = [n for n in ("a", "b") if n not in self.done]
        names += ["c"] if "b" in self.done and "c" not in self.done else []
        return [Job(n, record, (self.log, n)) for n in names if n not in busy]

    def started(self, job):
        self.log.append(f"started {job.key}")

    def finished(self, job, result):
        self.done.append(job.key)
        self.log.append(f"finished {job.key} -> {result}")


class Events:
    def __init__(self, log: list):
        self.log = log

    def event(self, kind, job, detail=""):
        self.log.append(f"view {kind} {job.key}")

    def tick(self):
        pass


def test_inline_jobs_run_one_at_a_time_in_order_and_the_view_sees_each_start_first():
    log: list = []
    with InlineExecutor() as executor:
        assert executor.workers == 1
        Scheduler(executor, tick_seconds=0.0).run(Chain3(log), Events(log))
    assert log == [
        "started a",
        "view start a",
        "run a",
        "finished a -> A",
        "view done a",
        "started b",
        "view start b",
        "run b",
        "finished b -> B",
        "view done b",
        "started c",
        "view start c",
        "run c",
        "finished c -> C",
        "view done c",
    ]


def test_an_inline_job_raises_as_a_plain_call_would():
    class One:
        def ready(self, busy):
            return [Job("x", fail, ("boom",))]

        def started(self, job):
            pass

        def finished(self, job, result):
            raise AssertionError("a failed job has no result")

    with pytest.raises(ValueError, match="^boom$"):
        Scheduler(InlineExecutor()).run(One())


def test_inline_submit_returns_a_finished_future():
    future = InlineExecutor().submit(sum, [1, 2, 3])
    assert future.done() and future.result() == 6


class Threads(Executor):
    """Two workers as threads: jobs that sleep overlap as processes would."""

    workers = 2

    def __init__(self):
        self.pool = ThreadPoolExecutor(self.workers)

    def submit(self, fn, *args):
        return self.pool.submit(fn, *args)

    def forget(self, future):
        pass

    def close(self, cancel=False):
        self.pool.shutdown()


class Grid:
    """A toy grid: a chain x1 -> x2 -> x3 (each job 1 unit) and three independent jobs y1, y2, y3 offered first, as
    a sweep lists populations. In offer order two workers need 4 units of time; longest path first, 3."""

    UNIT = 0.15

    def __init__(self):
        self.done, self.starts = set(), []

    def ready(self, busy):
        jobs = [Job(y, time.sleep, (self.UNIT,), steps=1) for y in ("y1", "y2", "y3") if y not in self.done]
        chain = [x for x in ("x1", "x2", "x3") if x not in self.done]
        if chain:
            jobs.append(Job(chain[0], time.sleep, (self.UNIT,), steps=1, after=len(chain) - 1))
        return [job for job in jobs if job.key not in busy]

    def started(self, job):
        self.starts.append(job.key)

    def finished(self, job, result):
        self.done.add(job.key)


def test_longest_path_first_keeps_the_chain_moving_and_the_workers_busy():
    grid = Grid()
    with Threads() as executor:
        use = Scheduler(executor, tick_seconds=0.01).run(grid)
    # x1 starts first although offered last; each x then starts beside one y (never two ys while x waits)
    assert grid.starts[:2] == ["x1", "y1"]
    assert grid.starts.index("x2") < grid.starts.index("y3") and grid.starts.index("x3") > grid.starts.index("y2")
    assert use.workers == 2 and use.busy_seconds >= 6 * Grid.UNIT
    assert use.wall_seconds < 3.9 * Grid.UNIT  # offer order would take 4 units
    assert 0.75 < use.fraction <= 1.0


def test_equal_paths_keep_the_sources_order_and_utilisation_reads_as_a_sentence():
    jobs = [Job(k, print, (), steps=s, after=a) for k, s, a in [("a", 1, 2), ("b", 2, 1), ("c", 1, 0), ("d", 4, 0)]]
    assert [job.key for job in by_critical_path(jobs)] == ["d", "a", "b", "c"]
    use = Utilisation(workers=2, wall_seconds=100.0, busy_seconds=150.0)
    assert use.fraction == 0.75
    assert use.describe() == "utilisation 75% (150 busy worker-seconds / 2 workers x 100 s)"
    assert use.to_dict() == {"workers": 2, "wall_seconds": 100.0, "busy_seconds": 150.0, "fraction": 0.75}
    assert Utilisation(workers=2, wall_seconds=0.0, busy_seconds=0.0).fraction == 0.0


def test_a_spare_candidate_starts_after_the_needed_jobs_of_its_path():
    jobs = [Job("a#c1", print, (), steps=1, spare=True), Job("b", print, (), steps=1), Job("c", print, (), steps=2)]
    assert [job.key for job in by_critical_path(jobs)] == ["c", "b", "a#c1"]


def test_one_worker_runs_the_sources_order_and_counts_a_job_that_raised_as_busy():
    class Offered:  # a job on a longer path offered second: one worker keeps the source's order
        def __init__(self):
            self.done, self.starts = set(), []

        def ready(self, busy):
            jobs = [Job("short", record, ([], "s"), steps=1), Job("long", record, ([], "l"), steps=1, after=5)]
            return [j for j in jobs if j.key not in self.done | busy]

        def started(self, job):
            self.starts.append(job.key)

        def finished(self, job, result):
            self.done.add(job.key)

    source = Offered()
    Scheduler(InlineExecutor(), tick_seconds=0.0).run(source)
    assert source.starts == ["short", "long"]

    class Slow:
        def ready(self, busy):
            return [Job("x", lambda: (time.sleep(0.05), fail("boom")), ())]

        def started(self, job):
            pass

        def finished(self, job, result):
            pass

    scheduler = Scheduler(InlineExecutor(), tick_seconds=0.0)
    with pytest.raises(ValueError, match="boom"):
        scheduler.run(Slow())
    assert scheduler.utilisation is not None and scheduler.utilisation.busy_seconds >= 0.05
