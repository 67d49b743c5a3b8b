"""An upgrade is a recovery too: ``query_next`` restarted from ``query``'s checkpoint.

Spark's Programming Guide ("Recovery Semantics after Changes in a Streaming Query") lets a user
deploy a changed query on the old checkpoint when the change is in filters, projections or the
sink, and forbids changing the input sources (their number or type) or a stateful operation
(grouping keys or aggregates, deduplication columns, a stream-stream join's type, keys or
condition, the state schema or timeout of arbitrary stateful processing).

:func:`plan_shape` reads what matters for that rule from a query's analysed logical plan (the JVM's
``queryExecution().analyzed()``): the sources in the order the plan reads them and the stateful
operators, top down, with their keys and state. :func:`forbidden_change` compares two shapes and
names the first forbidden change; :func:`check_upgrade` builds both plans on the same streaming
DataFrames in one session and refuses a forbidden change (exit 2 naming the module,
``query_next`` and the change) before any query starts.

The stop-and-restart itself (:mod:`rollcheck.spark_replay.query.run`): the first start runs
``query`` on the input of batches ``0..K`` only (later input files held back, Spark's data-less
batches off), so it ends cleanly after batch K commits; the second start runs ``query_next`` on
the same checkpoint with the rest of the input (:func:`hold_inputs`, :func:`release_inputs`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout

__all__ = ["UPGRADED", "StatefulOp", "PlanShape", "plan_shape", "forbidden_change", "check_upgrade",
           "hold_inputs", "release_inputs", "upgraded", "restart_query", "normalise", "describe_allowed",
           "ensure_checked", "begin_first_start", "end_first_start", "record_upgrade"]

#: The marker (in the markers folder) of a recording whose first start ended for the upgrade.
UPGRADED = "upgraded"
#: The prefix of an input file held back from the first start (Spark's file source skips dot files).
_HELD = ".held-"
_GUIDE = "Spark's guide forbids changing a stateful operation"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ARBITRARY = ("FlatMapGroupsWithState", "FlatMapGroupsInPandasWithState", "TransformWithState",
              "TransformWithStateInPandas", "FlatMapCoGroupsInPandasWithState")


@dataclass(frozen=True)
class StatefulOp:
    """One stateful operator of a streaming plan: its kind, keys and state (as Spark's SQL text)."""

    kind: str
    keys: tuple[str, ...]
    state: tuple[str, ...] = ()
    #: the join type or the state function's timeout and output mode
    extra: str = ""

    def describe_keys(self) -> str:
        """The upgrade's keys as ``[k1, k2]``."""
        return "[" + ", ".join(self.keys) + "]"


@dataclass
class PlanShape:
    """What the guide's rule reads from one analysed plan (:func:`plan_shape`)."""

    sources: list[str]
    stateful: list[StatefulOp]
    #: per top-most stateful operator, its input subtree with expression ids and UUIDs removed
    below_state: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)


def normalise(text: str) -> str:
    """A plan's text without expression ids and UUIDs (two analyses of one query give the same).

    >>> normalise("~Aggregate [page#12], [count(1) AS n#7L] 4032c16a-9c4d-4e25-9af6-e0afe8eae570")
    '~Aggregate [page], [count(1) AS nL] UUID'
    """
    return _UUID.sub("UUID", re.sub(r"#\d+", "", text))


def _seq(s: Any) -> list[Any]:
    return [s.apply(i) for i in range(s.size())]


def _sql(e: Any) -> str:
    try:
        return str(e.sql())
    except Exception:  # an expression without SQL text
        return normalise(str(e.toString()))


def _aggregates(e: Any, out: list[str]) -> None:
    """The aggregate functions inside one expression (their SQL text), depth first."""
    if e.getClass().getSimpleName() == "AggregateExpression":
        out.append(_sql(e))
        return
    for c in _seq(e.children()):
        _aggregates(c, out)


def _names(exprs: Any) -> tuple[str, ...]:
    return tuple(_sql(e) for e in _seq(exprs))


