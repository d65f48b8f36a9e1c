import json
from dataclasses import replace

import pytest

from mininet_topos.description import describe
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.multicast_trees import compute_tree
from syncfabric.decisions.reservations import ReservationBook, ReservationError
from tests.harness.fabrics import spine_leaf_view


@pytest.fixture
def view():
    return spine_leaf_view(2, 2, 2, bw=20)


def test_reserve_books_every_edge_and_release_returns_it(view):
    book = ReservationBook(view)
    tree = compute_tree(view, "h1", ["h2", "h3"], 8.0)
    reservation = book.reserve(tree)
    assert (reservation.tree_id, reservation.address) == (1, "239.1.0.1")
    assert {edge: book.reserved_mbps[edge] for edge in tree.edges} == {e: 8.0 for e in tree.edges}
    second = book.reserve(compute_tree(view, "h1", ["h2", "h3"], 8.0, book.reserved_mbps))
    assert (second.tree_id, second.address) == (2, "239.1.0.2")
    assert book.release(1) is reservation
    assert book.release(2) is second
    assert dict(book.reserved_mbps) == {} and len(book) == 0


def test_ids_are_not_reused_but_addresses_are(view):
    book = ReservationBook(view)
    tree = compute_tree(view, "h1", ["h3"], 1.0)
    book.release(book.reserve(tree).tree_id)
    again = book.reserve(tree)
    assert (again.tree_id, again.address) == (2, "239.1.0.1")


def test_overbooking_is_refused_and_books_nothing(view):
    book = ReservationBook(view)
    tree = compute_tree(view, "h1", ["h3"], 15.0)
    book.reserve(tree)
    before = dict(book.reserved_mbps)
    with pytest.raises(ReservationError, match="only 5.000 Mbit/s unreserved"):
        book.reserve(tree)
    assert dict(book.reserved_mbps) == before and len(book) == 1


def test_unknown_id(view):
    with pytest.raises(ReservationError, match="no tree with id 7"):
        ReservationBook(view).release(7)


def test_pool_exhaustion_books_nothing(view):
    book = ReservationBook(view, address_pool="239.9.9.0/30")   # two usable addresses
    tree = compute_tree(view, "h1", ["h2"], 1.0)
    book.reserve(tree), book.reserve(tree)
    with pytest.raises(ReservationError, match="exhausted"):
        book.reserve(tree)
    assert len(book) == 2 and book.reserved_mbps[("h1", "leaf1")] == 2.0


def test_leases_expire(view):
    book = ReservationBook(view)
    tree = compute_tree(view, "h1", ["h2"], 1.0)
    short, forever = book.reserve(tree, 100.0, ttl_s=5), book.reserve(tree, 100.0)
    assert book.expired(104.9) == []
    assert book.expired(105.0) == [short.tree_id]
    assert forever.expires_at is None


def test_holds_count_against_trees_and_release_cleanly(view):
    book = ReservationBook(view)
    tree = compute_tree(view, "h1", ["h3"], 10.0)
    link = tree.edges[1]                      # the tree's leaf -> spine hop
    book.hold(("ina", 1), {link: 15.0})
    assert book.reserved_mbps[link] == 15.0
    with pytest.raises(ReservationError, match="only 5.000"):
        book.reserve(tree)
    with pytest.raises(ReservationError, match="exists"):
        book.hold(("ina", 1), {link: 1.0})
    book.release_hold(("ina", 1))
    assert dict(book.reserved_mbps) == {}
    book.reserve(tree)


def test_a_job_rebooked_at_another_rate_moves_its_hold_and_trees_together(view):
    """A rise is checked with what the job held counted as free; one that does not fit
    changes nothing; a fall is booked as it comes."""
    book = ReservationBook(view)
    tree = compute_tree(view, "h1", ["h3"], 6.0)
    link = tree.edges[1]                      # the tree's leaf -> spine hop
    reservation = book.reserve(tree)
    book.hold(("ina", 1), {link: 6.0})
    book.hold(("ina", 2), {link: 4.0})        # another plan's
    assert book.reserved_mbps[link] == 16.0
    faster = replace(tree, bandwidth_mbps=8.0)
    book.rebook(("ina", 1), {link: 8.0}, {reservation.tree_id: faster}, check=True)
    assert book.reserved_mbps[link] == 20.0 and book.get(reservation.tree_id).tree is faster
    before = dict(book.reserved_mbps)
    with pytest.raises(ReservationError, match=r"leaf.*spine.* has 16.000 Mbit/s, which would "
                                               r"need 18.000"):
        book.rebook(("ina", 1), {link: 9.0}, {reservation.tree_id: replace(tree, bandwidth_mbps=9.0)},
                    check=True)
    assert dict(book.reserved_mbps) == before and book.get(reservation.tree_id).tree is faster
    book.rebook(("ina", 1), {link: 2.0}, {reservation.tree_id: replace(tree, bandwidth_mbps=2.0)})
    assert book.reserved_mbps[link] == 8.0


