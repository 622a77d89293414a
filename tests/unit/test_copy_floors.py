"""helpers.measure.copy_floors: the one definition of floors (a) and (b), timed for real."""

import numpy as np
import pytest

from helpers.measure import copy_floors
from helpers.measure.units import MiB
from sharedarrays.room import SEGMENT_PREFIX, SHM_DIR


def _floor_segments() -> list[str]:
    return [name for name in SHM_DIR.iterdir()
            if name.name.startswith(SEGMENT_PREFIX) and "_floor_" in name.name]


def test_floor_b_times_the_copy_into_a_new_segment_and_leaves_nothing():
    source = copy_floors.random_array(4 * MiB)
    copy_s, create_and_copy_s = copy_floors.new_segment_copy(source)
    assert 0 < copy_s <= create_and_copy_s
    assert _floor_segments() == []


def test_a_copy_into_a_new_segment_costs_more_than_a_warm_copy():
    floors = copy_floors.measure_floors(copy_floors.random_array(16 * MiB), repeat=3)
    assert (len(floors.warm.runs) == len(floors.new_segment.runs)
            == len(floors.new_segment_with_creation.runs) == 3)
    assert floors.new_segment.median > floors.warm.median > 0
    assert all(total >= copy for copy, total in zip(floors.new_segment.runs,
                                                    floors.new_segment_with_creation.runs, strict=True))
    assert set(floors.as_dict()) == {"warm", "fresh_shm", "fresh_shm_create"}


def test_fresh_private_pages_and_warm_copy_of_any_shape_and_empty_arrays():
    floors = copy_floors.memcpy_floors(MiB, repeat=2)
    assert set(floors) == {"warm", "fresh"} and all(len(t.runs) == 2 for t in floors.values())
    for source in (np.ones((3, 5)), np.ones(0)):
        assert copy_floors.new_segment_copy(source)[0] >= 0
        assert len(copy_floors.fresh_pages_copy(source, repeat=1).runs) == 1


class _InterruptedSource:
    """Looks like a 10-item float64 array; reading it raises KeyboardInterrupt (Ctrl-C mid-copy)."""
    nbytes, dtype, size, shape = 80, np.dtype(np.float64), 10, (10,)

    def __array__(self, *args, **kwargs):
        raise KeyboardInterrupt


@pytest.mark.parametrize("floor", ["new_segment_copy", "fresh_pages_copy"])
def test_ctrl_c_during_a_floor_copy_is_a_keyboard_interrupt_not_a_buffer_error(floor):
    with pytest.raises(KeyboardInterrupt):
        getattr(copy_floors, floor)(_InterruptedSource())


def test_faster_medians_keeps_each_floors_faster_timing():
    from helpers.measure.timing import Timing
    before = {"warm": Timing((1.0, 3.0, 2.0)), "fresh": Timing((5.0, 5.0, 5.0))}
    after = {"warm": Timing((4.0, 4.0, 4.0)), "fresh": Timing((1.0, 9.0, 3.0)), "unused": Timing((0.1,))}
    assert copy_floors.faster_medians(before, after) == {"warm": 2.0, "fresh": 3.0}
