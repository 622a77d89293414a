"""Lesson 04's fork-with-threads warning and its garbage-collection task: below Python 3.12 the lesson
quotes the warning 3.12 prints, which must be the text Python prints; from 3.12 it shows what forking
raised, process ids elided; a collection runs in a forked worker whether or not rows were inherited."""

import sys
import threading
import warnings

import pytest

from helpers.lessons import fork_copy_on_write

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not fork_copy_on_write.has_fork(), reason="this platform cannot fork")]


def _warning(text: str) -> warnings.WarningMessage:
    return warnings.WarningMessage(DeprecationWarning(text), DeprecationWarning, "popen_fork.py", 66)


def test_the_description_quotes_the_warning_or_shows_the_caught_ones_without_their_pid(monkeypatch):
    monkeypatch.setattr(fork_copy_on_write, "FORK_WARNS", False)
    before = fork_copy_on_write.describe_fork_warnings([])
    assert "no warning" in before and fork_copy_on_write.FORK_WARNING in before
    monkeypatch.setattr(fork_copy_on_write, "FORK_WARNS", True)
    caught = [_warning("This process (pid=4242) is multi-threaded, use of fork() may lead to "
                       "deadlocks in the child.")]
    after = fork_copy_on_write.describe_fork_warnings(caught)
    assert "warned 1 time(s)" in after and fork_copy_on_write.FORK_WARNING in after and "4242" not in after


@pytest.mark.skipif(sys.version_info < (3, 12), reason="os.fork() warns about threads from Python 3.12")
def test_the_quoted_warning_is_the_one_forking_with_a_thread_raises():
    release = threading.Event()
    thread = threading.Thread(target=release.wait, daemon=True)
    thread.start()
    try:
        caught = fork_copy_on_write.warnings_on_fork()
    finally:
        release.set()
        thread.join()
    assert fork_copy_on_write.FORK_WARNING in fork_copy_on_write.describe_fork_warnings(caught)


def test_a_collection_runs_in_a_forked_worker_with_or_without_inherited_rows():
    without = fork_copy_on_write.fan_out("fork", "collect garbage", 1)
    with fork_copy_on_write.installed(rows=[[0.5, 1.5]] * 10):
        with_rows = fork_copy_on_write.fan_out("fork", "collect garbage", 1)
    assert without.workers[0].result >= 0 and with_rows.workers[0].result >= 0
