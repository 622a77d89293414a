"""Lesson 00's "Your turn": how many arrays each memory measure counts while N readers read one
shared segment, measured on real spawned workers and a real segment; a wrong or malformed
prediction fails the check cell with a hint, the worked solution passes. Also the figure's
staggered mark labels and its named spikes."""

import mmap
import tracemalloc

import numpy as np
import pytest
from exercise_asserts import (
    assert_misconception_rejected,
    assert_worked_solution_passes,
    assert_wrong_answer_fails,
)

from helpers.lessons import demos, start_here, start_here_figures, workers
from helpers.measure import memory
from helpers.measure.memory import MemoryReport, TreeSample
from helpers.measure.proctree import ProcessMemory
from helpers.measure.units import GiB, MiB

pytestmark = pytest.mark.timeout(120)

ARRAY_BYTES = 16 * MiB
R = start_here.READER
N_READERS = start_here.readers(2)  # the lesson's default: 2 workers, 3 readers
HOLD = 0.6


@pytest.fixture(scope="module")
def measured():
    """Workload B of lesson 00 at a small size: idle workers, then readers of one segment."""
    with memory.track_memory(interval=0.05) as report:
        idle = start_here.hold_in_workers(workers.allocate_and_hold, (0,), N_READERS, "spawn", HOLD,
                                          report=report, label="idle", during=start_here.tree_by_kind)
        segment = start_here.random_segment(ARRAY_BYTES)
        try:
            segment.close()
            shared = start_here.hold_segment_in_workers(segment.name, N_READERS, "spawn", HOLD, report=report,
                                                        during=start_here.tree_by_kind)
        finally:
            segment.unlink()
    data = start_here.data_growth(idle.during, shared.during)
    reader = start_here.reader_share(report, idle.pids, shared.pids)
    counted = start_here.arrays_counted(demos.increase(report, "idle", "shared"), ARRAY_BYTES, data, reader)
    return {"counted": counted, "n_readers": N_READERS}


