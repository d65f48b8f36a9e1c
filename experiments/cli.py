"""Command-line conventions shared by the experiment scripts."""

import argparse
import csv
import sys
from pathlib import Path

from syncfabric.hosts import cli


class ArgumentParser(cli.ArgumentParser):
    """The host programs' parser (one-line errors, exit status 2), which also turns
    --bw auto into the rate calibrated for the experiment's traffic pattern."""

    def parse_args(self, args=None, namespace=None):
        from experiments.platform_capacity import NotCalibrated, resolve_bw
        parsed = super().parse_args(args, namespace)
        pattern = getattr(parsed, "bw_pattern", None)
        if pattern is None or getattr(parsed, "bench", False):   # --bench: no fabric, no rate
            return parsed
        parsed.bw_auto = parsed.bw == "auto"
        if parsed.bw == "auto" or parsed.bw != self.get_default("bw"):
            try:
                parsed.bw, parsed.bw_note = resolve_bw(parsed.bw, pattern)
            except NotCalibrated as error:
                parsed.bw, parsed.bw_note = None, error
        return parsed


def experiment_parser(module, doc):
    """An experiment's parser: `python -m <module>` as its usage, the first paragraph of
    its docstring as its description."""
    return ArgumentParser(prog="python -m %s" % module, description=doc.split("\n\n")[0])


def csv_out_argument(parser, name):
    """--out: where the experiment's CSV goes (results/<name>.csv), its figure beside it."""
    parser.add_argument("--out", type=Path, default=Path("results/%s.csv" % name),
                        help="CSV path (the PNG goes beside it)")


def comma_list(kind, allowed=None):
    def parse(text):
        items = [kind(item) for item in text.split(",") if item]
        if not items or (allowed and any(item not in allowed for item in items)):
            raise ValueError(text)
        return items
    parse.__name__ = "comma list"
    return parse


def fabric_arguments(parser, spines=8, leaves=8, hosts_per_leaf=2, bw="auto", pattern="multicast"):
    """The fabric flags every experiment that builds one takes: --topo, any fabric of
    mininet_topos/registry.py in Mininet's syntax, or the spine-leaf shorthands. --bw is
    a rate or "auto": a safe fraction of the rate calibrated for `pattern`, the
    experiment's heaviest traffic (experiments/platform_capacity.py)."""
    from experiments.platform_capacity import bw_argument
    from mininet_topos.registry import TOPOS
    parser.set_defaults(bw_pattern=pattern)
    parser.add_argument("--topo", type=topo_argument, default=None,
                        help="the fabric, as Mininet's --topo: %s (or package.module:factory), "
                             "e.g. fattree,4 or spineleaf,spines=4,leaves=4; default: the "
                             "spine-leaf of the three flags below"
                             % ", ".join(sorted(TOPOS)))
    parser.add_argument("--spines", type=int, default=spines,
                        help="spine switches (without --topo)")
    parser.add_argument("--leaves", type=int, default=leaves,
                        help="leaf switches (without --topo)")
    parser.add_argument("--hosts-per-leaf", type=int, default=hosts_per_leaf,
                        help="hosts under each leaf (without --topo)")
    parser.add_argument("--bw", type=bw_argument, default=bw,
                        help="link rate, Mbit/s, or auto: a safe fraction of the rate "
                             "`make calibrate` measured on this machine (default %(default)s)")
    parser.add_argument("--of-port", type=int, default=6653, help="controller's OpenFlow port")
    parser.add_argument("--rest-port", type=int, default=8080, help="controller's REST port")


def model_mb_argument(text):
    """--model-mb: a size in MB, or auto (sized from the link rate: model_mb_at)."""
    if text == "auto":
        return text
    size = float(text)
    if not size > 0:
        raise ValueError(text)
    return size


def model_mb_at(args, seconds):
    """With --model-mb auto, the model the link moves in `seconds` at --bw (rounded to
    0.1 MB). Left as "auto" while the rate is not known (announce_rate then exits)."""
    if args.model_mb == "auto" and args.bw is not None:
        args.model_mb = round(max(seconds * args.bw / 8, 0.1), 1)


