"""Figures of the host benchmarks (experiments.host_bench, experiments.host_allreduce):
the host software with the network out of the way, beside the kernel's and Gloo's."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from experiments.plots.files import read_rows, save  # noqa: E402


def plot_host_bench(csv_path):
    """Each role's datagram rate against iperf's with the same datagram size."""
    rows = read_rows(csv_path)
    sizes = sorted({int(r["datagram_bytes"]) for r in rows})
    roles = list(dict.fromkeys(r["role"] for r in rows))
    figure, axes = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / (len(roles) + 1)
    for k, name in enumerate(roles + ["iperf"]):
        rates = [next(float(r["iperf_datagrams_per_s"] if name == "iperf" else r["datagrams_per_s"])
                      for r in rows if int(r["datagram_bytes"]) == size
                      and (name == "iperf" or r["role"] == name)) for size in sizes]
        axes.bar([i + k * width for i in range(len(sizes))], [rate / 1e3 for rate in rates],
                 width, label=name, color="black" if name == "iperf" else None)
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(sizes))])
    axes.set_xticklabels(["%d-byte datagrams" % size for size in sizes])
    axes.set_ylabel("thousand datagrams/s, one core")
    axes.legend(fontsize="small")
    axes.set_title("The host software's ceiling on loopback, beside iperf 2")
    return save(figure, csv_path)


def plot_host_allreduce(csv_path):
    """Algorithm bandwidth per buffer size, Gloo's and each of ours, per network and MTU."""
    rows = read_rows(csv_path)
    networks = list(dict.fromkeys((r["network"], r.get("mtu", "")) for r in rows))
    figure, all_axes = plt.subplots(1, len(networks), figsize=(6 * len(networks), 3.8),
                                    squeeze=False)
    for axes, (network, mtu) in zip(all_axes[0], networks):
        mine = [r for r in rows if (r["network"], r.get("mtu", "")) == (network, mtu)]
        sizes = sorted({float(r["size_mb"]) for r in mine})
        kinds = list(dict.fromkeys(label(r) for r in mine))
        width = 0.8 / len(kinds)
        for k, kind in enumerate(kinds):
            rates = [next((float(r["algbw_gbit_s"]) for r in mine
                           if label(r) == kind and float(r["size_mb"]) == size), 0.0)
                     for size in sizes]
            axes.bar([i + k * width for i in range(len(sizes))], rates, width, label=kind,
                     color="black" if kind == "gloo" else None)
        axes.set_xticks([i + 0.4 - width / 2 for i in range(len(sizes))])
        axes.set_xticklabels(["%g MiB" % size for size in sizes])
        axes.set_ylabel("algorithm bandwidth (Gbit/s)")
        axes.set_title("all-reduce on %s%s, the CPU the limit"
                       % (network, ", MTU %s" % mtu if mtu else ""))
    # one legend, right of the panels: inside either, it hides bars
    all_axes[0][-1].legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(figure, csv_path)


def label(row):
    if row["datapath"] == "gloo":
        return "gloo"
    cores = " %s cores" % row["cores"] if row.get("cores", "1") not in ("1", "-") else ""
    return "%s %s%s%s" % (row["placement"], row["datapath"], " gso" if row["gso"] == "on" else "",
                          cores)
