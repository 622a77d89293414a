"""helpers.lessons.threads_or_processes (lesson 01) with real threads, real spawned processes and
real BLAS pools: the two sums, the fan-out on either kind of worker, workers that hold their
chunks (threads add no copy, processes one), the GIL probe, the exercise's check, BLAS limits
inside workers and the free-threading report."""

import multiprocessing as mp
import os
import sys
import sysconfig
import threading

import matplotlib
import numpy as np
import pytest
from exercise_asserts import assert_misconception_rejected

from helpers.lessons import blas_and_free_threading as blas
from helpers.lessons import demos, exercises, gil_heartbeat
from helpers.lessons import threads_or_processes as lesson
from helpers.measure.memory import MemoryReport, TreeSample, track_memory
from helpers.measure.proctree import ProcessMemory
from helpers.measure.timing import Timing

matplotlib.use("Agg")
pytestmark = pytest.mark.timeout(120)
SPAWN = mp.get_context("spawn")


@pytest.fixture(scope="module")
def numbers():
    return np.random.default_rng(7).random(2**18)  # 2 MiB of float64


def test_both_sums_agree_with_numpy_and_split_makes_views(numbers):
    part = numbers[:10_000]
    assert lesson.sum_numpy(part) == pytest.approx(float(np.sum(part)), rel=1e-12)
    assert lesson.sum_python(part) == pytest.approx(float(np.sum(part)), rel=1e-12)
    chunks = lesson.split(numbers, 3)
    assert [len(c) for c in chunks] == [len(c) for c in np.array_split(numbers, 3)]
    assert all(np.shares_memory(chunk, numbers) for chunk in chunks)


@pytest.mark.parametrize("n_max, counts", [(1, [1]), (2, [1, 2]), (4, [1, 2, 3, 4]), (6, [1, 2, 4, 6]),
                                           (16, [1, 2, 4, 8, 16])])
def test_worker_counts_are_every_count_up_to_four_then_powers_of_two(n_max, counts):
    assert lesson.worker_counts(n_max) == counts


def test_executor_refuses_an_unknown_kind_and_processes_without_a_start_method():
    with pytest.raises(ValueError, match="kind must be"), lesson.executor("fibers", 2):
        pass
    with pytest.raises(ValueError, match="start method"), lesson.executor(lesson.PROCESSES, 2):
        pass
    with pytest.raises(ValueError, match="start method"), lesson.holding_workers(lesson.PROCESSES, 2):
        pass


@pytest.mark.parametrize("kind", [lesson.THREADS, lesson.PROCESSES])
def test_measure_scaling_times_every_count_and_checks_the_sums(kind, numbers):
    scaling = lesson.measure_scaling(kind, lesson.sum_numpy, numbers, [1, 2], SPAWN, repeat=2, budget_s=2)
    assert (scaling.kind, scaling.task) == (kind, "sum_numpy")
    assert set(scaling.timings) == {1, 2} and all(len(t.runs) >= 2 for t in scaling.timings.values())
    ups = scaling.speed_ups()
    assert ups[1] == 1.0 and ups[2] > 0


def test_the_control_sums_numbers_each_worker_made_itself():
    scaling = lesson.measure_scaling_without_sending(2**16, [1, 2], SPAWN, repeat=2, budget_s=2)
    assert (scaling.kind, scaling.task) == (lesson.PROCESSES, "sum_own_chunk")
    assert set(scaling.speed_ups()) == {1, 2}


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_threads_hold_views_and_add_no_copy_processes_hold_copies(method):
    numbers = np.random.default_rng(7).random(4 * 2**20)  # 32 MiB: chunks far above PSS noise
    chunks = lesson.split(numbers, 2)
    with lesson.holding_workers(lesson.THREADS, 2) as threads:
        with threads.holding(chunks):
            pass
        with pytest.raises(ValueError, match="one chunk per worker"), threads.holding(chunks[:1]):
            pass
    assert threads.held_by == [os.getpid(), os.getpid()]
    with track_memory(trace_python=False) as mem:
        with lesson.holding_workers(lesson.PROCESSES, 2, mp.get_context(method)) as processes:
            demos.hold(mem, "idle", 0.4)
            with processes.holding(chunks):
                demos.hold(mem, "hold", 0.4)
    pids = processes.held_by
    assert len(set(pids)) == 2 and os.getpid() not in pids
    mem.name_roles(named={pid: f"worker {i}" for i, pid in enumerate(pids, start=1)})  # as the lesson does
    idle, held = lesson.steady_by_role(mem, "idle"), lesson.steady_by_role(mem, "hold")
    assert {"parent", "worker 1", "worker 2"} <= set(held)
    grew = sum(held[role] - idle[role] for role in ("worker 1", "worker 2"))
    assert grew >= 0.75 * numbers.nbytes  # each worker unpickled its chunk
    added = lesson.pss_added(mem, {"idle": None, "hold": None}, "idle", "hold")
    assert added["data"] == added["total"]  # no split by kind given: both are the steady difference


