"""The interval models held against real Flink runs: recovery time, utilization, a target TRT.

:mod:`.recovery` measures recovery times per checkpoint interval (read by
:mod:`.recovery_analysis`), :mod:`.target_trt` picks an interval for a target total recovery time,
:mod:`.utilization` measures utilization against the model, :mod:`.plot` draws measured vs predicted.
"""

__all__: list[str] = []
