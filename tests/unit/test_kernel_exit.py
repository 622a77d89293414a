"""A lesson's kernel that JupyterLab shuts down ends through its exit handlers (helpers.measure.kernel_exit):
a real kernel, a real forkserver, the same shutdown request JupyterLab sends."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from helpers.measure import leftovers

USES_A_FORKSERVER = """
import multiprocessing as mp
from helpers.measure import config
{install}
with mp.get_context("forkserver").Pool(1) as pool:
    pool.apply(abs, (-1,))
print(mp.util.get_temp_dir())
"""


# In a process of its own: jupyter_client leaves threads running in the process that uses it (an
# event loop's), and a process-directed signal may then land on one of them (test_quiet_processes
# blocks SIGINT in the main thread and expects it held).
SHUT_DOWN_AS_JUPYTERLAB_DOES = """
import sys
from jupyter_client.manager import KernelManager

manager = KernelManager(kernel_name="python3")
manager.start_kernel()
client = manager.client()
client.start_channels()
printed = []
try:
    client.wait_for_ready(timeout=60)
    reply = client.execute_interactive(sys.argv[1], timeout=60, output_hook=lambda message: printed.append(
        message["content"].get("text", "")) if message["msg_type"] == "stream" else None)
    assert reply["content"]["status"] == "ok", reply["content"]
finally:
    client.stop_channels()
    manager.shutdown_kernel(now=False)  # a shutdown request, SIGTERM after 2.5 s, SIGKILL after 5 s
print("".join(printed).strip())
"""


def _run_then_shut_down(code: str) -> str:
    """Run ``code`` in a new kernel, shut the kernel down as JupyterLab does; what it printed."""
    done = subprocess.run([sys.executable, "-c", SHUT_DOWN_AS_JUPYTERLAB_DOES, code], capture_output=True,
                          text=True, timeout=110)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


# No "without the knobs cell" control here: whether a kernel without the handler leaves its folder
# depends on whether its children end within jupyter_client's 2.5 s (most runs left it; one CI run
# did not). The handler's effect is held instead by the slow-exit test below, which fails without it.
@pytest.mark.timeout(120)
def test_a_shut_down_kernel_removes_its_forkserver_folder_once_a_lesson_set_its_knobs():
    before = leftovers.multiprocessing_temp_dirs()
    install = 'config.knobs(default_method="forkserver")'
    folder = _run_then_shut_down(textwrap.dedent(USES_A_FORKSERVER.format(install=install)))
    left = leftovers.multiprocessing_temp_dirs() - before
    shutil.rmtree(folder, ignore_errors=True)  # only if the check below is about to fail
    assert folder.startswith(str(leftovers.temp_dir()))
    assert left == set()


FORKED_CHILD = """
import os, signal, sys
from helpers.measure import kernel_exit
assert kernel_exit.exit_normally_on_sigterm()
pid = os.fork()
if pid == 0:
    os._exit(0 if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL else 1)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status), flush=True)
os.kill(os.getpid(), signal.SIGTERM)
"""


def test_sigterm_exits_through_systemexit_here_and_keeps_its_default_in_a_forked_child():
    done = subprocess.run([sys.executable, "-c", FORKED_CHILD], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "child 0", done.stderr
    assert done.returncode == 128 + signal.SIGTERM  # sys.exit(143), not killed by the signal (-15)


SLOW_EXIT = """
import atexit, os, signal, sys, time
from multiprocessing import util
from helpers.measure import kernel_exit
assert kernel_exit.exit_normally_on_sigterm()
folder = util.get_temp_dir()  # multiprocessing's folder of this process, as a forkserver makes it
atexit.register(time.sleep, 60)  # an exit that outlasts any grace period: the SIGKILL comes first
print(folder, flush=True)  # only now: a SIGTERM that came earlier would find no slow exit to get ahead of
signal.pause()
"""


@pytest.mark.timeout(60)
def test_sigterm_removes_the_multiprocessing_folder_before_the_rest_of_a_slow_exit():
    """jupyter_client sends SIGKILL 2.5 s after SIGTERM; a kernel whose other exit handlers take
    longer (a busy CPU) must not leave its /tmp/pymp-* folder to that SIGKILL."""
    program = subprocess.Popen([sys.executable, "-c", SLOW_EXIT], stdout=subprocess.PIPE, text=True)
    try:
        folder = program.stdout.readline().strip()
        assert os.path.isdir(folder), folder
        program.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        while os.path.isdir(folder) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.isdir(folder), "the folder outlived SIGTERM"
        assert program.poll() is None  # still in its slow exit handler: only SIGKILL will end it
    finally:
        program.kill()
        program.communicate()  # reaps it and closes its stdout
        shutil.rmtree(folder, ignore_errors=True)
