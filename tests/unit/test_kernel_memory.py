"""helpers.lessons.kernel_memory: the last cell of every lesson frees the lesson's arrays in this process."""

import numpy as np
import pytest

from helpers.lessons import kernel_memory

MiB = 1 << 20


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
    assert "holds" in released.describe() and "array" in released.describe()


def test_release_needs_a_namespace():
    with pytest.raises(TypeError, match="globals"):
        kernel_memory.release(["array"])
