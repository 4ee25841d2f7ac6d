"""The scheduler with the inline executor: the sequential case of every population run, one job at a time in this
process, in the order the source offers them."""

import pytest

from npsco.parallel import InlineExecutor, Job, Scheduler


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
