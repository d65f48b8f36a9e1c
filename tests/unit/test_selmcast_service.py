"""The SELMCAST rounds service in-process on fake switches: a round owns its trees, keeps
the k-round history per job, a refused round installs nothing, and a round that loses
a tree around a fault is released whole."""

import time

from tests.harness.in_process import NOTHING_LISTED, ROUND, empty, listed, post, release_key


def test_a_round_with_nothing_to_send_is_created_with_no_tree(controller):
    status, round_ = post(controller, "/selmcast/rounds", {"job": "idle", "workers": ["h1", "h2"],
                                                           "update_mb": 1, "p": 0})
    assert status == 201, round_
    assert (round_["t_s"], round_["normalized_completion"], round_["trees"]) == (0.0, 1.0, [])


def test_a_round_whose_last_tree_is_refused_installs_nothing_and_keeps_no_history(controller):
    refused = {"armed": True}

    def reject_h3s_tree(message):   # the 3rd sender's tree starts at leaf2
        return refused["armed"] and type(message).__name__ == "OFPGroupMod" and message.group_id == 3
    controller.switches["leaf2"].reject = reject_h3s_tree
    body = {"job": "refused", "workers": ["h1", "h2", "h3"], "update_mb": 0.1, "p": 1}
    code, answer = post(controller, "/selmcast/rounds", body)
    assert code == 500 and "nothing was installed" in answer["error"]
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    refused["armed"] = False
    code, again = post(controller, "/selmcast/rounds", body)
    assert code == 201 and again["round"] == 1


def test_the_k_rule_history_is_kept_per_job_and_l7_books_a_tree_per_copy(controller):
    rounds = []
    for _ in range(3):
        code, round_ = post(controller, "/selmcast/rounds", dict(ROUND, job="history", k=1))
        assert code == 201
        rounds.append(round_)
        controller.request("DELETE", "/selmcast/rounds/%d" % round_["id"], headers=release_key(round_))
    assert [r["round"] for r in rounds] == [1, 2, 3] and rounds[0]["forced_pairs"] == 0
    # with k = 1 every pair that did not sync in the previous round is forced in the next
    synced = {frozenset((s, r)) for s, rs in rounds[0]["assignment"].items() for r in rs}
    assert rounds[1]["forced_pairs"] == 6 - len(synced)
    code, answer = post(controller, "/selmcast/rounds", dict(ROUND, job="history", k=2))
    assert code == 400 and "uses k = 1" in answer["error"]
    _, fanout = post(controller, "/selmcast/rounds", dict(ROUND, job="fanout", p=2, cost_model="L7"))
    copies = sum(map(len, fanout["assignment"].values()))
    assert len(fanout["trees"]) == copies and all(len(t["receivers"]) == 1 for t in fanout["trees"])


def test_a_round_owns_its_trees_and_a_worker_without_bandwidth_gets_409(controller):
    _, round_ = post(controller, "/selmcast/rounds", ROUND)
    assert len(listed(controller)["trees"]) == len(round_["trees"])
    code, _ = controller.request("DELETE", "/multicast/trees/%d" % round_["trees"][0]["id"],
                                 headers=release_key(round_))
    assert code == 403   # released with the round only
    controller.request("DELETE", "/selmcast/rounds/%d" % round_["id"], headers=release_key(round_))
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    _, hog = post(controller, "/multicast/trees", {"source": "h2", "receivers": ["h1"],
                                                   "bandwidth_mbps": 20})
    code, answer = post(controller, "/selmcast/rounds", ROUND)
    assert code == 409 and "no bandwidth left on the link of h1, h2" in answer["error"]


def test_a_round_that_loses_a_tree_is_released_whole(controller):
    """A tree the trees service released (nothing fit around a fault) takes its round
    with it on the app's next timer, and the round's other trees too."""
    _, round_ = post(controller, "/selmcast/rounds", ROUND)
    assert len(round_["trees"]) > 1
    services = controller.services
    services.trees.release_tree(round_["trees"][0]["id"], time.monotonic())
    services.rounds.follow(time.monotonic())
    code, answer = controller.request("GET", "/selmcast/rounds/%d" % round_["id"])
    assert code == 404, answer
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    assert services.metrics.registry.get_sample_value(
        "syncfabric_releases_total", {"resource": "rounds", "cause": "reroute"}) == 1