def _op(node: Any) -> StatefulOp | None:
    """The stateful operator ``node`` is, or None (a stateless node, or a batch one)."""
    name = node.getClass().getSimpleName()
    if not node.isStreaming():
        return None
    if name == "Aggregate":
        state: list[str] = []
        for e in _seq(node.aggregateExpressions()):
            _aggregates(e, state)
        return StatefulOp("aggregation", _names(node.groupingExpressions()), tuple(state))
    if name in ("Deduplicate", "DeduplicateWithinWatermark"):
        return StatefulOp("deduplication" if name == "Deduplicate" else "deduplication within the watermark",
                          _names(node.keys()))
    if name == "Distinct":
        return StatefulOp("deduplication", _names(node.output()))
    if name == "Join":
        kids = _seq(node.children())
        if not all(k.isStreaming() for k in kids):
            return None  # a stream-static join keeps no state
        cond = node.condition()
        return StatefulOp("stream-stream join", (normalise(_sql(cond.get())) if cond.isDefined() else "",),
                          extra=str(node.joinType().toString()))
    if name in _ARBITRARY:
        state_type = ""
        for getter in ("stateType", "stateEncoder"):
            if hasattr(node, getter):
                try:
                    v = getattr(node, getter)()
                    state_type = str(v.simpleString() if hasattr(v, "simpleString") else v.toString())
                    break
                except Exception:
                    continue
        extra = ""
        for getter in ("timeout", "timeMode", "outputMode"):
            try:
                extra += f"{getter}={getattr(node, getter)().toString()} "
            except Exception:
                continue
        keys = _names(node.groupingAttributes()) if hasattr(node, "groupingAttributes") else ()
        return StatefulOp(f"arbitrary stateful operation ({name})", keys, (normalise(state_type),), extra.strip())
    return None


def plan_shape(plan: Any, source_names: dict[str, str] | None = None) -> PlanShape:
    """The shape of an analysed logical plan (a JVM ``LogicalPlan``).

    The sources it reads in plan order (named by ``source_names``: folder -> source name), its
    stateful operators top down, the input subtree of each top-most one, its output columns.

    Parameters
    ----------
    plan : JVM object
        The analysed ``LogicalPlan`` (through py4j).
    source_names : dict, optional
        Input folder -> source name; None names sources by their plan text.

    Returns
    -------
    PlanShape
        Sources, stateful operators, their input subtrees and output columns.
    """
    sources: list[str] = []
    stateful: list[StatefulOp] = []
    below: list[str] = []

    def walk(n: Any, under_state: bool) -> None:
        name = n.getClass().getSimpleName()
        if name.startswith("StreamingRelation") or name.startswith("StreamingDataSourceV2"):
            text = str(n.toString())
            sources.append(next((s for path, s in (source_names or {}).items() if f"[{path}]" in text),
                                normalise(text.split(",")[0])))
        op = _op(n)
        if op is not None:
            stateful.append(op)
            if not under_state:
                below.extend(normalise(str(c.toString())) for c in _seq(n.children()))
        for c in _seq(n.children()):
            walk(c, under_state or op is not None)

    walk(plan, False)
    cols = [str(a.name()) for a in _seq(plan.output())]
    return PlanShape(sources, stateful, below, cols)


def forbidden_change(before: PlanShape, after: PlanShape) -> str | None:
    """The first change from ``query`` to ``query_next`` that Spark's guide forbids, in words.

    None when every change is allowed.

    Parameters
    ----------
    before : PlanShape
        The shape of ``query``.
    after : PlanShape
        The shape of ``query_next``.

    Returns
    -------
    str or None
        The forbidden change in words, None when every change is allowed.

    Examples
    --------
    >>> agg = lambda *k: PlanShape(["input"], [StatefulOp("aggregation", k, ("count(1)",))])
    >>> forbidden_change(agg("page", "user"), agg("page"))
    'changes the grouping keys of the aggregation: [page, user] -> [page]'
    >>> forbidden_change(agg("page"), agg("page")) is None
    True
    >>> forbidden_change(agg("page"), PlanShape(["input", "input"], agg("page").stateful))
    'changes the input sources: [input] -> [input, input]'
    """
    if before.sources != after.sources:
        return f"changes the input sources: [{', '.join(before.sources)}] -> [{', '.join(after.sources)}]"
    a, b = before.stateful, after.stateful
    if len(a) != len(b):
        what = "adds" if len(b) > len(a) else "removes"
        return (f"{what} a stateful operation: [{', '.join(o.kind for o in a)}] -> "
                f"[{', '.join(o.kind for o in b)}]")
    for x, y in zip(a, b, strict=True):
        if x.kind != y.kind:
            return f"replaces the {x.kind} by a {y.kind}"
        if x.kind == "stream-stream join":
            if x.extra != y.extra:
                return f"changes the join type of the stream-stream join: {x.extra} -> {y.extra}"
            if x.keys != y.keys:
                return f"changes the join condition of the stream-stream join: {x.keys[0]} -> {y.keys[0]}"
            continue
        if x.keys != y.keys:
            what = "grouping keys" if x.kind in ("aggregation",) or x.kind.startswith("arbitrary") else "columns"
            return f"changes the {what} of the {x.kind}: {x.describe_keys()} -> {y.describe_keys()}"
        if x.state != y.state:
            what = "aggregates" if x.kind == "aggregation" else "state schema"
            return f"changes the {what} of the {x.kind}: [{', '.join(x.state)}] -> [{', '.join(y.state)}]"
        if x.extra != y.extra:
            return f"changes the timeout or output mode of the {x.kind}: {x.extra} -> {y.extra}"
    return None


