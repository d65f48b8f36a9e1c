"""Figures from the experiments' CSV files, one module per family of experiments (each
experiment also draws its own as it finishes):

    python -m experiments.plots ps_distribution results/ps_distribution.csv
    python -m experiments.plots --help     # the experiments it draws

files.py reads a CSV back and saves the PNG beside it (with the emulation's footer);
by_mode.py holds what the one-line-per-mode figures share; registry.py says which
figure each experiment's CSV gets.
"""
