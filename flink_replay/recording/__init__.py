"""Recording a real Flink run: its settings, run folder, standalone cluster and trace.

:mod:`.record` starts the job process (:mod:`rollcheck.flink_replay.job`) with a validated
:mod:`.config` in a :mod:`.run_folder`, and merges what it left (:mod:`.trace_events`) into a
``rollcheck.trace/1`` file (:mod:`.trace_build`); :mod:`.release_reference` runs a user's job on a
reference release, :mod:`.standalone` the session cluster of the ``taskmanager`` failure.
"""

__all__: list[str] = []