def describe_allowed(before: PlanShape, after: PlanShape) -> dict[str, Any]:
    """What kind of allowed change it is: ``{"stateless", "state_prefix_same", "change"}``.

    Parameters
    ----------
    before : PlanShape
        The shape of ``query``.
    after : PlanShape
        The shape of ``query_next`` (an allowed change of it).

    Returns
    -------
    dict
        ``stateless`` (bool), ``state_prefix_same`` (bool) and ``change`` (str).
    """
    stateless = not before.stateful
    same_below = before.below_state == after.below_state
    if stateless:
        change = "a stateless query: filters and projections may change"
    elif same_below:
        change = "the same sources, stateful operators and input to them: the change is after the stateful operators"
    else:
        change = "the same sources and stateful operators, other filters or projections before them"
    cols = "" if before.columns == after.columns else \
        f"; output columns [{', '.join(before.columns)}] -> [{', '.join(after.columns)}]"
    return {"stateless": stateless, "state_prefix_same": stateless or same_below, "change": change + cols}


def check_upgrade(uq: Any, dfs: dict[str, Any], source_names: dict[str, str]) -> dict[str, Any]:
    """Refuse a ``query_next`` that Spark's guide forbids.

    From the analysed plans of ``query`` and ``query_next`` on the same DataFrames ``dfs`` (nothing
    runs); return :func:`describe_allowed`.

    Parameters
    ----------
    uq : UserQuery
        The loaded query module.
    dfs : dict
        Source name -> streaming DataFrame.
    source_names : dict
        Input folder -> source name (see :func:`plan_shape`).

    Returns
    -------
    dict
        As :func:`describe_allowed`.

    Raises
    ------
    InvalidInputError
        Naming the module, ``query_next`` and the change (or the ``KEY`` column its output lacks).
    """
    shapes = []
    for which in ("query", "query_next"):
        try:
            res = uq.run_query(dfs, which=which)
            shapes.append(plan_shape(res._jdf.queryExecution().analyzed(), source_names))
        except (UserCodeTimeout, InvalidInputError):
            raise
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise InvalidInputError(f"{which} on the input streams raised {type(e).__name__}: {first[:300]}",
                                    source=uq.spec, location=which) from None
    bad = forbidden_change(*shapes)
    if bad is not None:
        raise InvalidInputError(f"query_next {bad}; " + (_GUIDE if "source" not in bad else
                                                          "Spark's guide forbids changing the input sources"),
                                source=uq.spec, location="query_next")
    missing = [k for k in uq.key if k not in shapes[1].columns]
    if missing:
        raise InvalidInputError(f"query_next's output has no column {missing[0]!r} of KEY (its columns: "
                                f"{', '.join(shapes[1].columns)}): the final table could not be keyed",
                                source=uq.spec, location="query_next")
    return describe_allowed(*shapes)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if p.is_file())


def hold_inputs(inputs: Path, last: int) -> int:
    """Hide the input files of batches after ``last`` from Spark's file source.

    Renamed with a leading dot, their times kept. Return how many.

    Parameters
    ----------
    inputs : Path
        The input folder of the file source.
    last : int
        The last batch left visible.

    Returns
    -------
    int
        How many files were hidden.
    """
    n = 0
    for p in _files(inputs):
        m = re.fullmatch(r"batch-(\d+)\.json", p.name)
        if m and int(m.group(1)) > last:
            p.rename(p.with_name(_HELD + p.name))
            n += 1
    return n


