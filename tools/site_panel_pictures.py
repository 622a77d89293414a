"""Take the site's pictures of the lessons' ipywidgets panels (a static page cannot run a widget).

For each panel in ``tools.site_build.PANELS``: a JupyterLab on 127.0.0.1 (random token, temporary
folders) opens a one-cell notebook that runs the lesson's own panel code, and headless Chromium
(Debian's /usr/bin/chromium through Playwright, no browser download) saves the rendered panel as
``site/panels/<lesson>.png``, before anything is pressed. Commit the pictures; rerun when a panel changes.

    python -m tools.site_panel_pictures
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from tools.site_build import PANELS, SITE

CHROMIUM = os.environ.get("LAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
IMPORT = "from helpers.bench import widgets\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _notebook(code: str) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [{"cell_type": "code", "id": "panel", "metadata": {}, "execution_count": None,
                   "outputs": [], "source": IMPORT + code}]}


def take(lesson: str, code: str, picture: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="site-panel-"))
    root = folder / "root"
    root.mkdir()
    (root / "panel.ipynb").write_text(json.dumps(_notebook(code)))
    token, port = secrets.token_hex(16), _free_port()
    env = {**os.environ, **{f"JUPYTER{part}": str(folder / part.lower()) for part in
                            ("_CONFIG_DIR", "_RUNTIME_DIR", "LAB_WORKSPACES_DIR", "LAB_SETTINGS_DIR")}}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.news_url="]
    if os.geteuid() == 0:
        command.append("--allow-root")
    server = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"{url}/lab/tree/panel.ipynb?token={token}", timeout=120_000)
            page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=120_000)
            select_kernel = page.locator(".jp-Dialog button", has_text=re.compile("^Select$"))
            try:  # JupyterLab may ask which kernel to start for a notebook it has not seen
                select_kernel.wait_for(state="visible", timeout=15_000)
                select_kernel.click()
            except PlaywrightTimeout:
                pass
            page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=120_000)
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Run$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Run All Cells$")).first.click()
            panel = page.locator(".jp-OutputArea-output .widget-box").first
            try:
                panel.wait_for(state="visible", timeout=120_000)
            except PlaywrightTimeout:
                page.screenshot(path=str(folder.parent / "site-panel-failed.png"))
                raise SystemExit(f"{lesson}: the panel did not show; JupyterLab as it was: "
                                 f"{folder.parent / 'site-panel-failed.png'}") from None
            page.wait_for_timeout(1000)
            picture.parent.mkdir(parents=True, exist_ok=True)
            panel.screenshot(path=str(picture))
            browser.close()
        print(f"{lesson}: {picture.relative_to(SITE.parent)}")
    finally:
        os.killpg(server.pid, 2)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    for lesson, (code, picture, _) in PANELS.items():
        take(lesson, code, SITE / picture)
    return 0


if __name__ == "__main__":
    sys.exit(main())
