"""A user's own Structured Streaming query: loaded, recorded with an injected failure, checked.

:mod:`~rollcheck.spark_replay.query.record` is the recording's entry; the other modules hold one
concept each (the module, the configuration, the files, one start, the session's recording, the
state, whose failure it is, the upgrade, the sinks) and the checks of the query's trace.
"""