def release_inputs(inputs: Path) -> int:
    """Make the files :func:`hold_inputs` held back visible again; return how many."""
    n = 0
    for p in sorted(inputs.rglob(_HELD + "*")):
        p.rename(p.with_name(p.name[len(_HELD):]))
        n += 1
    return n


def upgraded(markers: Path) -> bool:
    """Whether the recording's first start has ended for the upgrade (the next runs ``query_next``)."""
    return (markers / UPGRADED).exists()


def restart_query(markers: Path) -> str:
    """The module's function a start of an upgrade's recording runs: ``query``, then ``query_next``."""
    return "query_next" if upgraded(markers) else "query"


#: The record of the up-front check (markers folder): :func:`describe_allowed`'s result.
_CHECKED = "upgrade-check.json"
_NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


def ensure_checked(uq: Any, dfs: dict[str, Any], markers: Path) -> dict[str, Any]:
    """:func:`check_upgrade` once per recording (its first start, before any query of it starts).

    Its result kept in the markers folder for the later starts.

    Parameters
    ----------
    uq : UserQuery
        The loaded query module.
    dfs : dict
        Source name -> streaming DataFrame.
    markers : Path
        The recording's markers folder (keeps the result).

    Returns
    -------
    dict
        As :func:`describe_allowed`.
    """
    import json

    f = markers / _CHECKED
    if f.is_file():
        return dict(json.loads(f.read_text(encoding="utf-8")))
    names = {}
    for name, df in dfs.items():
        for leaf in re.findall(r"FileSource\[([^\]]+)\]", str(df._jdf.queryExecution().analyzed().toString())):
            names[leaf] = name
    info = check_upgrade(uq, dfs, names)
    f.write_text(json.dumps(info), encoding="utf-8")
    return info


def begin_first_start(spark: Any, inputs: Path, last: int, multi: bool) -> str:
    """Before ``query``'s start.

    The input after batch ``last`` held back (one source; several are fed batch by batch, up to
    ``last``) and Spark's data-less batches off, so that the query ends cleanly once batch ``last``
    committed. Returns the setting to restore.

    Parameters
    ----------
    spark : SparkSession
        The driver's session.
    inputs : Path
        The input folder.
    last : int
        The last batch ``query`` runs.
    multi : bool
        Several sources (fed batch by batch; nothing is hidden).

    Returns
    -------
    str
        The previous value of the data-less batches setting.
    """
    prev = str(spark.conf.get(_NO_DATA_BATCHES, "true"))
    spark.conf.set(_NO_DATA_BATCHES, "false")
    if not multi:
        hold_inputs(inputs, last)
    return prev


def end_first_start(spark: Any, inputs: Path, prev: str) -> None:
    """After ``query``'s start: the setting restored, the held input visible again.

    Parameters
    ----------
    spark : SparkSession
        The driver's session.
    inputs : Path
        The input folder.
    prev : str
        The setting :func:`begin_first_start` returned.
    """
    spark.conf.set(_NO_DATA_BATCHES, prev)
    release_inputs(inputs)


def record_upgrade(markers: Path, emit: Any, last: int, committed: list[int], info: dict[str, Any]) -> None:
    """``query`` stopped after batch ``last`` committed.

    The marker for the next start and, when recording, the core ``failure`` (the driver's run of
    ``query`` ended) and ``spark.upgrade``.

    Parameters
    ----------
    markers : Path
        The recording's markers folder.
    emit : callable or None
        The trace writer's ``emit(kind, **fields)``; None when not recording.
    last : int
        The last batch ``query`` committed.
    committed : list of int
        The committed batch ids so far.
    info : dict
        The allowed change (:func:`describe_allowed`), added to the ``failure`` event.
    """
    (markers / UPGRADED).write_text(str(last), encoding="utf-8")
    if emit is None:
        return
    emit("failure", processes=["driver"], batch=last, mode="upgrade", stopped="clean",
         committed=committed[-1] if committed else None, **info)
    emit("spark.upgrade", batch=last, to="query_next", committed=committed[-1] if committed else None,
         change=info.get("change"))
