"""Oracles that do not trust the engine's own failure-free run, and their mutants.

The query run as a batch job over the same input, late rows, the judgement of the output tables,
the upgrade's evaluation and the oracles' tampered recordings.
"""
