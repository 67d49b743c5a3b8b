"""Checkpoint-interval models: utilization and the optimal interval, total recovery time.

*Utilization* (Jayasekara et al.): the long-run useful fraction of time when checkpointing every
``T`` at cost ``c`` under Poisson failures of rate ``λ``, and its optimum ``T*`` (Lambert W).
*Total recovery time* (Chiron): the time from a failure until the job has caught up, and an
optimiser picking the interval of lowest predicted latency whose TRT meets a bound. Submodules
``utilization``, ``optimal``, ``trt``, ``optimiser``, ``sim`` and ``profile`` are re-exported
here (docs/internals/pyimpl-intervals.md); theorems: ``specs/intervals.md``.

Examples
--------
>>> from rollcheck.pyimpl.intervals import optimal_interval, utilization
>>> t = optimal_interval(0.005, 5.0)
>>> round(t, 3), round(utilization(t, 0.005, 5.0), 4)
(46.452, 0.7927)

References
----------
.. [1] S. Jayasekara, A. Harwood, S. Karunasekera. A Utilization Model for Optimization of
   Checkpoint Intervals in Distributed Stream Processing Systems. §3–§5.
.. [2] M. K. Geldenhuys, L. Thamsen, O. Kao. Chiron: Optimizing Fault Tolerance in QoS-aware
   Distributed Stream Processing Jobs. §III–§V.
"""

from rollcheck.pyimpl.intervals.optimal import (
    baseline_intervals,
    daly_interval,
    failure_rate_for_optimal,
    optimal_interval,
    young_interval,
    zhuang_interval,
)
from rollcheck.pyimpl.intervals.optimiser import (
    CIChoice,
    ProfilingPoint,
    QuadraticFit,
    fit_quadratic,
    optimise_ci,
)
from rollcheck.pyimpl.intervals.profile import FORMAT, load_profile, parse_rows, points_from_rows
from rollcheck.pyimpl.intervals.sim import (
    RunResult,
    SimConfig,
    SimSummary,
    run_rng,
    simulate_dag_run,
    simulate_run,
    simulate_runs,
    summarise,
    sweep,
    token_offsets,
)
from rollcheck.pyimpl.intervals.trt import (
    CASES,
    READINGS,
    TRTBreakdown,
    total_recovery_time,
    trt_breakdown,
    trt_limit,
)
from rollcheck.pyimpl.intervals.utilization import (
    utilization,
    utilization_dag,
    utilization_dag_no_failure,
    utilization_no_failure,
    utilization_no_restart,
    utilization_single,
)

__all__ = [
    # utilization
    "utilization_no_failure",
    "utilization_no_restart",
    "utilization_single",
    "utilization_dag_no_failure",
    "utilization_dag",
    "utilization",
    # optimal interval and baselines
    "optimal_interval",
    "failure_rate_for_optimal",
    "young_interval",
    "daly_interval",
    "zhuang_interval",
    "baseline_intervals",
    # total recovery time
    "CASES",
    "READINGS",
    "TRTBreakdown",
    "total_recovery_time",
    "trt_breakdown",
    "trt_limit",
    # optimiser
    "QuadraticFit",
    "fit_quadratic",
    "ProfilingPoint",
    "CIChoice",
    "optimise_ci",
    # simulation
    "SimConfig",
    "RunResult",
    "SimSummary",
    "run_rng",
    "simulate_run",
    "simulate_dag_run",
    "simulate_runs",
    "summarise",
    "sweep",
    "token_offsets",
    # profiling files
    "FORMAT",
    "load_profile",
    "parse_rows",
    "points_from_rows",
]
