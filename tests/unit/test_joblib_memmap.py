"""helpers.lessons.joblib_memmap, joblib_memmap_crash and the joblib strategy
(helpers.bench.joblib_mechanism), for real: loky workers, joblib's dumps in /dev/shm or the temp
folder, a parent program SIGKILLed. Each test shuts loky's workers down and removes joblib's folders
(``release_joblib``); the autouse fixture (conftest) then checks /dev/shm and the temp folder."""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np
import psutil
import pytest
from joblib import Parallel, delayed

from helpers.bench import harness
from helpers.bench.joblib_mechanism import Joblib
from helpers.lessons import joblib_memmap, joblib_memmap_crash, memmap, workers
from helpers.measure.leftovers import SHM_DIR
from helpers.measure.memory import track_memory
from helpers.measure.units import MiB

ARRAY_BYTES = 8 * MiB
N_WORKERS = 2
# loky's clean-up runs on its own threads and processes: on a machine shared with another Python's
# run it can outlast a test, so CI runs these on the default Python only (lesson 06 runs joblib on 3.13).
pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def released():
    """Shut loky's workers down and remove joblib's folders of this process after the test, and
    check that nothing of joblib's is left running or on disk."""
    yield
    joblib_memmap.release_joblib()
    assert joblib_memmap.joblib_folders(os.getpid()) == []
    assert live_children() == []


def live_children() -> list[str]:
    """Children other than multiprocessing's resource trackers and forkserver (and its children):
    they live on by design, the forkserver once an earlier test of the session used that method."""
    live = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            lines = " ".join(child.cmdline()) + " " + " ".join(child.parent().cmdline())
            if child.status() != psutil.STATUS_ZOMBIE and not any(
                    part in lines for part in ("resource_tracker", "multiprocessing.forkserver")):
                live.append(" ".join(child.cmdline()))
    return live