def test_the_gil_probe_sees_numpy_release_the_gil_and_a_python_loop_hold_it(numbers):
    released = gil_heartbeat.gil_probe("np.sum", np.sum, np.random.default_rng(1).random(2**20), seconds=0.2)
    held = gil_heartbeat.gil_probe("python loop", lesson.sum_python, numbers[: 2**16], seconds=0.2)
    assert released.calls >= 1 and released.ticks >= 1 and released.seconds >= 0.2
    assert released.releases, released
    if not blas.free_threading().free_threaded:
        assert not held.releases and held.released < 0.2, held


def test_the_probe_raises_the_switch_interval_while_it_runs_and_sets_it_back():
    """A held GIL shows as a wait of one switch interval: 50 ms while probing, far beyond the few
    milliseconds a busy machine may take to wake a sleeping thread."""
    seen = []
    before = sys.getswitchinterval()
    gil_heartbeat.gil_probe("read the interval", lambda: seen.append(sys.getswitchinterval()), seconds=0.05)
    assert seen and all(value == pytest.approx(gil_heartbeat.PROBE_SWITCH_INTERVAL) for value in seen)
    assert sys.getswitchinterval() == before
    assert gil_heartbeat.Heartbeat().late == before / 2


def test_cpu_wait_is_read_for_a_thread_of_this_process_and_none_for_another():
    waited = gil_heartbeat.cpu_wait_seconds(threading.get_native_id())
    assert waited is None or waited >= 0.0
    assert gil_heartbeat.cpu_wait_seconds(2**31 - 1) is None


def test_each_exercise_call_releases_or_holds_the_gil_as_documented(numbers):
    """Each call probed three times, the majority wins: one probe on a busy machine can misread a
    heartbeat that waited for a CPU."""
    calls = gil_heartbeat.exercise_calls(numbers)
    assert set(calls) == set(gil_heartbeat.DOCUMENTED)
    votes = {name: [gil_heartbeat.gil_probe(name, fn, *args).releases for _ in range(3)]
             for name, (fn, args) in calls.items()}
    if not blas.free_threading().free_threaded:
        assert {name: sum(v) >= 2 for name, v in votes.items()} == gil_heartbeat.DOCUMENTED, votes


def _probes(releases: dict[str, bool]) -> dict[str, gil_heartbeat.GilProbe]:
    return {name: gil_heartbeat.GilProbe(name, 0.9 if r else 0.01, 100, 10, 0.3)
            for name, r in releases.items()}


def test_the_exercise_fails_a_wrong_answer_and_passes_the_worked_solution(monkeypatch, capsys):
    monkeypatch.delenv(exercises.SOLVE_VARIABLE, raising=False)
    probes = _probes(gil_heartbeat.DOCUMENTED)
    wrong = {**gil_heartbeat.DOCUMENTED, "sorted(numbers)": True}
    with pytest.raises(exercises.WrongAnswer, match=r"sorted\(numbers\) held it"):
        exercises.check(gil_heartbeat.EXERCISE, wrong, probes=probes)
    assert exercises.grade(gil_heartbeat.EXERCISE, dict(gil_heartbeat.DOCUMENTED), probes=probes) is True
    assert exercises.grade(gil_heartbeat.EXERCISE, None, probes=probes) is False  # unanswered: the question
    assert "Your turn" in capsys.readouterr().out
    monkeypatch.setenv(exercises.SOLVE_VARIABLE, "1")
    assert exercises.grade(gil_heartbeat.EXERCISE, None, probes=probes) is True


