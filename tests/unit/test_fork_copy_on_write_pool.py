"""Lesson 04's pool idiom: a fork Pool created after the module global is set inherits the array;
one created before it has none, and its task says so."""

import multiprocessing

import numpy as np
import pytest

from helpers.lessons import fork_copy_on_write

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not fork_copy_on_write.has_fork(), reason="this platform cannot fork")]
PARTS = [(0, 500), (500, 1000)]


def test_a_pool_created_after_the_global_is_set_sums_the_inherited_array():
    array = np.random.default_rng(1).random(1000)
    with fork_copy_on_write.installed(array=array), multiprocessing.get_context("fork").Pool(2) as pool:
        sums = pool.map(fork_copy_on_write.sum_inherited_part, PARTS)
    assert sums == [float(np.sum(array[a:b])) for a, b in PARTS]


def test_a_pool_created_before_the_global_is_set_has_nothing_inherited():
    array = np.random.default_rng(1).random(1000)
    with multiprocessing.get_context("fork").Pool(2) as pool, fork_copy_on_write.installed(array=array):
        with pytest.raises(RuntimeError, match="forked before the global was set"):
            pool.map(fork_copy_on_write.sum_inherited_part, PARTS)
    assert fork_copy_on_write.ARRAY is None