def test_a_hold_planned_on_an_earlier_state_is_taken_only_if_it_still_fits():
    view = FabricView(describe(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, bw=20,
                                             aggregators="spines", aggregator_bw=9)))
    book = ReservationBook(view)
    link = ("leaf1", "spine1")
    book.reserve(compute_tree(view, "h1", ["h3"], 12.0))   # taken while the plan was computed
    with pytest.raises(ReservationError, match=r"leaf1.*spine1.*only 8.000"):
        book.hold_if_free(("ina", 1), {("h2", "leaf1"): 1.0, link: 10.0})
    assert book.reserved_mbps.get(("h2", "leaf1"), 0.0) == 0.0   # nothing held
    with pytest.raises(ReservationError, match="agg-spine1 has only 9.000"):
        book.hold_if_free(("ina", 1), {"agg-spine1": 9.5})
    book.hold_if_free(("ina", 1), {link: 8.0, "agg-spine1": 9.0})   # exactly full fits
    assert (book.reserved_mbps[link], book.reserved_mbps["agg-spine1"]) == (20.0, 9.0)


def test_a_record_restores_the_same_reservation_in_a_new_book_with_its_lease_left(view):
    book = ReservationBook(view)
    book.reserve(compute_tree(view, "h1", ["h3"], 1.0), 100.0)
    kept = book.reserve(compute_tree(view, "h1", ["h2", "h4"], 6.0, book.reserved_mbps), 100.0,
                        ttl_s=30)
    record = json.loads(json.dumps(book.record(kept.tree_id, 110.0)))   # as a state file holds it
    restored_book = ReservationBook(view)
    restored = restored_book.restore(record, 5.0)   # a new process: another clock
    assert (restored.tree_id, restored.address, restored.tree) == (kept.tree_id, kept.address,
                                                                   kept.tree)
    assert restored.expires_at == pytest.approx(25.0)
    assert dict(restored_book.reserved_mbps) == {edge: 6.0 for edge in kept.tree.edges}
    assert restored_book.reserve(compute_tree(view, "h1", ["h3"], 1.0)).tree_id == 3


def test_a_record_that_does_not_fit_books_nothing(view):
    book = ReservationBook(view)
    kept = book.reserve(compute_tree(view, "h1", ["h2", "h3"], 15.0))
    record = book.record(kept.tree_id, 0.0)
    full = ReservationBook(view)
    full.reserve(kept.tree)
    for target, broken in [(full, dict(record, id=7, address="239.1.0.9")), (full, record),
                           (ReservationBook(view), dict(record, edges=[["h1", "h9"]])),
                           (ReservationBook(view), {"id": 1})]:
        before = dict(target.reserved_mbps), target.ids()
        with pytest.raises(ReservationError):
            target.restore(broken, 0.0)
        assert (dict(target.reserved_mbps), target.ids()) == before


def test_a_plan_past_what_is_free_by_its_lp_tolerance_is_booked_as_what_is_free(view):
    # a tree that had the rest of the link must fit there again when it moves
    book = ReservationBook(view)
    tree = compute_tree(view, "h1", ["h3"], 4.0)
    link = tree.edges[1]
    reservation = book.reserve(tree)
    book.hold_if_free(("ina", 1), {link: 16.0 + 1e-5})
    assert book.reserved_mbps[link] == 20.0
    book.release(reservation.tree_id)
    book.reserve(tree)
    with pytest.raises(ReservationError):
        book.reserve(compute_tree(view, "h1", ["h3"], 1e-6))
