"""The course's website (make site), tested like the lessons: built with every warning an error, then
every page opened in headless Chromium (Debian's /usr/bin/chromium through Playwright, no browser
download), served from 127.0.0.1 with every other address refused (the site must work offline).

A page fails on a console error, an image that did not load, a request to the network, an internal
link or anchor that does not resolve, an external link that is not a well-formed URL, or an axe-core
violation of serious or critical impact (axe-core as axe-playwright-python ships it, injected into
the page); a lesson page also on a missing launch link to that lesson on Binder, a download link
that does not give the stored notebook, missing reading and run times, a solution left open, a panel
without its picture, or an output image that dark mode does not put on white. The pages are inspected
a few at a time, each in its own tab, and each page's problems are reported by its own test.
Screenshots of the landing page and of lesson 00 land in tests/site/screenshots/ (not in git).
"""

from __future__ import annotations

import asyncio
import functools
import html
import http.server
import importlib.resources
import os
import re
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from tools import site_build

ROOT = Path(__file__).resolve().parents[2]
HTML = site_build.HTML
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = os.environ.get("LAB_CHROMIUM", "/usr/bin/chromium")
# As tests/browser starts it (no sandbox as root, no GPU), and every host but 127.0.0.1 unresolvable: a
# page that asks the network for anything fails to load it and says so on the console.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
LESSONS = [path.stem for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
PAGES = ["index", "results", "machine", "api", "genindex", "py-modindex", "search"] + [
    f"notebooks/{lesson}" for lesson in LESSONS]
BLOCKING = ("serious", "critical")
AXE_JS = importlib.resources.files("axe_playwright_python") / "axe.min.js"
AXE_URL = "/_axe_core/axe.min.js"  # served beside the site by the test's server, never part of it
LINKS_JS = """() => Array.from(document.querySelectorAll('a[href]'))
    .map(a => [a.getAttribute('href'), a.href])"""
BROKEN_IMAGES_JS = """() => Array.from(document.images)
    .filter(img => img.loading !== 'lazy' || img.complete)
    .filter(img => !img.complete || img.naturalWidth === 0).map(img => img.currentSrc || img.src)"""
DECODE_IMAGES_JS = "() => Promise.all(Array.from(document.images).map(i => i.decode().catch(() => 0)))"
# Every rule on the whole page, but colour contrast inside highlighted code is judged on one sample of
# each style there (the first block of each language, and the first token of each class in each block
# elsewhere): a token's contrast is its class's colour on its block's background, the same wherever it
# stands, and checking every token took two thirds of axe's time on a lesson page. Violations only,
# without CSS selectors for every node checked (a fifth of the rest): each names its rule and the start
# of the first nodes' HTML.
AXE_RUN_JS = """async () => {
    const seen = new Set();
    for (const block of document.querySelectorAll('div.highlight')) {
        const language = block.parentElement.className;
        if (!seen.has(language)) { seen.add(language); block.setAttribute('data-axe-sample', ''); }
        for (const token of block.querySelectorAll('pre span[class]')) {
            const key = language + ' ' + token.className;
            if (!seen.has(key)) { seen.add(key); token.setAttribute('data-axe-sample', ''); }
        }
    }
    const options = {resultTypes: ['violations'], selectors: false, ancestry: false, xpath: false};
    const runs = [
        [document, {...options, rules: {'color-contrast': {enabled: false}}}],
        [{exclude: [['div.highlight']]}, {...options, runOnly: ['color-contrast']}],
    ];
    if (seen.size) runs.push([{include: [['[data-axe-sample]']]}, {...options, runOnly: ['color-contrast']}]);
    const found = [];
    for (const [context, runOptions] of runs) {
        for (const v of (await axe.run(context, runOptions)).violations) {
            found.push({id: v.id, impact: v.impact, help: v.help,
                        nodes: v.nodes.slice(0, 3).map(n => n.html.slice(0, 120))});
        }
    }
    return found;
}"""


@pytest.fixture(scope="module")
def build():
    """The site, built as `make site` builds it, with -W --keep-going (a warning fails it)."""
    result = subprocess.run([sys.executable, "-m", "tools.site_build", "--check"], cwd=ROOT,
                            capture_output=True, text=True)
    return result


@pytest.fixture(scope="module")
def site(build):
    if build.returncode != 0:
        pytest.fail(f"the site did not build:\n{build.stdout}\n{build.stderr}", pytrace=False)
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def reports(site):
    """Every page inspected in headless Chromium, a few at a time (axe-core's colour-contrast rule takes
    seconds on a lesson page and runs in the page's own renderer process): page -> its problems."""
    return asyncio.run(_inspect_every_page(site))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """The built site, and axe-core at AXE_URL (one script the browser caches and compiles once)."""

    def translate_path(self, path: str) -> str:
        if urllib.parse.urlsplit(path).path == AXE_URL:
            return str(AXE_JS)
        return super().translate_path(path)

    def log_message(self, *args) -> None:
        pass


@functools.cache
def _ids_in(page_file: Path) -> frozenset[str]:
    return frozenset(html.unescape(i) for i in re.findall(r'\bid="([^"]+)"', page_file.read_text()))


def _file_of(site: str, url: str) -> Path | None:
    path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)[len(urllib.parse.urlsplit(site).path):]
    target = HTML / path
    if target.is_dir():
        target = target / "index.html"
    return target if target.is_file() else None


