"""tools/own_namespace: a command sees a /dev/shm, temp folders, home and network of its own, the
checkout where it was (also under /tmp), and nothing of it is left outside once it ends."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "own_namespace"
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None,
    reason="needs root, unshare and ip (iproute2)")

REPORT = r"""
import json, os, socket, tempfile
marker = os.environ["MARKER"]
open(os.path.join("/dev/shm", marker), "w").close()
open(os.path.join("/tmp", marker), "w").close()
open(os.path.join("/var/tmp", marker), "w").close()
statvfs = os.statvfs("/dev/shm")
port = int(os.environ["PORT"])
with socket.socket() as server:
    server.bind(("127.0.0.1", port))  # taken outside: free in here
print(json.dumps({"shm_bytes": statvfs.f_blocks * statvfs.f_frsize, "shm": sorted(os.listdir("/dev/shm")),
                  "home": os.path.expanduser("~"), "tmpdir": tempfile.gettempdir(),
                  "interfaces": sorted(name for _, name in socket.if_nameindex()), "cwd": os.getcwd(),
                  "checkout": os.path.exists("tools/own_namespace")}))
"""


def run_inside(cwd: Path, marker: str, port: int) -> dict:
    done = subprocess.run([str(SCRIPT), "--shm", "8m", sys.executable, "-c", REPORT], cwd=cwd,
                          env={**os.environ, "MARKER": marker, "PORT": str(port)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@needs_root
@pytest.mark.timeout(120)
def test_the_command_has_its_own_shm_temp_home_and_network_and_leaves_nothing_outside():
    marker = f"sal-own-namespace-{os.getpid()}"
    temp_before = set(os.listdir(tempfile.gettempdir()))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        facts = run_inside(ROOT, marker, taken.getsockname()[1])
    assert facts["shm_bytes"] == 8 * 2**20 and facts["shm"] == [marker]  # an empty tmpfs of its own
    assert facts["home"] == facts["tmpdir"] + "/home" and facts["tmpdir"] == "/tmp"
    assert facts["interfaces"] == ["lo"]
    assert facts["cwd"] == str(ROOT) and facts["checkout"]
    for folder in ("/dev/shm", "/tmp", "/var/tmp"):
        assert not (Path(folder) / marker).exists(), folder
    assert set(os.listdir(tempfile.gettempdir())) <= temp_before  # its private folder is gone


@needs_root
@pytest.mark.timeout(120)
def test_a_checkout_under_tmp_stays_at_its_path():
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="sal-checkout-") as folder:
        checkout = Path(folder) / "repo"
        (checkout / "tools").mkdir(parents=True)
        shutil.copy2(SCRIPT, checkout / "tools" / "own_namespace")
        facts = run_inside(checkout, f"sal-own-namespace-{os.getpid()}", 0)
        assert facts["cwd"] == str(checkout) and facts["checkout"]
        assert sorted(os.listdir(folder)) == ["repo"]  # nothing of the namespace's came out


@needs_root
@pytest.mark.timeout(120)
def test_keep_network_shares_the_hosts_network_and_nothing_else():
    probe = ("import os, socket; s = socket.socket(); port = int(os.environ['PORT'])\n"
             "try:\n    s.bind(('127.0.0.1', port)); print('free')\nexcept OSError:\n    print('taken')\n"
             "print(sorted(os.listdir('/dev/shm')))")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = subprocess.run([str(SCRIPT), "--keep-network", sys.executable, "-c", probe], cwd=ROOT,
                              env={**os.environ, "PORT": str(taken.getsockname()[1])},
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["taken", "[]"]  # the host's ports; a /dev/shm of its own


def test_without_a_command_it_says_how_to_call_it():
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "usage: tools/own_namespace" in done.stderr
