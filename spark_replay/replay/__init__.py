"""Conformance of recorded Spark traces: the adapter, the named checks, the replay and TLC."""
