"""Every function a worker process runs in the lessons, tests and benchmarks.

They live here, in an importable module, because a child started with spawn or forkserver
(the default on Linux from Python 3.14, and on macOS spawn) imports the function by name:
a function defined in a notebook cell lives in ``__main__`` and cannot be found there.
"""

from __future__ import annotations

import builtins
import mmap
import os
import signal
import time
from multiprocessing import shared_memory

import numpy as np

PAGE = mmap.PAGESIZE


def sum_array(array: np.ndarray) -> float:
    """Sum every element (reads every page of the array)."""
    return float(np.sum(array))


def sum_slice(array: np.ndarray, start: int, stop: int) -> float:
    """Sum ``array[start:stop]``: one worker's share of a fan-out."""
    return float(np.sum(array[start:stop]))


def touch_pages(array: np.ndarray) -> int:
    """Read one byte of every page the array spans (maps them in); return the pages read."""
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        np.sum(array)  # reads every element, hence every page the view spans
        low, high = np.lib.array_utils.byte_bounds(array)
        return -(-(high - low) // PAGE)
    every_page = array.reshape(-1, order="A").view(np.uint8)[::PAGE]
    int(every_page.sum(dtype=np.uint64))
    return len(every_page)


def echo(value):
    """Return the argument unchanged: the round trip of a value through a pool."""
    return value


def worker_pid(_=None) -> int:
    """The worker's process id (to see how many distinct workers served a map)."""
    return os.getpid()


def array_nbytes(array: np.ndarray) -> int:
    """Bytes of the array the worker received (proves it arrived whole)."""
    return int(array.nbytes)


def hold_array(array: np.ndarray, ready, release) -> None:
    """Keep the received array (a private copy) resident until ``release`` is set.

    Sets ``ready`` once every page was read, so a monitor can measure the tree while it holds.
    """
    touch_pages(array)
    ready.set()
    release.wait()


def hold_shared_segment(name: str, ready, release) -> None:
    """Attach the named shared-memory segment, read every page, hold it until ``release`` is set."""
    segment = shared_memory.SharedMemory(name=name)
    try:
        view = np.ndarray((segment.size,), dtype=np.uint8, buffer=segment.buf)
        touch_pages(view)
        del view
        ready.set()
        release.wait()
    finally:
        segment.close()


def allocate_and_hold(n_bytes: int, ready, release) -> None:
    """Allocate and fill ``n_bytes`` of private memory, then hold it until ``release`` is set."""
    block = np.ones(n_bytes, dtype=np.uint8)
    ready.set()
    release.wait()
    del block


def pipe_sink(connection) -> None:
    """Receive byte messages and answer each with b'ok'; an empty message ends the loop."""
    try:
        while True:
            message = connection.recv_bytes()
            if not message:
                break
            connection.send_bytes(b"ok")
    finally:
        connection.close()


def pipe_sink_into_buffer(connection, n_bytes: int) -> None:
    """Receive messages of ``n_bytes`` straight into one preallocated buffer, answer b'ok'.

    ``recv_bytes_into`` ends in memory we own, but on Python 3.11 it first reads each message into
    a temporary buffer and copies it over, so one extra copy remains. An empty message ends the loop.
    """
    buffer = bytearray(n_bytes)
    try:
        while True:
            received = connection.recv_bytes_into(buffer)
            if received == 0:
                break
            connection.send_bytes(b"ok")
    finally:
        connection.close()


# --- Workers that reach a SharedNDArray by its handle (helpers.shm) -------------------------


def sum_shared(handle) -> float:
    """Attach the shared array a handle describes and sum it (reads every page, copies nothing)."""
    from helpers.shm import attach

    with attach(handle) as array:
        return float(np.sum(array))


def sum_shared_slice(handle, start: int, stop: int) -> float:
    """Sum ``[start:stop]`` of the shared array a handle describes: one worker's share."""
    from helpers.shm import attach

    with attach(handle) as array:
        return float(np.sum(array[start:stop]))


def fill_shared(handle, value) -> None:
    """Attach the shared array and set every element to ``value`` (the owner sees the change)."""
    from helpers.shm import attach

    with attach(handle) as array:
        array[...] = value


def shared_contents(handle) -> tuple[np.dtype, tuple[int, ...], bytes]:
    """The dtype, shape and C-order bytes of the shared array a handle describes, as this worker sees it.

    Bytes, not an array, come back: pickling an array may change it (NumPy pickles a big-endian
    array as a native-endian one), the raw bytes cannot change.
    """
    from helpers.shm import attach

    with attach(handle) as array:
        return array.dtype, array.shape, array.tobytes()


def attach_and_raise(handle) -> None:
    """Attach the shared array, then raise: the segment must survive a worker's exception."""
    from helpers.shm import attach

    with attach(handle) as array:
        array.sum()
        raise RuntimeError("worker failed while attached")


def hold_shared_array(handle, ready, release) -> None:
    """Attach, read every page, hold until ``release`` is set (killed here in the leak tests)."""
    from helpers.shm import attach

    with attach(handle) as array:
        touch_pages(array)
        ready.set()
        release.wait()


def sum_arrays_received(receiver, sender) -> None:
    """Answer every array read from ``receiver`` with its sum (a float) on ``sender``, until end of file.

    Each array comes after a small message naming how it is sent: one of
    ``helpers.pickling.TRANSFERS``.
    """
    from helpers import pickling

    try:
        while True:
            try:
                transfer = receiver.recv()
            except EOFError:
                break
            array = pickling.receive_array(receiver, transfer)
            sender.send(float(np.sum(array)))
            del array
    finally:
        receiver.close()
        sender.close()


def unpickle_error(payload: bytes) -> str:
    """Unpickle ``payload`` in this worker; return '' if that worked, else 'ErrorType: message'.

    Shows, without killing the worker, what a worker sees when a task names a function it
    cannot import (one defined in a notebook cell lives in the parent's ``__main__`` only).
    """
    import pickle

    try:
        pickle.loads(payload)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return ""


def time_loads_of_received(receiver, sender) -> None:
    """Unpickle every byte message read from ``receiver``; answer with the seconds ``loads`` took.

    The received bytes stay alive while they are unpickled, as in a pool's worker, so the new
    object lands in memory the allocator must find elsewhere. Ends at end of file.
    """
    import pickle
    import time

    try:
        while True:
            payload = receiver.recv_bytes()
            start = time.perf_counter()
            received = pickle.loads(payload)
            sender.send(time.perf_counter() - start)
            del received, payload
    except EOFError:
        pass
    finally:
        receiver.close()
        sender.close()


# --- Lesson 05: workers that map an array from a file by path (helpers.memmaps) -------------


def sum_memmap_slice(spec, start: int, stop: int) -> float:
    """Map the file a MemmapSpec describes read-only and sum ``[start:stop]`` (one worker's share)."""
    array = spec.open("r")
    try:
        return float(np.sum(array[start:stop]))
    finally:
        del array


def hold_memmap(spec, started, go, mapped, release) -> None:
    """Say ``started``; on ``go`` map the whole file read-only and read every page, say ``mapped``,
    then keep the mapping until ``release`` is set."""
    started.set()
    go.wait()
    array = spec.open("r")
    touch_pages(array)
    mapped.set()
    release.wait()
    del array


def write_through_memmap(spec, index: int, value: float, mode: str) -> float:
    """Map the file with ``mode`` ('r+' or 'c'), write ``value`` at ``index``, flush; return what
    this worker then reads at ``index`` (its own view of the write)."""
    array = spec.open(mode)
    try:
        array[index] = value
        array.flush()
        return float(array[index])
    finally:
        del array


# --- Lesson 06: workers that attach a SharedNDArray by handle (helpers.shm, helpers.shm_pitfalls) ---


def sum_segment_slice(name: str, n_items: int, start: int, stop: int) -> float:
    """Attach a stdlib ``SharedMemory`` segment by name, view ``n_items`` float64, sum ``[start:stop]``.

    The by-hand way: under spawn the worker shares its parent's resource tracker, so attaching
    by name here neither unlinks nor warns (an unrelated process would: see helpers.shm_pitfalls).
    """
    segment = shared_memory.SharedMemory(name=name)
    try:
        view = np.ndarray((n_items,), dtype=np.float64, buffer=segment.buf)
        total = float(np.sum(view[start:stop]))
        del view
        return total
    finally:
        segment.close()


def nansum_field_slice(handle, field: str, start: int, stop: int) -> float:
    """Attach a shared record array and return ``np.nansum`` of one numeric field over ``[start:stop]``."""
    from helpers.shm import attach

    with attach(handle) as records:
        return float(np.nansum(records[field][start:stop]))


def field_digest(handle, field: str) -> str:
    """SHA-256 (hex) of one field's bytes of a shared record array, as this worker reads them."""
    import hashlib

    from helpers.shm import attach

    with attach(handle) as records:
        return hashlib.sha256(np.ascontiguousarray(records[field]).tobytes()).hexdigest()


def attach_on_go_and_hold(handle, started, go, attached, release) -> None:
    """Say ``started`` (idle, nothing attached); on ``go`` attach the shared array and read every
    page, say ``attached``; hold the mapping until ``release`` is set."""
    from helpers.shm import attach

    started.set()
    go.wait()
    with attach(handle) as array:
        touch_pages(array)
        attached.set()
        release.wait()


# --- helpers.executor: tasks its tests and lesson 07 submit -------------------------------------


def raise_error(kind: str, message: str) -> None:
    """Raise the built-in exception named ``kind`` (e.g. "ValueError") with ``message``."""
    raise getattr(builtins, kind)(message)


def sleep_then_echo(seconds: float, value):
    """Wait ``seconds``, then return ``value`` unchanged."""
    time.sleep(seconds)
    return value


def kill_this_worker(_=None) -> None:
    """SIGKILL the process running this task (a crashed worker, for tests)."""
    os.kill(os.getpid(), signal.SIGKILL)


def fill_in_place(array: np.ndarray, value) -> None:
    """Write ``value`` into every item of ``array`` (visible to the caller only if it is shared)."""
    array[...] = value


def describe_array(array: np.ndarray) -> dict:
    """Shape, dtype, memory order and writability of an array as the worker sees it."""
    return {"shape": array.shape, "dtype": array.dtype, "c_contiguous": array.flags.c_contiguous,
            "f_contiguous": array.flags.f_contiguous, "writeable": array.flags.writeable}


def plus_one_and_slice(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A new array (``array + 1``) and a view of the argument (its second half), as a pair."""
    return array + 1, array[array.shape[0] // 2:]


# --- Lesson 07: tasks the shared-memory executor lesson submits (helpers.executor_demos) -------


def call_on_handle(fn, handle, *args):
    """Worker side of ``executor_demos.submit_with_handles``: attach the shared array by its
    handle (no copy) and return ``fn(array, *args)``."""
    from helpers.shm import attach

    with attach(handle) as array:
        return fn(array, *args)


_hold_signals: tuple | None = None  # (ready semaphore, release event), set by remember_hold_signals


def remember_hold_signals(ready, release) -> None:
    """Pool initializer: keep the semaphore a task releases once it holds its argument, and the
    event that ends the hold (synchronization objects cross only when a worker starts)."""
    global _hold_signals
    _hold_signals = (ready, release)


def hold_argument(array: np.ndarray) -> int:
    """Read every page of ``array``, signal that it is held, keep it until released; return its bytes."""
    ready, release = _hold_signals
    touch_pages(array)
    ready.release()
    release.wait()
    return int(array.nbytes)


def announce_then_sleep(array: np.ndarray, seconds: float) -> int:
    """Write 'running <pid>' to stdout, then sleep ``seconds`` holding ``array``: a task caught mid-flight.

    One ``os.write`` per line: lines of several workers sharing a pipe never interleave.
    """
    os.write(1, f"running {os.getpid()}\n".encode())
    time.sleep(seconds)
    return int(array.nbytes)



# --- Lesson 08: pickler reductions (helpers.reducers, helpers.reducer_timing, helpers.reducer_demos) ---


def echo_arrays(connection, how: str | None) -> None:
    """Enable the reduction ``how`` names ('torch', 'shared_memory' or None: plain pickling), say
    'ready', then send every object received straight back; stop at None or end of file. Ctrl-C
    is left to the parent, which stops this worker in order."""
    from helpers import reducers

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if how is not None:
            reducers.share_arrays(how)
        connection.send("ready")
        while True:
            try:
                item = connection.recv()
            except EOFError:
                break
            if item is None:
                break
            connection.send(item)
            del item
    finally:
        connection.close()


def echo_queue(inbox, outbox, how: str | None) -> None:
    """Enable the reduction ``how`` names, then put every item got from ``inbox`` on ``outbox``
    (received arrays go back through shared memory, zero-copy); stop at None."""
    from helpers import reducers

    if how is not None:
        reducers.share_arrays(how)
    while (item := inbox.get()) is not None:
        outbox.put(item)
        del item
    outbox.close()
    outbox.join_thread()  # every item is in the pipe before this process leaves


def receive_and_hold(inbox, ready, release) -> None:
    """Get one item from ``inbox``, read every page of each array in it, set ``ready``, hold it
    until ``release`` is set (killed here in the leak tests)."""
    item = inbox.get()
    for array in item if isinstance(item, list) else [item]:
        touch_pages(array)
    ready.set()
    release.wait()


def keep_received_arrays(receiver, reporter, nofile_limit: int, n_arrays: int, n_rounds: int) -> None:
    """Lower this process's open-file limit to ``nofile_limit``; then, ``n_rounds`` times, receive
    ``n_arrays`` arrays from ``receiver`` keeping every one, until an error stops it. After each
    round report on ``reporter`` (arrays kept, 'Type: message' of that error or '', torch_* names
    in /dev/shm while holding them), wait for an answer, let them go, read what is left of the round."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile_limit, hard))
    for _ in range(n_rounds):
        kept, error, read = [], "", 0
        try:
            while read < n_arrays:
                read += 1
                kept.append(receiver.recv())
        except Exception as caught:
            error = f"{type(caught).__name__}: {caught}"
        torch_names = sum(name.startswith("torch_") for name in os.listdir("/dev/shm"))
        reporter.send((len(kept), error, torch_names))
        reporter.recv()
        del kept
        for _ in range(n_arrays - read):
            receiver.recv()


def send_torch_shared_arrays(sender, next_round, release, strategies: list[str], n_arrays: int,
                             n_items: int) -> None:
    """Share arrays the torch way and send ``n_arrays`` new arrays of ``n_items`` float64 on
    ``sender`` with each of torch's sharing ``strategies`` in turn ('file_descriptor',
    'file_system'), each round after the first once ``next_round`` (a semaphore) is released; stay
    alive (receivers fetch torch's file descriptors from this process) until ``release`` is set."""
    import torch.multiprocessing

    from helpers import reducers

    reducers.share_arrays_with_torch()
    rng = np.random.default_rng(0)
    for round_number, strategy in enumerate(strategies):
        if round_number:
            next_round.acquire()
        torch.multiprocessing.set_sharing_strategy(strategy)
        for _ in range(n_arrays):
            sender.send(rng.random(n_items))
    release.wait()


# --- helpers.transport_bench: tasks the transport benchmark submits (python -m helpers.bench) ---


def plus_one(array: np.ndarray) -> np.ndarray:
    """A new array of the same size: ``array + 1`` (the worker allocates and fills fresh pages)."""
    return array + 1


# --- helpers.strategies: every strategy's workers reach the array, then sum, hold or return it ---
# A task names how its worker reaches the array (a ``reach_*`` function: a context manager yielding
# the worker's view of it, or None) and what to reach it with (the array itself, a handle, a path
# ...). The same four tasks then serve every strategy: the Pools, the executor and Ray's workers.


def reach_nothing(_=None):
    """Reach nothing: what an idle worker holds (the baseline of a memory measurement)."""
    from contextlib import nullcontext

    return nullcontext(None)


def reach_argument(array):
    """The array came with the task (pickled, reduced into shared memory, or from Ray's store)."""
    from contextlib import nullcontext

    return nullcontext(array)


def reach_installed(_=None):
    """The array a Pool initializer installed in this worker (``helpers.sendonce.install``)."""
    from contextlib import nullcontext

    from helpers import sendonce

    return nullcontext(sendonce.installed())


def reach_inherited(_=None):
    """The array this forked worker inherited as ``helpers.cow.ARRAY`` (copy-on-write pages)."""
    from contextlib import nullcontext

    from helpers import cow

    if cow.ARRAY is None:
        raise RuntimeError(f"helpers.cow.ARRAY is None in process {os.getpid()}: only a worker forked "
                           "inside cow.installed(array=...) inherits it")
    return nullcontext(cow.ARRAY)


_strategy_arrays: dict[str, np.ndarray] = {}  # sharedctypes views set by init_sharedctypes_strategy


def init_sharedctypes_strategy(shared, result) -> None:
    """Pool initializer: keep NumPy views of two RawArrays received at start-up (the array and the
    buffer a round trip writes its result into)."""
    from helpers.sharedctypes_demo import as_array

    _strategy_arrays["array"] = as_array(shared)
    _strategy_arrays["result"] = as_array(result)


def reach_sharedctypes(_=None):
    """This worker's view of the RawArray its initializer received."""
    from contextlib import nullcontext

    return nullcontext(_strategy_arrays["array"])


def reach_sharedctypes_result(_=None):
    """This worker's view of the RawArray a round trip writes its result into."""
    from contextlib import nullcontext

    return nullcontext(_strategy_arrays["result"])


def reach_memmap(spec):
    """Map the file a ``helpers.memmaps.MemmapSpec`` describes, read-only, for the block."""
    return _mapped(spec, "r")


def reach_memmap_for_writing(spec):
    """Map the file a MemmapSpec describes read-write (writes land in the shared page cache)."""
    return _mapped(spec, "r+")


def _mapped(spec, mode: str):
    from contextlib import contextmanager

    @contextmanager
    def mapping():
        array = spec.open(mode)
        try:
            yield array
        finally:
            del array

    return mapping()


def reach_shared(handle):
    """Attach the SharedNDArray a handle describes for the block (no copy; never unlinks)."""
    from helpers.shm import attach

    return attach(handle)


def reach_manager(proxy):
    """Read the array from a Manager's dict proxy: the manager pickles it to this worker (a copy)."""
    from contextlib import nullcontext

    return nullcontext(proxy["array"])


def reach_manager_result(out):
    """A private buffer for ``(proxy, shape)``; when the block ends it is stored as ``proxy['result']``
    (pickled to the manager), where the caller reads it."""
    from contextlib import contextmanager

    proxy, shape = out

    @contextmanager
    def buffer():
        result = np.empty(shape)
        yield result
        proxy["result"] = result

    return buffer()


def strategy_sum(reach, arg) -> float:
    """Sum the whole array this worker reaches with ``reach(arg)`` (reads every page)."""
    with reach(arg) as array:
        total = float(np.sum(array))
        del array
    return total


def strategy_hold(reach, arg, folder: str, label: str) -> int:
    """Reach the array, read every page, create ``folder/<label>-ready-*``, then hold it until the
    file ``folder/<label>-release`` exists (files, not multiprocessing events: Ray's workers hold
    too). Returns the bytes held (0 when holding nothing)."""
    import secrets

    with reach(arg) as array:
        if array is not None:
            touch_pages(array)
        held = 0 if array is None else int(array.nbytes)
        ready = os.path.join(folder, f"{label}-ready-{os.getpid()}-{secrets.token_hex(4)}")
        with open(ready, "x"):
            pass
        release = os.path.join(folder, f"{label}-release")
        while not os.path.exists(release):
            time.sleep(0.01)
        del array
    return held


def strategy_plus_one(reach, arg) -> np.ndarray:
    """Return a new same-size array, ``array + 1``, the way this worker's mechanism sends results."""
    with reach(arg) as array:
        result = array + 1.0
        del array
    return result


def strategy_plus_one_into(reach, arg, reach_out, out) -> None:
    """Write ``array + 1`` into the result buffer ``reach_out(out)`` gives (shared memory, a mapped
    file, a manager): the caller reads it there."""
    with reach(arg) as array, reach_out(out) as result:
        np.add(array, 1.0, out=result)
        del array, result
