"""sweep() removes only what it can tell is dead: a live segment made in another pid namespace that
shares this /dev/shm (a container with --ipc=host, a pod) is left alone, even when its creator's pid
is dead here; and a killed worker's segment it removes is struck from this program's resource
tracker, which then does not warn of a leak at exit. Real processes, a real pid namespace."""

import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from sharedarrays import sweep
from sharedarrays.room import SHM_DIR

# In a new pid namespace (pids start at 1 there), the process that creates the segment is given
# the pid ``dead_here``, a pid of a process that has ended in the test's namespace.
OTHER_NAMESPACE = """
import os, sys
dead_here = int(sys.argv[1])
with open("/proc/sys/kernel/ns_last_pid", "w") as last:
    last.write(str(dead_here - 1))
child = os.fork()
if child == 0:
    from sharedarrays import SharedNDArray
    assert os.getpid() == dead_here, (os.getpid(), dead_here)
    with SharedNDArray.create(1024) as shared:
        print(shared.name, flush=True)
        sys.stdin.read()  # hold the segment until the test closes our stdin
    os._exit(0)
os.waitpid(child, 0)
"""


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="needs root and unshare for a pid namespace")
@pytest.mark.timeout(60)
def test_a_live_segment_of_another_pid_namespace_is_left_alone():
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    command = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
               textwrap.dedent(OTHER_NAMESPACE), str(ended.pid)]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as holder:
        try:
            name = holder.stdout.readline().strip()
            assert name, holder.stderr.read()
            assert name.startswith(f"sal_{ended.pid}_ns")
            assert name not in sweep()
            assert (SHM_DIR / name).exists()
        finally:
            holder.stdin.close()
            holder.wait(timeout=30)
    assert not (SHM_DIR / name).exists()


KILLED_WORKER = """
import multiprocessing as mp, os, signal, warnings
from sharedarrays import sweep

def make_a_segment_and_die(connection):
    from sharedarrays import SharedNDArray
    shared = SharedNDArray.create(4096)  # registered with the program's resource tracker
    connection.send(shared.name)
    os.kill(os.getpid(), signal.SIGKILL)

if __name__ == "__main__":
    context = mp.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    worker = context.Process(target=make_a_segment_and_die, args=(sender,))
    worker.start()
    assert receiver.poll(60), "the worker sent no name"
    name = receiver.recv()
    worker.join()
    assert worker.exitcode == -signal.SIGKILL
    assert name in sweep(), "sweep() did not remove the killed worker's segment"
    print("swept", name, flush=True)
"""


@pytest.mark.timeout(90)
def test_a_swept_segment_of_a_killed_worker_is_not_reported_as_leaked_at_exit(tmp_path):
    program = tmp_path / "killed_worker.py"
    program.write_text(textwrap.dedent(KILLED_WORKER))
    run = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=80,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "swept sal_" in run.stdout
    assert "leaked shared_memory" not in run.stderr, run.stderr
    assert "Traceback" not in run.stderr, run.stderr


# A semaphore that no process maps any more: made in a child (as a pool's queue lock is, under spawn),
# which exits without unlinking it (a killed pool's resource tracker cannot unlink it either).
ORPHAN_SEMAPHORE = """
import _multiprocessing, multiprocessing.synchronize as synchronize, os, tempfile
name = "/mp-" + os.urandom(6).hex()  # how multiprocessing names its semaphores
_multiprocessing.SemLock(synchronize.SEMAPHORE, 1, 1, name, False)  # unlink=False: the file stays
print("sem." + name.lstrip("/"), flush=True)
os._exit(0)  # nothing of this process cleans up
"""


def _orphan_semaphore() -> str:
    made = subprocess.run([sys.executable, "-c", textwrap.dedent(ORPHAN_SEMAPHORE)], capture_output=True,
                          text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    name = made.stdout.strip()
    assert (SHM_DIR / name).exists()
    return name


@pytest.mark.timeout(60)
def test_semaphores_are_removed_only_when_asked():
    name = _orphan_semaphore()
    try:
        assert name not in sweep() and (SHM_DIR / name).exists()
        assert name in sweep(semaphores=True) and not (SHM_DIR / name).exists()
    finally:
        (SHM_DIR / name).unlink(missing_ok=True)


# A pool's lock alive in this (the host's) namespace, swept from a container of its own: a new pid
# namespace whose /proc shows only its own processes, sharing this /dev/shm (a pod, --ipc=host).
SWEEP_IN_A_CONTAINER = """
import json, os, sys
from sharedarrays import sweep
print(json.dumps({"pids_seen": len([p for p in os.listdir("/proc") if p.isdigit()]), "removed": sweep()}))
"""


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="needs root and unshare for a pid namespace")
@pytest.mark.timeout(60)
def test_a_live_pools_semaphore_survives_a_sweep_from_another_pid_namespace():
    lock = mp.get_context("spawn").Lock()  # what a spawn pool's queues hold: a sem.mp-* file
    name = "sem." + lock._semlock.name.lstrip("/")
    command = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
               textwrap.dedent(SWEEP_IN_A_CONTAINER)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["pids_seen"] <= 3  # the container sees its own processes only: not this one
    assert name not in facts["removed"] and (SHM_DIR / name).exists()
    with lock:  # still usable
        pass


@pytest.mark.timeout(60)
def test_the_command_line_sweep_runs_without_numpy():
    name = _orphan_semaphore()
    no_numpy = ("import runpy, sys; sys.modules['numpy'] = None; sys.argv = ['sharedarrays', *sys.argv[1:]]; "
                "runpy.run_module('sharedarrays', run_name='__main__')")
    try:
        kept = subprocess.run([sys.executable, "-c", no_numpy, "sweep"], capture_output=True, text=True,
                              timeout=30)
        assert kept.returncode == 0, kept.stderr
        assert name not in kept.stdout and "sweep: removed" in kept.stderr
        removed = subprocess.run([sys.executable, "-c", no_numpy, "sweep", "--semaphores"],
                                 capture_output=True, text=True, timeout=30)
        assert removed.returncode == 0, removed.stderr
        assert name in removed.stdout.split() and not (SHM_DIR / name).exists()
    finally:
        (SHM_DIR / name).unlink(missing_ok=True)


def test_importing_the_library_imports_nothing_else_until_a_name_is_used():
    probe = ("import sys; import sharedarrays; before = 'numpy' in sys.modules; "
             "sharedarrays.SharedNDArray; print(before, 'numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("False True"), done.stdout