@pytest.mark.parametrize("answer, misconception", gil_heartbeat.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(answer, misconception, monkeypatch):
    assert_misconception_rejected(gil_heartbeat.EXERCISE, answer, misconception, monkeypatch,
                                  probes=_probes(gil_heartbeat.DOCUMENTED))


@pytest.mark.parametrize("answer, hint", [
    ([True] * 6, "dict"),
    ({"sorted(numbers)": False}, "missing"),
    ({**gil_heartbeat.DOCUMENTED, "print()": True}, "unknown"),
    ({**gil_heartbeat.DOCUMENTED, "zlib.compress(data)": "yes"}, "True .* or False"),
])
def test_the_exercise_says_what_is_wrong_with_a_malformed_answer(answer, hint):
    with pytest.raises(exercises.WrongAnswer, match=hint):
        exercises.check(gil_heartbeat.EXERCISE, answer, probes=_probes(gil_heartbeat.DOCUMENTED))


def test_the_blas_limit_holds_inside_every_worker():
    here = blas.blas_threads()
    if here is None:
        pytest.skip("NumPy has no BLAS that threadpoolctl knows here")
    unlimited = blas.blas_fan_out(1, SPAWN, None, size=64, products=2, repeat=1, budget_s=1)
    limited = blas.blas_fan_out(2, SPAWN, 1, size=64, products=2, repeat=1, budget_s=1)
    assert unlimited.pool_sizes == [here] and unlimited.limit is None
    assert limited.pool_sizes == [1, 1] and limited.limit == 1
    assert len(limited.timing.runs) >= 1
    assert unlimited.waited_for_cpu >= 0.0 and limited.waited_for_cpu >= 0.0


def test_blas_library_names_the_blas_whose_pool_blas_threads_reads():
    name = blas.blas_library()
    assert (name is None) == (blas.blas_threads() is None)
    assert name is None or (name.islower() and name.isidentifier()), name


def test_free_threading_agrees_with_sysconfig_and_sys():
    status = blas.free_threading()
    assert status.build == bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)
    assert status.gil_enabled == (None if is_gil_enabled is None else is_gil_enabled())
    assert status.free_threaded == (status.build and status.gil_enabled is False)


@pytest.mark.parametrize("build, gil, words", [(False, None, "regular build"), (False, True, "regular build"),
                                              (True, True, "GIL is on"), (True, False, "GIL is off")])
def test_describe_free_threading_names_each_case(build, gil, words):
    assert words in blas.describe_free_threading(blas.FreeThreading(build, gil))


def test_plot_scaling_draws_speed_ups_with_the_ideal_and_bytes_a_second_beside_them():
    timings = {1: Timing((0.2, 0.3)), 2: Timing((0.1, 0.12))}
    scalings = [lesson.Scaling(lesson.THREADS, "sum_numpy", timings, nbytes=2**30),
                lesson.Scaling(lesson.PROCESSES, "sum_python", timings)]
    assert scalings[0].speed_ups() == {1: 1.0, 2: 2.0}
    assert scalings[0].speed_ups(of="median") == pytest.approx({1: 1.0, 2: 0.25 / 0.11})
    assert [s.label for s in scalings] == ["NumPy sum, threads, 1 GiB", "Python loop, processes"]
    speed, rate = lesson.plot_scaling(scalings, usable_cpus=2)
    assert len(speed.lines) == 3  # two measurements and the ideal
    assert len(rate.lines) == 1 and rate.get_yscale() == "log"  # only a measurement that knows its bytes
    assert list(rate.lines[0].get_ydata()) == pytest.approx([5.0, 10.0])  # 1 GiB in 0.2 s, in 0.1 s
    matplotlib.pyplot.close("all")


def test_scalings_know_the_bytes_each_fan_out_sums(numbers):
    scaling = lesson.measure_scaling(lesson.THREADS, lesson.sum_numpy, numbers, [1], repeat=1, budget_s=1)
    assert scaling.nbytes == numbers.nbytes


