"""A real JupyterLab for the browser tests: started on 127.0.0.1 with a random token over a
temporary copy of ``notebooks/``, and always stopped (its kernels with it).

The copy keeps the lessons in git untouched: running them in the browser writes outputs and
checkpoints into the copy only. The folder's name starts with ``sal-`` so the leak check knows it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from helpers.measure.leftovers import TEMP_PREFIX

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 90


@dataclass(frozen=True)
class Lab:
    url: str  # http://127.0.0.1:PORT
    token: str
    root: Path  # the copy of notebooks/ the server shows
    pid: int  # the server's process (its kernels are its children)

    def shut_down_kernels(self, notebook: str | None = None) -> None:
        """End every session (and its kernel) the server runs, or only ``notebook``'s (a file name), the
        way Kernel > Shut Down Kernel does."""
        with urllib.request.urlopen(f"{self.url}/api/sessions?token={self.token}", timeout=10) as answer:
            sessions = json.load(answer)
        for session in sessions:
            if notebook is not None and Path(session["path"]).name != notebook:
                continue
            request = urllib.request.Request(f"{self.url}/api/sessions/{session['id']}?token={self.token}",
                                             method="DELETE")
            urllib.request.urlopen(request, timeout=30).close()

    def notebook_url(self, name: str) -> str:
        """The address that opens notebook ``name`` in JupyterLab, logged in by the token."""
        return f"{self.url}/lab/tree/{name}?token={self.token}&reset"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_up(url: str, token: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {server.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    raise RuntimeError(f"jupyter lab did not answer within {START_SECONDS} s: {log.read_text()[-2000:]}")


@contextmanager
def running_lab(extra_env: dict[str, str] | None = None, cgroup=None, cpus: set[int] | None = None):
    """Start JupyterLab over a copy of notebooks/; yield a Lab; stop it and remove the copy.

    ``cgroup`` (a ``memory_cgroup.MemoryCgroup``) and ``cpus`` confine the server, and so every
    kernel and worker it starts, the way a Binder container does."""
    folder = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}lab-"))
    root = folder / "notebooks"
    shutil.copytree(ROOT / "notebooks", root)
    token, port = secrets.token_hex(16), _free_port()
    log = folder / "server.log"
    # Every cell in the DOM (no windowed rendering), so the test sees every prompt and output.
    tracker = folder / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text('{"windowingMode": "none"}')
    news = folder / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')  # no pop-up over the screenshots
    env = {**os.environ, **(extra_env or {}), "JUPYTER_CONFIG_DIR": str(folder / "config"),
           "JUPYTER_RUNTIME_DIR": str(folder / "runtime"), "JUPYTERLAB_WORKSPACES_DIR": str(folder / "ws"),
           "JUPYTERLAB_SETTINGS_DIR": str(folder / "settings")}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
               "--ServerApp.open_browser=False", "--LabApp.news_url=", "--LabApp.check_for_updates_class="
               "jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    def confine() -> None:  # runs in the server's process before it starts Jupyter
        if cgroup is not None:
            cgroup.add(os.getpid())
        if cpus:
            os.sched_setaffinity(0, cpus)

    with open(log, "w") as log_file:
        server = subprocess.Popen(command, cwd=root, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                                  start_new_session=True, preexec_fn=confine)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_up(url, token, server, log)
        yield Lab(url, token, root, server.pid)
    finally:
        _stop(server)
        shutil.rmtree(folder, ignore_errors=True)


def _stop(server: subprocess.Popen) -> None:
    """SIGINT twice is how JupyterLab shuts down with its kernels; kill the group if it lingers."""
    if server.poll() is None:
        for _ in range(2):
            try:
                server.send_signal(signal.SIGINT)
            except ProcessLookupError:
                break
            time.sleep(0.3)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(server.pid, signal.SIGKILL)  # the kernels and anything they started
    except ProcessLookupError:
        pass
    server.wait()