def _link_problems(site: str, links: list[list[str]]) -> list[str]:
    problems = []
    for written, resolved in links:
        parts = urllib.parse.urlsplit(resolved)
        if resolved.startswith(site):
            target = _file_of(site, resolved)
            if target is None:
                problems.append(f"internal link {written!r}: no such file")
            elif parts.fragment and target.suffix == ".html" and \
                    urllib.parse.unquote(parts.fragment) not in _ids_in(target):
                problems.append(f"internal link {written!r}: no anchor #{parts.fragment} in {target.name}")
        elif parts.scheme in ("http", "https"):
            if not parts.netloc or " " in resolved or "." not in parts.netloc:
                problems.append(f"external link {written!r} is not a well-formed URL")
        elif parts.scheme not in ("mailto", "javascript"):
            problems.append(f"link {written!r}: unexpected scheme {parts.scheme!r}")
    return problems


async def _lesson_problems(page, site: str, lesson: str) -> list[str]:
    """What a lesson page lacks: its launch and download links, its times, a collapsed solution."""
    problems = []
    launch = page.locator("a.lesson-launch")
    if await launch.count() != 1 or await launch.get_attribute("href") != site_build.binder_url(lesson):
        problems.append(f"no link under the title to {site_build.binder_url(lesson)}")
    download = page.locator("a.lesson-download")
    target = None
    if await download.count() == 1:
        target = _file_of(site, urllib.parse.urljoin(page.url, await download.get_attribute("href")))
    if target is None or target.read_bytes() != (ROOT / "notebooks" / f"{lesson}.ipynb").read_bytes():
        problems.append(f"no link under the title that downloads notebooks/{lesson}.ipynb as stored")
    times = page.locator(".lesson-times")
    if await times.count() != 1 or not re.fullmatch(r"\d+ min read, \d+ s run", await times.inner_text()):
        problems.append("no reading and run time under the title")
    if "Reading time: about" not in await page.locator("article").inner_text():
        problems.append("the notebook's header line (reading and run time) is missing")
    solutions = page.locator("article details", has=page.locator("summary", has_text="olution"))
    if await solutions.count() == 0:
        problems.append("no exercise solution in a <details> block")
    for solution in await solutions.all():  # collapsed, as in the notebook
        if await solution.get_attribute("open") is not None or await solution.locator("p").first.is_visible():
            problems.append("a solution is open on the page")
    if lesson in site_build.PANELS:
        figure = page.locator("figure.panel-picture")
        if await figure.count() != 1 or "runs in JupyterLab" not in await figure.inner_text():
            problems.append("no picture of its ipywidgets panel saying that the panel runs in JupyterLab")
    if await page.locator("div.cell_output img").count():
        await page.evaluate("() => document.documentElement.setAttribute('data-theme', 'dark')")
        background = await page.locator("div.cell_output img").first.evaluate(
            "img => getComputedStyle(img).backgroundColor")
        if background != "rgb(255, 255, 255)":
            problems.append(f"in dark mode an output image is on {background}, not on white")
        await page.evaluate("() => document.documentElement.setAttribute('data-theme', 'light')")
    return problems