def test_unpickling_spikes_names_the_workers_whose_pss_rose_a_quarter_chunk_over_their_held_level():
    def sample(t, one, two):
        return TreeSample(t, {1: ProcessMemory(0, 0, 100), 2: ProcessMemory(0, 0, one),
                              3: ProcessMemory(0, 0, two)}, shm=0, cgroup=None)

    mem = MemoryReport(interval=0.01, samples=[sample(0.0, 10, 10), sample(0.1, 30, 80), sample(0.2, 74, 40),
                                               sample(0.3, 60, 60), sample(0.4, 60, 60)],
                       marks={"start end": 0.0, "hold holding": 0.25, "hold end": 0.45},
                       process_labels={1: "parent", 2: "worker 1", 3: "worker 2"})
    assert lesson.unpickling_spikes(mem, "start end", "hold", chunk_bytes=64) == ["worker 2"]  # 80 - 60 >= 16
    assert lesson.unpickling_spikes(mem, "start end", "hold", chunk_bytes=32) == ["worker 1", "worker 2"]


def test_plot_held_states_names_each_state_once_where_it_begins():
    with track_memory(trace_python=False) as mem:
        demos.hold(mem, "threads hold chunks", 0.1)
    ax = lesson.plot_held_states(mem, "title")
    assert [text.get_text() for text in ax.texts] == ["threads hold chunks"]
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize("sizes, words", [([2, 2], "2 threads each"), ([1, 1], "1 thread each"),
                                          ([1, 2], "1, 2 threads"), ([None, None], "unknown")])
def test_describe_pools_says_the_pool_sizes_in_words(sizes, words):
    assert words in blas.describe_pools(sizes)


def _timing(median: float, fastest: float) -> Timing:
    return Timing((fastest, median, median, median * 1.01))


def _scalings(python_processes_fastest: float) -> dict:
    """Section 1's five fan-outs as this lesson stored them once (seconds), the Python loop's
    processes at ``python_processes_fastest`` on two workers."""
    def scaling(kind, task, one, two):
        nbytes = 4 * 2**20 if task == "sum_python" else 128 * 2**20
        return lesson.Scaling(kind, task, {1: _timing(*one), 2: _timing(*two)}, nbytes=nbytes)
    made = [scaling(lesson.THREADS, "sum_numpy", (7.1e-3, 6.8e-3), (4.9e-3, 3.6e-3)),
            scaling(lesson.PROCESSES, "sum_own_chunk", (8e-3, 7.4e-3), (4.5e-3, 4.1e-3)),
            scaling(lesson.THREADS, "sum_python", (7e-3, 6.6e-3), (7e-3, 6.8e-3)),
            scaling(lesson.PROCESSES, "sum_python", (12.5e-3, 10.5e-3), (10.4e-3, python_processes_fastest)),
            scaling(lesson.PROCESSES, "sum_numpy", (358e-3, 356e-3), (339e-3, 317e-3))]
    return {(s.kind, s.task): s for s in made}


