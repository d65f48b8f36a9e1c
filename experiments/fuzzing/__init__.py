"""Fuzzing the host data paths: hostile.py generates what a process may send a job's
hosts, differential.py feeds both data paths the same and compares what they made of
it, targets.py names each target with what it draws and checks, and campaign.py is
make fuzz's loop over them. tests/unit/test_datapath_fuzz.py runs them a bounded number of times in the suite;
experiments.datapath_fuzz (make fuzz) runs them for a given time under AddressSanitizer
and UndefinedBehaviorSanitizer."""
