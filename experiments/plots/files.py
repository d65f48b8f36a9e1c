"""What every figure shares: an experiment's CSV read back, and the PNG saved beside it
with, for emulated runs, the link rate and how many rows were faithful under it."""

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)


def read_rows(path):
    with Path(path).open() as handle:
        return list(csv.DictReader(handle))


def emulation_footer(rows):
    """Emulated seconds are this machine's at this link rate, and count only where the
    emulator kept up: say both under the figure."""
    if not rows or "fidelity_ok" not in rows[0]:
        return None
    rates = sorted({row["link_mbps"] for row in rows if row.get("link_mbps")})
    faithful = sum(row["fidelity_ok"] == "True" for row in rows)
    return "links %s Mbit/s (emulated; seconds are this machine's); %d of %d rows faithful" % (
        "/".join(rates) or "?", faithful, len(rows))


def save(figure, csv_path):
    path = Path(csv_path).with_suffix(".png")
    footer = emulation_footer(read_rows(csv_path))
    if footer:
        figure.text(0.5, 0.005, footer, ha="center", va="bottom", fontsize=7, color="grey")
        figure.tight_layout(rect=(0, 0.03, 1, 1))
    else:
        figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