def test_the_conclusion_and_the_takeaway_say_who_won_each_sum():
    by = _scalings(7.6e-3)
    text = lesson.scaling_conclusion(by, {}, 2, False, 128 * 2**20, 4 * 2**20)
    assert "processes that received their chunks beat threads at neither sum" in text
    # 2 workers sped NumPy's processes up 356 / 317 = 1.12×: the sending runs one chunk after the other, and
    # summing is 7.4 / 356 = 2% of one worker's time; with no control of the loop's own, no loop share;
    # 356 - 317 = 39 ms saved, more than the whole 7.4 ms sum: more than summing overlapped the next send
    assert ("sped them up only 1.12×. This process's *feeder thread* pickles and writes the chunks into the "
            "pool's one pipe in turn: only what a worker does after receiving, unpickling ([lesson 02]"
            "(02_pickle_baseline.ipynb) times `pickle.loads`) and summing, can overlap the next send. "
            "Summing was 2% of one worker's time (7.4 ms of 356 ms). NumPy's 2 workers saved 39 ms, more "
            "than its whole sum: unpickling overlapped too.") in text
    assert "the loop's 66%" not in text
    assert "Processes with nothing sent (NumPy's control): **1.80×**" in text
    assert "on medians; summing from memory is noisy" in text
    # the loop's processes against its threads on 2 workers (fastest runs, medians); what their speed-up means
    assert "**Python loop, processes receiving their chunks:** 7.6 ms against the threads' 6.8 ms " \
           "(fastest runs; medians 10.4 ms against 7 ms). Their 1.38× speed-up is over one process, " \
           "not threads." in text
    by[lesson.PROCESSES, "sum_own_chunk_python"] = lesson.Scaling(
        lesson.PROCESSES, "sum_own_chunk_python", {1: _timing(7.2e-3, 6.9e-3), 2: _timing(3.8e-3, 3.5e-3)})
    # the Python loop's processes are judged on the Python loop's own control (6.9 / 3.5 = 1.97×)
    text = lesson.scaling_conclusion(by, {}, 2, False, 128 * 2**20, 4 * 2**20)
    assert "Processes with nothing sent: **1.97×**, a GIL each." in text
    # the loop's sum is 6.9 / 10.5 = 66% of one worker's time, `np.sum`'s 2%; no speed-up is credited to it
    assert ("Summing was 2% of one worker's time (7.4 ms of 356 ms), the loop's 66% (6.9 ms of 10.5 ms). "
            "NumPy's 2 workers saved 39 ms") in text
    assert "hence" not in text
    # on one usable CPU nothing overlaps: no claim of it
    assert "overlapped" not in lesson.scaling_conclusion(by, {}, 1, False, 128 * 2**20, 4 * 2**20)
    within_sum = dict(by)  # 356 - 352 = 4 ms saved, under the 7.4 ms sum: nothing says unpickling overlapped
    within_sum[lesson.PROCESSES, "sum_numpy"] = lesson.Scaling(
        lesson.PROCESSES, "sum_numpy", {1: _timing(358e-3, 356e-3), 2: _timing(355e-3, 352e-3)},
        nbytes=128 * 2**20)
    assert "overlapped" not in lesson.scaling_conclusion(within_sum, {}, 2, False, 128 * 2**20, 4 * 2**20)
    split = dict(by)  # one process slower (15.3 ms): the same 7.6 ms on two now reads as 2.01×
    split[lesson.PROCESSES, "sum_python"] = lesson.Scaling(
        lesson.PROCESSES, "sum_python", {1: _timing(16e-3, 15.3e-3), 2: _timing(10.4e-3, 7.6e-3)},
        nbytes=4 * 2**20)
    text = lesson.scaling_conclusion(split, {}, 2, False, 128 * 2**20, 4 * 2**20)
    assert "Their 2.01× speed-up is over one process, not threads." in text
    # per float, each sum on its own size: 6.6 ms / 524,288 floats and 6.8 ms / 16,777,216 floats
    assert "Per float, one thread's Python loop (on 4 MiB) took 12.6 ns, `np.sum` (on 128 MiB) 0.41 ns: " \
           "31× as long." in text
    said = lesson.verdict(by)
    # 2 workers' fastest runs as printed: the loop's threads 6.8 ms, its control 3.5 ms (3.3 ms saved), its
    # processes 7.6 ms (4.1 ms to receive); NumPy's threads 3.6 ms, control 4.1 ms, processes 317 ms
    assert said == (
        "- **Processes pay off only when receiving the data costs less than the time they save** "
        "(section 1). With 2 workers (fastest runs), the loop's 4 MiB took the threads 6.8 ms, the "
        "processes 3.5 ms with nothing sent: a GIL each saved 3.3 ms. Receiving the chunks added "
        "4.1 ms, so the processes lost (7.6 ms). `np.sum`'s 128 MiB took the threads 3.6 "
        "ms, the processes 4.1 ms with nothing sent: nothing saved. Receiving the chunks added 313 "
        "ms, so the processes lost (317 ms). Heavier work per element, or sharing the array "
        "(lessons 04 to 08), tips the balance.")
    # "narrowly" only where the loop's processes took under 1.25× its threads' time on fastest runs and on
    # medians: 7.6 ms against 6.8 ms, but 10.4 ms against 7 ms above; 8 ms against 7 ms here
    assert "so the processes lost (9 ms)" in lesson.verdict(_with_loop_control(_scalings(9e-3)))
    close = _with_loop_control(_scalings(7.6e-3))
    close[lesson.PROCESSES, "sum_python"] = lesson.Scaling(
        lesson.PROCESSES, "sum_python", {1: _timing(12.5e-3, 10.5e-3), 2: _timing(8e-3, 7.6e-3)},
        nbytes=4 * 2**20)
    assert "so the processes lost narrowly (7.6 ms)" in lesson.verdict(close)
    own = by[lesson.PROCESSES, "sum_own_chunk_python"]
    by[lesson.PROCESSES, "sum_own_chunk_python"] = lesson.Scaling(own.kind, own.task, own.timings, 1.42)
    rough = "3.5 ms with nothing sent (rough: CPU wait 1.42): a GIL each saved"
    assert rough in lesson.verdict(by, 0.5)
    by[lesson.PROCESSES, "sum_own_chunk_python"] = own
    control = by[lesson.PROCESSES, "sum_own_chunk"]
    by[lesson.PROCESSES, "sum_own_chunk"] = lesson.Scaling(control.kind, control.task, control.timings, 0.73)
    busy = lesson.scaling_conclusion(by, {}, 2, False, 128 * 2**20, 4 * 2**20, wait_limit=0.5)
    assert "on medians (CPU wait 0.73, over the 0.50 limit)" in busy
    assert "free only part of the time" in busy and "really there" not in busy
    faster = _with_loop_control(_scalings(3e-3))
    assert "cost nothing measurable, so the processes won (3 ms)" in lesson.verdict(faster)


