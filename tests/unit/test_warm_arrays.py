"""Arrays a host's rounds use again (syncfabric/hosts/warm_arrays): made with their pages
in place, so a round writing them takes no page faults, and a worker's result arrays
used again only once nothing holds them."""

import resource

from syncfabric.hosts.jobs.warm_arrays import RoundArrays, touched_floats

FLOATS = 8 * 2 ** 20   # 32 MB: far past what malloc keeps, so np.empty maps new pages


def page_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_a_round_writing_a_warm_array_takes_no_page_faults():
    array = touched_floats(FLOATS)
    assert not array.any()
    before = page_faults()
    array[:] = 1
    assert page_faults() - before < 8   # 8192 pages of 4 KB, or 16 huge ones, if new


def test_a_workers_result_arrays_made_ready_are_the_first_ones_taken():
    arrays = RoundArrays(FLOATS, ready=2)
    before = page_faults()
    first, second = arrays.take(), arrays.take()
    first[:] = 1
    second[:] = 2
    assert first is not second and page_faults() - before < 8
    assert len(arrays.arrays) == 2


def test_a_workers_result_array_is_used_again_only_once_nothing_holds_it():
    arrays = RoundArrays(10)
    held = arrays.take()[2:5]   # a view of the first array, as a Future's result is
    second = arrays.take()
    assert second is not held.base
    first = id(held.base)
    del held
    assert id(arrays.take()) == first and arrays.take() is not second
