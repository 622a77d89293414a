"""The browser run as a whole leaves nothing behind: no JupyterLab, kernel, segment or temp folder."""

import gc

import pytest

from helpers.measure import leftovers


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind_by_the_browser_run():
    before = leftovers.snapshot()
    yield
    gc.collect()
    left = leftovers.new_since(before)
    assert not left, f"the browser run left these behind: {left}"