def test_a_private_array_is_anonymous_uss_and_a_mapped_segment_is_shared_memory():
    before = start_here.tree_by_kind()
    # A new anonymous mapping: a NumPy array of this size may reuse heap pages this process
    # already holds (glibc raises its mmap threshold after big frees), which adds no USS.
    private = mmap.mmap(-1, ARRAY_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    np.frombuffer(private, dtype=np.uint8)[:] = 1
    segment = start_here.random_segment(ARRAY_BYTES)  # still mapped here, by this process only
    try:
        after = start_here.tree_by_kind()
    finally:
        segment.close()
        segment.unlink()
    private.close()
    grew = {measure: {kind: after[measure][kind] - before[measure][kind] for kind in after[measure]}
            for measure in after}
    assert 0.9 * ARRAY_BYTES <= grew["uss"][start_here.ANONYMOUS] <= 1.5 * ARRAY_BYTES, grew  # and the heap
    assert 0.9 * ARRAY_BYTES <= grew["uss"][start_here.SHARED_MEMORY] <= 1.1 * ARRAY_BYTES, grew
    assert start_here.data_growth(before, after)["pss"] >= 1.8 * ARRAY_BYTES, grew
    assert start_here.data_growth(None, after) is None


def test_tracemalloc_never_sees_a_segment_even_in_the_process_that_made_and_filled_it():
    """Section 4's table: tracemalloc counts what this process allocated on its heap, and a segment is a
    file mapped with mmap, so a learner can reason its 0 before the exercise."""
    warm = start_here.random_segment(MiB)  # first calls import and cache what later calls reuse
    warm.close()
    warm.unlink()
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        segment = start_here.random_segment(ARRAY_BYTES)
        try:
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            segment.close()
            segment.unlink()
    finally:
        if started:
            tracemalloc.stop()
    assert peak < 0.05 * ARRAY_BYTES, peak


def test_the_five_measures_count_the_shared_array_0_n_0_1_1_times_and_a_reader_1_over_n(measured):
    counted = measured["counted"]
    assert counted["tracemalloc"] < 0.25 and counted["USS sum"] < 0.25, counted  # pytest allocates too
    assert counted["RSS sum"] >= 0.75 * N_READERS, counted
    assert 0.75 <= counted["PSS sum"] <= 1.35 and 0.9 <= counted["/dev/shm"] <= 1.1, counted
    assert abs(counted[start_here.READER] - 1 / N_READERS) < 0.2, counted  # each reader's share


@pytest.mark.parametrize("wrong, hint", [
    ({"tracemalloc": 0, "RSS sum": 1, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, R: 1 / 3}, "'RSS sum'"),
    ({"tracemalloc": 0, "RSS sum": 2, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, R: 1 / 3}, "'RSS sum'"),
    ({"tracemalloc": 0, "RSS sum": 3, "USS sum": 0, "PSS sum": 3, "/dev/shm": 1, R: 1 / 3}, "'PSS sum'"),
    ({"tracemalloc": 1, "RSS sum": 3, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, R: 1 / 3}, "'tracemalloc'"),
    ({"tracemalloc": 0, "RSS sum": 3, "USS sum": 3, "PSS sum": 1, "/dev/shm": 1, R: 1 / 3}, "'USS sum'"),
    ({"tracemalloc": 0, "RSS sum": 3, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, R: 0.5}, "one reader's PSS"),
    ({"tracemalloc": 0, "RSS sum": 3, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, R: 1}, "one reader's PSS"),
    ({"tracemalloc": 0, "RSS sum": "N", "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, R: 0.33}, "give a number"),
    ({"tracemalloc": 0, "RSS sum": 3, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1}, "dict of one number"),
    ([0, 3, 0, 1, 1, 1 / 3], "dict of one number"),
])
def test_a_wrong_prediction_fails_the_check_cell_with_a_hint(measured, wrong, hint, monkeypatch):
    assert_wrong_answer_fails(start_here.EXERCISE, wrong, hint, monkeypatch, **measured)


@pytest.mark.parametrize("answer, misconception", start_here.EXERCISE.misconceptions)
def test_every_named_misconception_is_rejected(measured, answer, misconception, monkeypatch):
    assert_misconception_rejected(start_here.EXERCISE, answer, misconception, monkeypatch, **measured)


def test_the_worked_solution_passes(measured, monkeypatch, capsys):
    assert_worked_solution_passes(start_here.EXERCISE, monkeypatch, capsys, **measured)


def test_the_worked_solution_is_the_same_counts_for_any_number_of_readers():
    counted = {"tracemalloc": 0.0, "RSS sum": 4.1, "USS sum": 0.0, "PSS sum": 1.0, "/dev/shm": 1.0, R: 0.26}
    assert start_here.EXERCISE.check(start_here.EXERCISE.solution(counted=counted, n_readers=4),
                                     counted=counted, n_readers=4) is None


def test_workload_b_has_at_least_3_readers_so_2_and_a_half_are_wrong_answers():
    """At the default 2 workers, "counted twice, each sharer pays half" would match 2 readers."""
    assert [start_here.readers(n) for n in (1, 2, 3, 8)] == [3, 3, 3, 8]
    counted = {"tracemalloc": 0.0, "RSS sum": 3.02, "USS sum": 0.0, "PSS sum": 1.0, "/dev/shm": 1.0, R: 0.34}
    halves = {"tracemalloc": 0, "RSS sum": 2, "USS sum": 0, "PSS sum": 1, "/dev/shm": 1, R: 0.5}
    assert "'RSS sum'" in start_here.EXERCISE.check(halves, counted=counted, n_readers=3)
    assert start_here.EXERCISE.check({**halves, "RSS sum": 3, R: 0.333}, counted=counted, n_readers=3) is None


def _report(marks: dict[str, float], samples: list[tuple[float, dict[int, int]]]) -> MemoryReport:
    """A MemoryReport of exact samples (time, pid -> PSS in bytes), labelled ``reader <pid>``."""
    report = MemoryReport(interval=0.05)
    report.marks.update(marks)
    for time_s, pss in samples:
        report.samples.append(TreeSample(time_s, {pid: ProcessMemory(value, value, value)
                                                  for pid, value in pss.items()}, shm=0, cgroup=None))
    report.process_labels.update({pid: f"reader {pid}" for _, pss in samples for pid in pss})
    return report


MARKS = {"no segment end": 1.0, "unmapped holding": 2.0, "unmapped end": 3.0, "shared holding": 4.0,
         "shared end": 5.0}


def test_the_spikes_are_named_with_their_peaks_when_they_rise_over_a_quarter_of_an_array():
    array = 64 * MiB
    report = _report(MARKS, [(0.5, {1: 10 * MiB}), (1.5, {1: 60 * MiB}), (2.5, {1: 10 * MiB}),
                             (3.5, {1: 10 * MiB, 2: 70 * MiB, 3: 5 * MiB}),
                             (4.5, {1: 10 * MiB, 2: 30 * MiB, 3: 30 * MiB})])
    assert start_here_figures.spikes_caption(report, [2, 3], array) == (
        "Spikes, in arrays above where the line settled: this kernel, mapping the segment while it filled it "
        "(+0.78); reader 2, charged all it mapped until the others attached (+0.62). Samples at least 50 ms "
        "apart can miss a peak.")
    flat = _report(MARKS, [(time_s, {1: 10 * MiB, 2: 30 * MiB}) for time_s in (0.5, 1.5, 2.5, 3.5, 4.5)])
    assert start_here_figures.spikes_caption(flat, [2], array) == ""


def test_the_overlap_caption_names_the_readers_level_only_when_their_lines_lie_on_one_another():
    same = _report(MARKS, [(4.5, {2: 30 * MiB, 3: 30 * MiB}), (4.6, {2: 31 * MiB, 3: 30 * MiB})])
    assert start_here.overlap_caption(same, [2, 3]) == (
        " The 2 readers' lines overlap (each about 30.2 MiB RSS, 30.2 MiB PSS): one shows for all.")
    apart = _report(MARKS, [(4.5, {2: 30 * MiB, 3: 40 * MiB})])
    assert start_here.overlap_caption(apart, [2, 3]) == ""
    assert start_here.overlap_caption(same, [2]) == ""


def test_the_pss_extra_sentence_gives_each_interpreter_and_what_the_sampler_adds():
    roles = {"parent": (100 * MiB, 40 * MiB), "memory_profiler's sampler": (80 * MiB, 45 * MiB),
             **{f"worker {i}": (160 * MiB, 60 * MiB) for i in (1, 2, 3)}}
    text = start_here.pss_extra_sentence(roles, 60 * MiB, 120 * MiB, 3, "fork")
    assert "takes about 20 MiB" in text and "adds almost nothing" in text and "45 MiB" in text, text
    assert "forked" not in start_here.pss_extra_sentence(roles, 60 * MiB, 120 * MiB, 3, "spawn")
    assert "add 30 MiB" in start_here.pss_extra_sentence(roles, 90 * MiB, 120 * MiB, 3, "fork")
    assert start_here.pss_extra_sentence({"parent": (1, 1)}, 60 * MiB, 120 * MiB, 3, "fork") == ""


def test_a_mark_label_close_to_the_previous_one_moves_to_the_right_of_its_line():
    import matplotlib

    matplotlib.use("Agg")
    report = _report({"a holding": 0.0, "a end": 1.0, "b holding": 1.02, "b end": 3.0},
                     [(time_s, {1: MiB}) for time_s in (0.0, 1.0, 2.0, 3.0)])
    figure = start_here_figures.plot_rss_and_pss(report)
    try:
        sides = {text.get_text(): text.get_horizontalalignment() for text in figure.axes[0].texts}
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)
    assert sides == {"a holding": "right", "a end": "right", "b holding": "left", "b end": "right"}, sides


def test_the_answer_table_counts_what_moved_under_5_percent_as_0_and_says_by_how_much():
    columns = {"A": {"tree RSS sum": 16 * MiB, "tree USS sum": 16 * MiB, "cgroup counter": 16 * MiB},
               "B": {"tree RSS sum": 32 * MiB, "tree USS sum": -120 * 1024, "cgroup counter": 15 * MiB}}
    counted = {"tracemalloc": 0.0, "RSS sum": 2.0, "USS sum": 0.0, "PSS sum": 1.0, "/dev/shm": 1.0}
    table = start_here.answer_table(columns, counted, 16 * MiB)
    assert "cgroup" not in table, table  # other programs move it; the exercise does not ask for it
    assert table.splitlines()[-1] == ("Anything under 5% of an array counts as 0: heaps move a little, "
                                      "either way (here USS sum -120 KiB).")


def test_the_answer_table_gives_uss_and_pss_read_page_by_page_without_file_pages_as_the_check_does():
    kinds = (start_here.ANONYMOUS, start_here.SHARED_MEMORY, start_here.FILES)
    before = {"uss": dict.fromkeys(kinds, 0), "pss": dict.fromkeys(kinds, 0)}
    after = {"uss": {kinds[0]: 16 * MiB, kinds[1]: 0, kinds[2]: -4 * MiB},
             "pss": {kinds[0]: 16 * MiB, kinds[1]: 0, kinds[2]: -2 * MiB}}
    columns = {"A": {"tree USS sum": 12 * MiB, "tree PSS sum": 14 * MiB}, "B": {"tree USS sum": 0}}
    counted = {"USS sum": 0.0, R: 0.5}
    table = start_here.answer_table(columns, counted, 16 * MiB, kinds={"A": (before, after)})
    lines, cut = table.splitlines(), start_here.NO_FILE_PAGES
    assert lines[2].startswith(f"tree USS sum, {cut}") and "16 MiB (1.00 arrays)" in lines[2], table
    assert lines[3].startswith(f"tree PSS sum, {cut}") and "16 MiB (1.00 arrays)" in lines[3], table
    assert lines[-1].startswith("Anything under 5%"), table
    assert "one reader's PSS" in table and "8 MiB (0.50 arrays)" in table, table
    assert "12 MiB" not in table and "14 MiB" not in table, table
    assert cut not in start_here.answer_table(columns, {}, 16 * MiB, kinds={"A": (None, after)})


def test_the_by_kind_table_names_anonymous_pages_and_prints_small_growth_as_about_zero():
    kinds = (start_here.ANONYMOUS, start_here.SHARED_MEMORY, start_here.FILES)
    before = {"uss": dict.fromkeys(kinds, 0), "pss": dict.fromkeys(kinds, 0)}
    after = {"uss": {kinds[0]: 128 * 1024, kinds[1]: 0, kinds[2]: -192 * 1024},
             "pss": {kinds[0]: 128 * 1024, kinds[1]: ARRAY_BYTES, kinds[2]: 512 * 1024}}
    lines = start_here.by_kind_table(before, after, ARRAY_BYTES).splitlines()
    assert lines[0].startswith("USS of anonymous (heap, NumPy buffers)") and lines[0].endswith(" ~0"), lines
    assert lines[2].startswith("USS of files") and lines[2].endswith(" ~0"), lines  # no unexplained -192 KiB
    assert lines[4].startswith("PSS of shared memory") and lines[4].endswith("(1.00 arrays)"), lines
    assert not any("-" in line for line in lines[:6]), lines
    assert lines[6].startswith("~0: under 5% of an array (here at most 512 KiB, either way)"), lines


@pytest.mark.parametrize("name, counted, holds", [
    ("PSS sum", 1.02, True), ("PSS sum", 3.0, False), ("PSS sum", 0.5, False),
    ("RSS sum", 3.01, True), ("RSS sum", 1.0, False),
    ("USS sum", 0.01, True), ("USS sum", 1.0, False),
    ("tracemalloc", 0.0, True), ("tracemalloc", 1.0, False),
    ("/dev/shm", 1.0, True), ("/dev/shm", 0.0, False),
])
def test_the_check_cell_holds_a_count_near_the_worked_solution_only(name, counted, holds):
    assert start_here.as_solved({name: counted}, name, 3) is holds


def test_the_launcher_lines_start_wait_for_release_and_join_the_workers():
    lines = start_here.launcher_lines().splitlines()
    assert lines[0] == "context = mp.get_context(start_method)", lines
    started = "context.Process(target=target, args=(*args, ready, release))"
    assert any(started in line for line in lines), lines
    assert lines.index("    ...") < lines.index("finally:") < lines.index("    release.set()"), lines
    assert lines[-1] == "    join_or_kill(processes)", lines


@pytest.mark.parametrize("n_bytes, shown", [(572.4 * MiB, 572 * MiB), (19.64 * MiB, 19.6 * MiB), (0, 0),
                                            (-410.3 * 1024, -410 * 1024), (1.464 * GiB, 1.46 * GiB)])
def test_shown_bytes_is_the_size_as_format_bytes_prints_it(n_bytes, shown):
    assert start_here.shown_bytes(n_bytes) == pytest.approx(shown)
