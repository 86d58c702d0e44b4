"""A stopping server is bounded: its background threads are waited for together, not one
after the other (`join_until`, `Worker.wait_stopped`), and whatever still holds the process
`SHUTDOWN_LIMIT_S` after the signal is reported with its stack and the process ends anyway
(`exit_anyway_after`)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from bergen.api.exit_status import ExitStatus
from bergen.server.lifecycle import (
    EXIT_HELD,
    HARD_EXIT,
    HARD_LIMIT_S,
    SHUTDOWN_LIMIT_S,
    exit_anyway_after,
)
from bergen.server.supervisor import STOP_TIMEOUT_S
from bergen.server.threads import join_until
from bergen.server.worker import Worker


def blocked_for_good(release: threading.Event) -> None:
    release.wait()


def test_threads_that_do_not_end_are_waited_for_together_until_one_deadline() -> None:
    release = threading.Event()
    threads = [
        threading.Thread(target=blocked_for_good, args=(release,), daemon=True) for _ in range(4)
    ]
    for t in threads:
        t.start()
    try:
        begun = time.monotonic()
        late = join_until(threads, begun + 0.3)
        took = time.monotonic() - begun
    finally:
        release.set()
    assert late == threads
    # One after the other, each given the same 0.3 s, they would take 1.2 s.
    assert took < 0.9, f"waited {took:.2f} s for a 0.3 s deadline"
    assert join_until(threads, time.monotonic() + 5) == []


class Stuck(Worker):
    """A worker whose step is blocked (on a store that does not answer, say) until released."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__("stuck")
        self.release = release

    def _run(self) -> None:
        self.release.wait()


def test_a_worker_asked_to_stop_is_waited_for_only_until_the_deadline() -> None:
    release = threading.Event()
    workers = [Stuck(release) for _ in range(3)]
    for w in workers:
        w.start()
    try:
        for w in workers:
            w.ask_to_stop()
        deadline = time.monotonic() + 0.2
        assert [w.wait_stopped(deadline) for w in workers] == [False, False, False]
        assert time.monotonic() - deadline < 0.4
    finally:
        release.set()
    assert all(w.wait_stopped(time.monotonic() + 5) for w in workers)


def held_exit(tmp_path: Path, stopped: bool) -> tuple[str, list[int]]:
    """What `exit_anyway_after` writes and the status it ends with, while another thread is
    blocked in `blocked_for_good`."""
    release = threading.Event()
    holder = threading.Thread(
        target=blocked_for_good, args=(release,), name="holds-the-exit", daemon=True
    )
    holder.start()
    flag = threading.Event()
    if stopped:
        flag.set()
    ended: list[int] = []
    try:
        with open(tmp_path / "stderr", "w") as out:
            watchdog = exit_anyway_after(0.05, flag, out, ended.append)
            watchdog.join(timeout=10)
    finally:
        release.set()
    return (tmp_path / "stderr").read_text(), ended


def test_a_process_whose_exit_is_held_reports_the_threads_and_ends_with_success(
    tmp_path: Path,
) -> None:
    text, ended = held_exit(tmp_path, stopped=True)
    assert ended == [ExitStatus.SUCCESS]
    assert text.startswith(EXIT_HELD)
    assert "it stopped in order; its exit is held" in text
    assert "holds-the-exit" in text
    assert "blocked_for_good" in text, "no stack of the thread that holds the exit"


def test_a_process_whose_stop_is_held_reports_the_threads_and_ends_with_an_error(
    tmp_path: Path,
) -> None:
    text, ended = held_exit(tmp_path, stopped=False)
    assert ended == [ExitStatus.ERROR]
    assert "its stop is held" in text
    assert "blocked_for_good" in text


def test_a_supervisor_waits_longer_for_a_worker_than_a_worker_can_take() -> None:
    assert SHUTDOWN_LIMIT_S < HARD_LIMIT_S < STOP_TIMEOUT_S


def armed_process(limit_s: float, hard_s: float, then: str) -> subprocess.CompletedProcess[str]:
    """A Python process that arms the exit limits (`arm_exit_limits`), then runs `then`."""
    code = (
        "import threading\n"
        "from bergen.server.lifecycle import arm_exit_limits\n"
        f"arm_exit_limits(threading.Event(), {limit_s}, {hard_s})\n"
        f"{then}\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_a_process_whose_python_code_cannot_run_any_more_still_ends_with_its_stacks() -> None:
    # A C loop that never gives the interpreter's lock up: no Python thread runs, the
    # watchdog thread included; the fault handler's C thread still ends the process.
    began = time.monotonic()
    done = armed_process(60, 0.5, "sum(range(10**13))")
    assert time.monotonic() - began < 30
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(HARD_EXIT), done.stderr
    assert 'File "<string>", line 4 in <module>' in done.stderr, done.stderr


def test_a_process_whose_main_thread_is_stuck_ends_at_the_limit_with_an_error() -> None:
    done = armed_process(0.3, 60, "lock = threading.Lock(); lock.acquire(); lock.acquire()")
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(EXIT_HELD), done.stderr
    assert "its stop is held" in done.stderr