def _with_loop_control(by: dict) -> dict:
    by[lesson.PROCESSES, "sum_own_chunk_python"] = lesson.Scaling(
        lesson.PROCESSES, "sum_own_chunk_python", {1: _timing(7.2e-3, 6.9e-3), 2: _timing(3.8e-3, 3.5e-3)})
    return by


def test_the_blas_conclusion_gives_medians_where_they_differ_from_fastest_runs():
    def run(limit, sizes, median, fastest):
        return blas.BlasRun(limit, sizes, _timing(median, fastest))
    runs = {(1, None): run(None, [2], 4.6e-3, 4.5e-3), (1, 1): run(1, [1], 5.5e-3, 5.3e-3),
            (2, None): run(None, [2, 2], 92e-3, 16.8e-3), (2, 1): run(1, [1, 1], 5.7e-3, 5.5e-3)}
    text = blas.blas_conclusion(runs, 2, 1, 2)
    assert "alone, a pool that size helped" in text  # the control: 4.5 ms unlimited against 5.3 ms limited
    # ratios of the printed times, to two figures: 16.8 / 5.5 on fastest runs, 92 / 5.7 on medians
    assert "**about 3.1×**" in text and "on fastest runs, **about 16×** on medians" in text
    assert "erratic" in text
    runs[2, None] = run(None, [2, 2], 17.5e-3, 16.8e-3)
    assert "on fastest runs (about 3.1× on medians)" in blas.blas_conclusion(runs, 2, 1, 2)
    # the control neither helped nor hurt (5.3 ms against 5.3 ms): limiting cost nothing here
    runs[1, None] = run(None, [2], 5.5e-3, 5.3e-3)
    assert "neither helped nor hurt, so limiting cost nothing" in blas.blas_conclusion(runs, 2, 1, 2)
    # as this lesson stored it once: 1.02× on fastest runs, but the unlimited control's IQR 9.96 ms against
    # 197 µs limited (50×, more than its limited median): erratic, so limiting steadied it
    erratic = Timing((5.77e-3, 5.8e-3, 6.11e-3, 15.76e-3, 15.8e-3))
    steady = Timing((5.65e-3, 5.8e-3, 5.85e-3, 5.997e-3, 6e-3))
    runs[1, None], runs[1, 1] = blas.BlasRun(None, [2], erratic), blas.BlasRun(1, [1], steady)
    text = blas.blas_conclusion(runs, 2, 1, 2)
    assert ("The control, one worker unlimited, took 1.02× its limited time on fastest runs, but its runs "
            "were erratic (IQR 9.96 ms against 197 µs limited): limiting cost nothing and steadied them."
            ) in text
    assert "neither helped" not in text
    # the other way round: the limited control erratic
    runs[1, None], runs[1, 1] = blas.BlasRun(None, [2], steady), blas.BlasRun(1, [1], erratic)
    assert ("its limited runs were the erratic ones (IQR 197 µs against 9.96 ms limited): limiting cost "
            "nothing on fastest runs, only steadiness.") in blas.blas_conclusion(runs, 2, 1, 2)
