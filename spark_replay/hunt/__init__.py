"""Spark's side of the hunt: program grammar and data, fault schedules, oracles, minimiser.

The adapter the engine-neutral hunt core drives, the reading of its outcomes and the standalone
reproducer of a finding.
"""