def random_array(n_bytes: int = ARRAY_BYTES) -> np.ndarray:
    return np.random.default_rng(0).random(n_bytes // 8)


def test_joblib_maps_big_arrays_read_only_and_pickles_small_and_object_ones(released, tmp_path):
    array = random_array()
    own = memmap.owner_only_memmap(tmp_path / "own.f64", (300_000,))
    own[:] = 1.5
    objects = np.array(list(array[:200_000]), dtype=object)  # 1.6 MB of pointers: over max_nbytes
    arrays = {"big": array, "small view": array[:100], "objects": objects, "own memmap": own}
    views = dict(zip(arrays, Parallel(n_jobs=N_WORKERS, backend="loky")(
        delayed(joblib_memmap.describe_argument)(a) for a in arrays.values()), strict=True))
    assert {name: view.where for name, view in views.items()} == {
        "big": "joblib's file", "small view": "pickled", "objects": "pickled", "own memmap": "its own file"}
    big = views["big"]
    assert big.type_name == "memmap" and big.mode == "r" and not big.writeable and big.first == array[0]
    assert os.path.dirname(os.path.dirname(big.filename)) == str(joblib_memmap.joblib_temp_root().path)
    assert views["own memmap"].filename == str(tmp_path / "own.f64") and views["own memmap"].first == 1.5
    assert views["small view"].type_name == "ndarray" and views["small view"].writeable
    del own


def test_temp_folder_counts_only_for_new_workers_and_the_variable_at_once(released, tmp_path):
    root = joblib_memmap.joblib_temp_root(tmp_path)
    assert root.path == tmp_path and "temp_folder" in root.reason
    array = random_array(2 * MiB)
    default = joblib_memmap.dump_root(array, N_WORKERS)  # starts loky's workers without a temp_folder
    assert default == joblib_memmap.joblib_temp_root().path
    roots = joblib_memmap.temp_folder_experiment(array, N_WORKERS, tmp_path)
    assert roots == {"temp_folder=, workers kept from the last call": default,
                     "JOBLIB_TEMP_FOLDER, the same workers": tmp_path,
                     "temp_folder=, new workers": tmp_path,
                     "no temp_folder=, the same workers": tmp_path}
    assert "JOBLIB_TEMP_FOLDER" not in os.environ
    with pytest.raises(ValueError, match="did not dump"):
        joblib_memmap.dump_root(array[:10], N_WORKERS)


def test_a_reused_parallel_does_not_see_an_in_place_change_and_a_new_call_does(released):
    array = random_array(2 * MiB)
    first = array[0]
    with Parallel(n_jobs=N_WORKERS, backend="loky") as parallel:
        before = parallel(delayed(joblib_memmap.describe_argument)(array) for _ in range(1))[0]
        array[0] = first + 1.0
        after = parallel(delayed(joblib_memmap.describe_argument)(array) for _ in range(1))[0]
    fresh = Parallel(n_jobs=N_WORKERS, backend="loky")(delayed(joblib_memmap.describe_argument)(array)
                                                       for _ in range(1))[0]
    assert before.first == after.first == first  # the same file, not dumped again
    assert after.filename == before.filename
    assert fresh.first == first + 1.0


def test_folder_retry_waits_counts_joblibs_sleep_before_it_deletes_a_folder_again(tmp_path):
    import threading

    import joblib.disk

    folder = tmp_path / "joblib_memmapping_folder_test"
    folder.mkdir()
    (folder / "dump.pkl").write_bytes(b"x")
    real = joblib.disk.time
    remover = threading.Timer(joblib_memmap.FOLDER_RETRY_S / 2, (folder / "dump.pkl").unlink)
    remover.start()  # the file goes while joblib sleeps, as loky's resource tracker removes a dump
    with joblib_memmap.folder_retry_waits() as slept:
        joblib.disk.delete_folder(str(folder), allow_non_empty=False)
    remover.join()
    assert slept == [joblib_memmap.FOLDER_RETRY_S] and not folder.exists()
    assert joblib.disk.time is real


def test_time_calls_gives_each_timed_run_its_wait_and_its_dump(released):
    import joblib._memmapping_reducer

    real_dump = joblib._memmapping_reducer.dump
    array = random_array(2 * MiB)
    ours_path = SHM_DIR / f"sal-test-{os.getpid()}.f64"
    ours = memmap.owner_only_memmap(ours_path, array.shape)
    try:
        ours[:] = array

        def call(argument):
            return lambda: Parallel(n_jobs=N_WORKERS, backend="loky")(
                delayed(joblib_memmap.sum_argument)(argument) for _ in range(N_WORKERS))

        timed = joblib_memmap.time_calls({"auto": call(array), "ours": call(ours)}, repeat=3)
    finally:
        del ours
        ours_path.unlink()
    auto = timed["auto"]
    assert len(auto.timing.runs) == len(auto.retry_waits) == len(auto.dumping) == 3
    assert all(wait % joblib_memmap.FOLDER_RETRY_S < 1e-9 or wait == 0 for wait in auto.retry_waits)
    assert all(run > wait for run, wait in zip(auto.timing.runs, auto.retry_waits, strict=True))
    assert all(0 < dumped < run for run, dumped in zip(auto.timing.runs, auto.dumping, strict=True))
    assert timed["ours"].dumping == (0.0, 0.0, 0.0)  # sent by its file's name: nothing dumped
    assert joblib._memmapping_reducer.dump is real_dump


def test_seconds_in_times_each_call_and_keeps_the_functions_name():
    import types

    module = types.SimpleNamespace(work=lambda seconds: time.sleep(seconds) or seconds)
    real = module.work
    with joblib_memmap.seconds_in(module, "work") as spent:
        assert module.work(0.01) == 0.01 and module.work(0.0) == 0.0
        assert module.work.__name__ == real.__name__ and module.work.__module__ == real.__module__
    assert len(spent) == 2 and spent[0] >= 0.01 > spent[1]
    assert module.work is real


def test_time_dump_times_joblibs_dump_and_leaves_no_file(tmp_path):
    timing = joblib_memmap.time_dump(random_array(2 * MiB), tmp_path, repeat=2)
    assert len(timing.runs) == 2 and timing.min > 0
    assert list(tmp_path.iterdir()) == []


def test_time_write_times_one_write_of_the_bytes_and_leaves_no_file(tmp_path):
    timing = joblib_memmap.time_write(random_array(2 * MiB), tmp_path, repeat=2)
    assert len(timing.runs) == 2 and timing.min > 0
    assert list(tmp_path.iterdir()) == []


def test_workers_that_hold_a_memmapped_array_share_it_and_pickled_ones_copy_it(released):
    array = random_array()
    with track_memory(trace_python=False) as report:
        idle = joblib_memmap.hold_in_workers(report, "idle", None, N_WORKERS, 0.5)
        mapped = joblib_memmap.hold_in_workers(report, "mapped", array, N_WORKERS, 0.5)
        pickled = joblib_memmap.hold_in_workers(report, "pickled", array, N_WORKERS, 0.5, max_nbytes=None)
    assert len(set(idle.pids)) == len(set(mapped.pids)) == len(set(pickled.pids)) == N_WORKERS
    assert idle.dump.rss == pickled.dump.rss == 0  # nothing dumped
    assert mapped.dump.processes == N_WORKERS and mapped.dump.rss >= 0.9 * N_WORKERS * ARRAY_BYTES
    assert 0.8 * ARRAY_BYTES <= mapped.dump.pss <= 1.2 * ARRAY_BYTES  # one file, mapped by both
    copies = joblib_memmap.workers_pss(report, "pickled", pickled.pids) - joblib_memmap.workers_pss(
        report, "idle", idle.pids)
    assert copies >= 0.9 * N_WORKERS * ARRAY_BYTES  # a copy in each worker


def test_a_killed_worker_is_reported_and_its_dump_removed(released):
    with pytest.raises(Exception, match="terminated") as crash:
        Parallel(n_jobs=N_WORKERS, backend="loky")(delayed(workers.kill_this_worker)(random_array())
                                                   for _ in range(N_WORKERS))
    assert type(crash.value).__name__ == "TerminatedWorkerError"
    assert joblib_memmap.bytes_in(joblib_memmap.joblib_folders(os.getpid())) == 0


def test_a_killed_parent_leaves_its_dump_while_its_workers_live_and_nothing_after(released):
    killed = joblib_memmap_crash.kill_parent_while_holding(ARRAY_BYTES // 8, N_WORKERS, settle_s=0.5)
    assert killed.bytes_left >= ARRAY_BYTES and killed.orphans["worker"] == N_WORKERS
    assert killed.folders_left >= 1  # the dump's (on /dev/shm, also the empty one its Parallel call made)
    assert killed.cleaned_after_s is not None  # loky's resource tracker removed it once the workers ended
    assert any("leaked file" in line for line in killed.tracker_said)
    assert not os.path.exists(killed.folder)
    assert not list(SHM_DIR.glob("sem.loky-*")) or all(
        str(os.getpid()) in path.name for path in SHM_DIR.glob("sem.loky-*"))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        joblib_memmap_crash.kill_parent_while_holding(0, N_WORKERS)
    with pytest.raises(ValueError, match="at least 1"):
        joblib_memmap_crash.kill_parent_while_holding(100, 0)


def test_the_joblib_strategy_runs_through_the_harness(released):
    array = random_array()
    assert Joblib.missing() is None
    needs = Joblib.needs(ARRAY_BYTES, N_WORKERS)
    assert needs.ram > ARRAY_BYTES and needs.shm + needs.disk >= ARRAY_BYTES
    measured = harness.measure(Joblib(array, N_WORKERS, contextlib.ExitStack()), repeat=1)
    assert measured.fan_out.median > 0 and measured.round_trip.median > 0 and measured.teardown_s > 0
    # while every worker holds it: one dump mapped by all (plus the parent's dump buffer), not a copy each
    assert 0.5 * ARRAY_BYTES <= measured.pss_added <= 1.5 * ARRAY_BYTES + 24 * MiB
    if joblib_memmap.joblib_temp_root().path == SHM_DIR:
        assert measured.shm_added >= 0.9 * ARRAY_BYTES
    assert live_children() == []  # teardown shut loky's workers down
