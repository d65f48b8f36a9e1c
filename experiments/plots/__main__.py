"""python -m experiments.plots EXPERIMENT CSV...: redraw an experiment's figure."""

from experiments.plots.registry import main

main()
