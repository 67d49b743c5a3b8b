"""rollcheck's own Spark jobs: the streaming word count, message passing and the seeded sweeps.

Each recorder sits beside the checks of its trace.
"""
