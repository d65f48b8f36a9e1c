"""What each process does in one gradient round of an INA plan, from the plan alone: each
worker's legs, the workers each aggregator and PS expects in each fragment, the time the
first pass is planned to take, and the resends that fill what the reports say is
missing. The coordinator (gradients.py) only sends these and waits for the answers."""

from dataclasses import dataclass

import numpy as np

from syncfabric.decisions.model_shards import destinations, fragment_ranges
from syncfabric.hosts.gradient_wire import floats_per_fragment, fragment_count, wire_mbit
from syncfabric.hosts.wire import ranges


@dataclass
class RoundParts:
    """One round's parts. legs: worker -> [(node, ps, first, last, rate)], the node being
    its aggregator or the PS; expected: process -> the mask of workers each fragment
    must hold there; held: PS -> its fragment range."""
    workers: list
    pss: list
    aggregators: list
    bit: dict
    addresses: dict
    ports: dict
    held: dict
    legs: dict
    expected: dict
    aggregate_rate: dict

    @classmethod
    def of(cls, plan, workers, pss, aggregators, floats, rate_fraction):
        """The parts of `plan` (the POST /ina/plans answer) for a gradient of `floats`
        float32, every stream at rate_fraction of its planned rate."""
        count = fragment_count(floats)
        bit = {w: 1 << i for i, w in enumerate(workers)}
        held = fragment_ranges(plan["split"], count)
        legs = {worker: [(leg["host"], pss[leg["shard"]], *leg["fragments"],
                          leg["rate_mbps"] * rate_fraction) for leg in legs]
                for worker, legs in destinations(plan["workers"], workers, pss, held).items()}
        expected = {node: np.zeros(count, dtype=np.uint64) for node in aggregators + pss}
        for worker, pieces in legs.items():
            for node, ps, first, last, _rate in pieces:
                expected[ps][first:last] |= np.uint64(bit[worker])
                if node != ps:
                    expected[node][first:last] |= np.uint64(bit[worker])
        for ps in pss:   # a PS that is also a worker adds its own fragments in its host
            if ps in bit:
                expected[ps][slice(*held[ps])] |= np.uint64(bit[ps])
        aggregate_rate = {(a["aggregator"], a["ps"]): a["rate_mbps"] * rate_fraction
                          for a in plan["aggregates"]}
        return cls(list(workers), list(pss), list(aggregators), bit, plan["addresses"],
                   plan["ports"], held, legs, expected, aggregate_rate)

    @property
    def fragments(self):
        """How many worker fragments one pass sends."""
        return len(self.workers) * len(next(iter(self.expected.values())))

    def planned_first_pass_s(self):
        """The slowest worker's slowest leg at its planned rate."""
        return max(max(wire_mbit((last - first) * floats_per_fragment()) / rate
                       for _node, _ps, first, last, rate in pieces)
                   for pieces in self.legs.values())

    def messages(self, common):
        """{process: its part of the round}, each with `common`; a PS that is also a
        worker gets both parts in one message, with role "worker+ps"."""
        parts = {}
        for worker in self.workers:
            parts[worker] = dict(
                roles=["worker"], index=self.workers.index(worker),
                legs=[{"ip": self.addresses[node], "port": self.ports[ps],
                       "fragments": [first, last], "rate_mbps": rate}
                      for node, ps, first, last, rate in self.legs[worker]])
        for aggregator in self.aggregators:
            parts[aggregator] = dict(
                roles=["aggregator"], expected=self.expected[aggregator].tolist(),
                next=[[*self.held[ps], self.addresses[ps], self.ports[ps]] for ps in self.pss])
        for ps in self.pss:
            part = parts.setdefault(ps, {"roles": []})
            part["roles"].append("ps")
            part.update(expected=self.expected[ps].tolist(), workers=len(self.workers),
                        range=self.held[ps])
        return {name: dict(common, role="+".join(part.pop("roles")), **part)
                for name, part in parts.items()}

    def repairs(self, reports, scale):
        """{process: [{"ip", "port", "fragments", "rate_mbps"}]} that fill what `reports`
        (each aggregator's and PS's missing workers per fragment) say is missing, each
        stream at `scale` times its planned rate. An aggregator that holds a fragment's
        sum sends it again; otherwise its workers do."""
        wanted = {}   # (sender, destination, port, rate) -> fragment indices

        def ask(sender, destination, ps, rate, index):
            wanted.setdefault((sender, self.addresses[destination], self.ports[ps], rate),
                              set()).add(index)
        incomplete = {a: {f for f, _mask in reports[a]["missing"]} for a in self.aggregators}
        for aggregator in self.aggregators:
            for index, mask in reports[aggregator]["missing"]:
                for worker in self.missing_workers(mask):
                    _node, ps, _first, _last, rate = self.leg_of(worker, index)
                    ask(worker, aggregator, ps, rate, index)
        for ps in self.pss:
            for index, mask in reports[ps]["missing"]:
                for worker in self.missing_workers(mask):
                    node, _ps, _first, _last, rate = self.leg_of(worker, index)
                    if node == ps:
                        ask(worker, ps, ps, rate, index)
                    elif index not in incomplete[node]:   # the aggregator has it: send it again
                        ask(node, ps, ps, self.aggregate_rate[node, ps], index)
        resend = {}
        for (sender, destination, port, rate), indices in wanted.items():
            resend.setdefault(sender, []).append({"ip": destination, "port": port,
                                                  "rate_mbps": rate * scale,
                                                  "fragments": ranges(sorted(indices))})
        return resend

    def missing_workers(self, mask):
        return [worker for worker in self.workers if mask & self.bit[worker]]

    def leg_of(self, worker, index):
        """The leg of `worker` that carries fragment `index`."""
        return next(leg for leg in self.legs[worker] if leg[2] <= index < leg[3])
