"""Replaying a recorded Flink trace: the checks, their oracles, tampered traces and TLC.

:mod:`.replay` checks the word count's traces, :mod:`.user_replay` a user's job's; the checks
themselves live in :mod:`.restores`, :mod:`.rescale` (key by key, with :mod:`.rescale_keys` and
:mod:`.keygroups`), :mod:`.strike` and :mod:`.oracles`. :mod:`.tamper` breaks traces on purpose,
:mod:`.tlc` walks a trace through ``FlinkCLTrace.tla`` (beside it) with TLC.
"""

__all__: list[str] = []