def topo_argument(text):
    """--topo: a TopoSpec, or the registry's error as argparse's one-line error."""
    from mininet_topos.registry import parse_topo
    try:
        return parse_topo(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def topo_spec(args):
    """The fabric the flags ask for: --topo, or the spine-leaf of --spines, --leaves and
    --hosts-per-leaf."""
    from mininet_topos.registry import TopoSpec
    if args.topo is not None:
        return args.topo
    return TopoSpec("spineleaf", kwargs={"spines": args.spines, "leaves": args.leaves,
                                         "hosts_per_leaf": args.hosts_per_leaf})


def build_fabric(args, bw=None, **options):
    """The Topo of the flags at `bw` (default --bw; one rate, or one per switch link), given
    each of `options` that the fabric takes (aggregators="top", aggregator_bw=...:
    mininet_topos/registry.py). While --bw is not a rate yet (auto with no calibration,
    or --bench) and no `bw` is given, the fabric's own default rate: enough to count its
    hosts (fabric_host_count), which no rate changes."""
    from mininet_topos.registry import build_topo
    if bw is None and isinstance(args.bw, (int, float)):
        bw = args.bw
    rate = {} if bw is None else {"bw": bw}
    return build_topo(topo_spec(args), **rate, **options)


def job_fabric(args, aggregator_bw):
    """The job experiments' fabric from their flags, an aggregator host on every switch
    of its top tier (a spine-leaf's spines, a fat-tree's cores), or none at an
    aggregator_bw of 0: (topology, its FabricView, its other hosts in order h1, h2, ...)."""
    from mininet_topos.description import describe
    from mininet_topos.registry import fabric_hosts
    from syncfabric.decisions.fabric_view import FabricView
    if aggregator_bw:
        topo = build_fabric(args, aggregators="top", aggregator_bw=aggregator_bw)
    else:
        topo = build_fabric(args)
    return topo, FabricView(describe(topo)), fabric_hosts(topo)


def fabric_host_count(args):
    """How many hosts of the flags' fabric can run workers (aggregators not counted)."""
    from mininet_topos.registry import fabric_hosts
    return len(fabric_hosts(build_fabric(args)))


def rate_mbps(text, link_mbps):
    """A rate given as Mbit/s or as a multiple of the link rate ("4x"); ValueError if neither."""
    return round(float(text[:-1]) * link_mbps, 2) if text.endswith("x") else float(text)


def fit_auto_rate(args, heaviest):
    """With --bw auto, lower the rate if the run's largest job puts heaviest() Mbit/s of
    flows on the fabric, more than the machine carries (platform_capacity.fitting_rate);
    the note says so."""
    from experiments.platform_capacity import fitting_rate
    if args.bw is not None and args.bw_auto:
        args.bw, why = fitting_rate(args.bw, heaviest())
        if why:
            args.bw_note = "%s, lowered to %g Mbit/s: the run's largest job puts %s" % (
                args.bw_note, args.bw, why)


def fit_aggregator_rate(parser, args, heaviest_job):
    """--aggregator-bw (Mbit/s, or a multiple of the link rate like 1x) in Mbit/s at the
    run's --bw, once --bw auto is lowered to what the machine carries for the run's
    heaviest job (heaviest_job(args, aggregator Mbit/s): Mbit/s, fit_auto_rate). Without
    a --bw (no calibration yet: announce_rate says so) it is left as given."""
    if args.bw is None:
        return
    try:
        rate_mbps(args.aggregator_bw, args.bw)
    except ValueError:
        parser.error("--aggregator-bw must be Mbit/s or a multiple of the link rate like 1x")
    fit_auto_rate(args, lambda: heaviest_job(args, rate_mbps(args.aggregator_bw, args.bw)))
    args.aggregator_bw = rate_mbps(args.aggregator_bw, args.bw)


def announce_rate(args):
    """Say which link rate --bw became, or exit with what to do if this machine has no
    calibration yet: an experiment's first words, once its arguments are known good."""
    note = getattr(args, "bw_note", None)
    if isinstance(note, Exception):
        sys.exit("error: %s" % note)
    if note:
        print(note, file=sys.stderr)


def progress_printer(name):
    """A progress callback printing `name: step ...` on stderr (beside tqdm's bar)."""
    from tqdm import tqdm

    def say(step):
        tqdm.write("%s: %s ..." % (name, step), file=sys.stderr)
    return say


def write_csv(rows, path, columns):
    """Write dict rows to a CSV file with the given column order, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def finish_emulated_run(args, run, columns, plot, summary, switch_state, not_verified):
    """What every emulated experiment does with its run(args) -> (rows, leftovers): a
    one-line error if the machine or the input is not usable (PlatformError is a
    RuntimeError), the CSV and its figure, the summary, then a failure if the switches
    still hold `switch_state` or a row is not verified."""
    try:
        rows, leftovers = run(args)
    except (RuntimeError, ValueError) as error:
        sys.exit("error: %s" % error)
    write_csv(rows, args.out, columns)
    figure = plot(args.out)
    print(summary(rows))
    print("CSV: %s  figure: %s" % (args.out, figure))
    if leftovers:
        sys.exit("error: switches still hold %s: %s" % (switch_state, leftovers))
    print("switches hold no %s after the run" % switch_state)
    if not all(row["verified"] for row in rows):
        sys.exit("error: %s" % not_verified)
