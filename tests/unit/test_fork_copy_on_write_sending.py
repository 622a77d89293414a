"""Lesson 04's job times split: ``FanOut.send_seconds`` is the part of a fan-out's ``seconds`` spent
sending (pickling and piping each copy), so the lesson can show that what spawn and forkserver jobs
pay is mostly the sending, not the start-up; a fan-out that sends nothing spent none."""

import numpy as np
import pytest

from helpers.lessons import fork_copy_on_write


@pytest.mark.timeout(60)
@pytest.mark.skipif(not fork_copy_on_write.has_fork(), reason="this platform cannot fork")
def test_the_sending_is_timed_inside_the_job_and_is_zero_when_nothing_is_sent():
    payload = np.ones(1 << 20)  # 8 MiB: more than a pipe buffer, so each send waits for its reader
    sent = fork_copy_on_write.fan_out("fork", "sum received array", 2, send=payload)
    assert [w.result for w in sent.workers] == [float(payload.size)] * 2
    assert 0 < sent.send_seconds <= sent.seconds, (sent.send_seconds, sent.seconds)
    assert fork_copy_on_write.fan_out("fork", "idle", 1).send_seconds == 0.0