async def _inspect(browser, site: str, page_name: str) -> list[str]:
    """Load the page in a tab of ``browser`` (one context: the theme's scripts come from its cache);
    return what is wrong with the page."""
    page = await browser.new_page()
    problems: list[str] = []
    watch = problems.append
    page.on("console", lambda msg: msg.type == "error" and watch(f"console: {msg.text}"))
    page.on("pageerror", lambda error: watch(f"script error: {error}"))
    page.on("response", lambda response: response.status >= 400 and watch(
        f"{response.status} for {response.url}"))
    page.on("request", lambda request: request.url.startswith((site, "data:")) or
            watch(f"asked the network for {request.url}"))
    try:
        await page.goto(f"{site}{page_name}.html", wait_until="load", timeout=60_000)
        await page.evaluate(DECODE_IMAGES_JS)
        problems += [f"image did not load: {src}" for src in await page.evaluate(BROKEN_IMAGES_JS)]
        problems += _link_problems(site, await page.evaluate(LINKS_JS))
        if page_name.startswith("notebooks/"):
            problems += await _lesson_problems(page, site, page_name.removeprefix("notebooks/"))
        if page_name in ("index", f"notebooks/{LESSONS[0]}"):
            SCREENSHOTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(SCREENSHOTS / f"{page_name.replace('/', '_')}.png"))
        # What the page did until now is the site's; axe-core's own fetches are not (it re-reads each
        # stylesheet's @import relative to the page, not to the stylesheet: a 404 for /basic.css).
        problems = list(problems)
        await page.add_script_tag(url=AXE_URL)
        for violation in await page.evaluate(AXE_RUN_JS):
            if violation["impact"] in BLOCKING:
                problems.append(f"axe {violation['impact']}: {violation['id']} ({violation['help']}) "
                                f"at {violation['nodes']}")
    finally:
        await page.close()
    return problems


async def _inspect_every_page(site: str) -> dict[str, list[str]]:
    at_once = asyncio.Semaphore(max(2, os.cpu_count() or 1))

    async def one(browser, page_name: str) -> list[str]:
        async with at_once:
            return await _inspect(browser, site, page_name)

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            found = await asyncio.gather(*(one(context, name) for name in PAGES))
        finally:
            await browser.close()
    return dict(zip(PAGES, found, strict=True))


def test_the_site_builds_without_a_warning(build):
    output = build.stdout + build.stderr
    assert build.returncode == 0, output
    assert "WARNING" not in output and "Warning" not in output, output


def test_every_built_page_is_tested(site):
    built = {str(path.relative_to(HTML).with_suffix("")) for path in HTML.rglob("*.html")
             if not path.relative_to(HTML).parts[0].startswith("_")}
    assert built == set(PAGES)


@pytest.mark.timeout(400)  # the first one inspects every page
@pytest.mark.parametrize("page_name", PAGES)
def test_the_page_loads_links_and_is_accessible(reports, page_name):
    assert not reports[page_name], f"{page_name}:\n" + "\n".join(reports[page_name])


def test_the_landing_page_lists_every_lesson_with_its_times(site):
    landing = (HTML / "index.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", landing))
    for lesson in site_build.lessons():
        assert f'href="notebooks/{lesson["name"]}.html"' in landing, lesson["name"]
        assert lesson["times"] in text, lesson["name"]
    assert "make lab" in text and "make test" in text
