"""helpers.lessons.kernel_memory: the last cell of every lesson frees the lesson's arrays in this process."""

import pickle
from dataclasses import dataclass

import numpy as np
import pytest

from helpers.lessons import kernel_memory

MiB = 1 << 20


@dataclass
class Holder:
    array: np.ndarray


@pytest.mark.timeout(60)
def test_release_deletes_big_arrays_and_their_views_and_gives_the_pages_back():
    array = np.ones(64 * MiB // 8)  # every page written
    namespace = {"array": array, "chunks": np.array_split(array, 4), "view": array[::2], "small": np.ones(8),
                 "_hidden": np.ones(MiB), "text": "kept", "sizes": [1, 2]}
    del array
    released = kernel_memory.release(namespace)
    assert set(released.names) == {"array", "chunks", "view"}
    assert set(namespace) == {"small", "_hidden", "text", "sizes"}
    assert released.uss_before - released.uss_after >= 48 * MiB, released  # most of the 64 MiB came back
    assert released.array_bytes == 64 * MiB and released.kept_bytes == 0
    assert "all freed" in released.describe() and "array" in released.describe()


@pytest.mark.timeout(60)
def test_release_finds_arrays_behind_pickle_buffers_and_says_what_something_else_still_holds():
    """Protocol 5's out-of-band buffers keep their array alive; an array another object refers to stays."""
    sent, kept = np.ones(32 * MiB // 8), np.ones(16 * MiB // 8)
    buffers: list = []
    pickle.dumps(sent, protocol=5, buffer_callback=buffers.append)
    holder = Holder(kept)  # deleted too (an instance whose attribute holds an array) ...
    elsewhere = [holder]  # ... but not this list, which is not in the namespace: `kept` stays alive
    nested = {"whole": [np.ones(8 * MiB // 8)] * 2}  # a dict of lists of arrays: one array of 8 MiB
    namespace = {"buffers": buffers, "kept": kept, "holder": holder, "sent_by_way": nested, "n": 3}
    del sent, kept, buffers, nested, holder
    released = kernel_memory.release(namespace)
    assert set(released.names) == {"buffers", "kept", "holder", "sent_by_way"} and set(namespace) == {"n"}
    assert len(elsewhere) == 1 and released.array_bytes == 56 * MiB and released.kept_bytes == 16 * MiB
    assert "16 MiB stay, still referenced" in released.describe()


def test_release_needs_a_namespace():
    with pytest.raises(TypeError, match="globals"):
        kernel_memory.release(["array"])


def test_a_released_buffer_in_the_namespace_is_left_alone():
    """memoryview(released) raises ValueError: a released view holds no array and is not an error."""
    view = memoryview(np.ones(MiB // 8))
    view.release()
    namespace = {"view": view, "array": np.ones(16 * MiB // 8)}
    released = kernel_memory.release(namespace)
    assert released.names == ("array",) and "view" in namespace
