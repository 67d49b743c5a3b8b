"""The two forms of a generated Flink job: a DataStream pipeline and a Table/SQL query.

:func:`render_ds` and :func:`render_sql` return the job's code (``job(env, source[s])`` and the
functions it uses), its ``FIELDS`` and its ``KEY`` for :func:`rollcheck.flink_replay.hunt.render.render`.
The code is plain PyFlink; nothing of rollcheck is imported.
"""

from __future__ import annotations

from typing import Any

__all__ = ["render_ds", "render_sql", "sql_query"]

_DS_IMPORTS = """from pyflink.common import Duration, Types, WatermarkStrategy
from pyflink.common.time import Time
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream.functions import (AggregateFunction, KeyedCoProcessFunction, KeyedProcessFunction,
                                          ProcessWindowFunction)
from pyflink.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from pyflink.datastream.window import EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows"""

_DS_COMMON = '''
TUPLE = Types.TUPLE([Types.LONG(), Types.STRING(), Types.LONG(), Types.LONG()])


def _clean(r):  # a null key or value as the job treats it (Flink keys are never null)
    return r[0], "<null>" if r[1] is None else r[1], 0 if r[2] is None else r[2], r[3]


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[3]


def _watermarked(stream):
    wm = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(SLACK_S)) \\
        .with_timestamp_assigner(EventTime())
    return stream.map(_clean, output_type=TUPLE).assign_timestamps_and_watermarks(wm)


def _by_key(r):
    return r[1]


def _combine(a, b):  # order-insensitive: the same result in any order
    return min(a[0], b[0]), a[1], a[2] + b[2], max(a[3], b[3])


class Stamp(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        for e in elements:
            yield w.start, key, e[2], w.max_timestamp()


class CountSumMax(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, acc):
        return acc[0] + 1, acc[1] + value[2]

    def get_result(self, acc):
        return 0, "", acc[0] + acc[1], 0

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class Spread(ProcessWindowFunction):
    def process(self, key, context, elements):
        vs = [e[2] for e in elements]
        w = context.window()
        yield w.start, key, sum(vs) - min(vs) + len(vs), w.max_timestamp()


class Buckets(KeyedProcessFunction):
    """A tumbling event-time aggregation by hand: map state per bucket, a timer at its end."""

    def __init__(self, size_ms):
        self.size_ms = size_ms

    def open(self, runtime_context):
        self.sums = runtime_context.get_map_state(MapStateDescriptor("sums", Types.LONG(), Types.LONG()))

    def process_element(self, value, ctx):
        start = value[3] - value[3] % self.size_ms
        old = self.sums.get(start) if self.sums.contains(start) else 0
        self.sums.put(start, old + value[2] + 1)
        ctx.timer_service().register_event_time_timer(start + self.size_ms - 1)

    def on_timer(self, timestamp, ctx):
        start = timestamp - self.size_ms + 1
        if self.sums.contains(start):
            yield start, ctx.get_current_key(), self.sums.get(start), timestamp
            self.sums.remove(start)
'''

_TERMINALS = {
    "keyed-reduce": '''
def _terminal(stream):
    return stream.key_by(_by_key, key_type=Types.STRING()).reduce(_combine).map(lambda r: (r[1], r[2]))
''',
    "keyed-sum": '''
def _terminal(stream):
    return stream.key_by(_by_key, key_type=Types.STRING()).sum(2).map(lambda r: (r[1], r[2]))
''',
    "process-value-state": '''
class Totals(KeyedProcessFunction):
    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        total, count = (self.total.value() or 0) + value[2], (self.count.value() or 0) + 1
        self.total.update(total)
        self.count.update(count)
        yield value[1], total, count


def _terminal(stream):
    return stream.key_by(_by_key, key_type=Types.STRING()).process(Totals())
''',
    "process-list-state": '''
class Seen(KeyedProcessFunction):
    def open(self, runtime_context):
        self.values = runtime_context.get_list_state(ListStateDescriptor("values", Types.LONG()))

    def process_element(self, value, ctx):
        self.values.add(value[2])
        vs = list(self.values.get())
        yield value[1], len(vs), sum(vs)


def _terminal(stream):
    return stream.key_by(_by_key, key_type=Types.STRING()).process(Seen())
''',
    "process-map-state": '''
class Distinct(KeyedProcessFunction):
    def open(self, runtime_context):
        self.counts = runtime_context.get_map_state(MapStateDescriptor("counts", Types.LONG(), Types.LONG()))

    def process_element(self, value, ctx):
        v = value[2]
        self.counts.put(v, (self.counts.get(v) if self.counts.contains(v) else 0) + 1)
        yield value[1], len(list(self.counts.keys())), sum(self.counts.values())


def _terminal(stream):
    return stream.key_by(_by_key, key_type=Types.STRING()).process(Distinct())
''',
}
_TERMINAL_FIELDS = {"keyed-reduce": ("k", "v"), "keyed-sum": ("k", "v"), "process-value-state": ("k", "total", "n"),
                    "process-list-state": ("k", "n", "total"), "process-map-state": ("k", "distinct", "n")}

_PAIRWISE = {
    "connect-coprocess": ('''
class CoTotals(KeyedCoProcessFunction):
    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def _add(self, value, sign):
        total, count = (self.total.value() or 0) + sign * value[2], (self.count.value() or 0) + 1
        self.total.update(total)
        self.count.update(count)
        return value[1], total, count

    def process_element1(self, value, ctx):
        yield self._add(value, 1)

    def process_element2(self, value, ctx):
        yield self._add(value, -1)


def _pairwise(a, b):
    return a.connect(b).key_by(_by_key, _by_key, key_type=Types.STRING()).process(CoTotals())
''', ("k", "total", "n"), ("k",)),
    "connect-interval-join": ('''
class IntervalJoin(KeyedCoProcessFunction):
    """Each side buffered in map state; a pair within the bound is emitted when its second record comes."""

    def open(self, runtime_context):
        self.left = runtime_context.get_map_state(MapStateDescriptor("left", Types.LONG(), Types.PICKLED_BYTE_ARRAY()))
        self.right = runtime_context.get_map_state(MapStateDescriptor("right", Types.LONG(), Types.PICKLED_BYTE_ARRAY()))

    def _match(self, mine, other, value, left):
        mine.put(value[0], tuple(value))
        for o in list(other.values()):
            if abs(o[3] - value[3]) <= JOIN_BOUND_MS:
                a, b = (value, o) if left else (o, value)
                yield a[1], a[0], b[0], a[2] + b[2]

    def process_element1(self, value, ctx):
        yield from self._match(self.left, self.right, value, True)

    def process_element2(self, value, ctx):
        yield from self._match(self.right, self.left, value, False)


def _pairwise(a, b):
    return a.connect(b).key_by(_by_key, _by_key, key_type=Types.STRING()).process(IntervalJoin())
''', ("k", "lid", "rid", "v"), ("lid", "rid")),
}


def _assigner(stage: dict[str, Any]) -> str:
    if stage["assigner"] == "tumbling":
        return f"TumblingEventTimeWindows.of(Time.seconds({stage['size_s']}))"
    if stage["assigner"] == "sliding":
        return f"SlidingEventTimeWindows.of(Time.seconds({stage['size_s']}), Time.seconds({stage['slide_s']}))"
    return f"EventTimeSessionWindows.with_gap(Time.seconds({stage['gap_s']}))"


def _stage_lines(stages: list[dict[str, Any]]) -> list[str]:
    out = []
    for s in stages:
        if s["kind"] == "timers":
            out.append(f"    stream = stream.key_by(_by_key, key_type=Types.STRING()).process("
                       f"Buckets({int(s['size_s']) * 1000}), output_type=TUPLE)")
            continue
        win = f"stream.key_by(_by_key, key_type=Types.STRING()).window({_assigner(s)})"
        fn = {"reduce": "reduce(_combine, window_function=Stamp(), output_type=TUPLE)",
              "aggregate": "aggregate(CountSumMax(), window_function=Stamp(), output_type=TUPLE)",
              "process": "process(Spread(), output_type=TUPLE)"}[s["fn"]]
        out.append(f"    stream = {win} \\\n        .{fn}")
    return out


def render_ds(spec: dict[str, Any], slack: int) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """A DataStream job: ``({"imports", "code"}, FIELDS, KEY)``.

    Parameters
    ----------
    spec : dict
        The program's spec.
    slack : int
        The watermark's out-of-orderness bound, s.
    """
    names = [s["name"] for s in spec["sources"]]
    many = len(names) > 1
    code = [f"SLACK_S = {slack}", f"JOIN_BOUND_MS = {int(spec['join_bound_s']) * 1000}", _DS_COMMON]
    prep = []
    if spec.get("prefilter") is not None:
        prep.append(f".filter(lambda r: r[2] >= {int(spec['prefilter'])})")
    if spec.get("rekey") == "literal":
        prep.append('.map(lambda r: (r[0], "all", r[2], r[3]), output_type=TUPLE)')
    elif spec.get("rekey") == "prefix":
        prep.append('.map(lambda r: (r[0], "p:" + r[1][:2], r[2], r[3]), output_type=TUPLE)')
    code.append("\ndef _input(stream):\n    return _watermarked(stream)" + "".join(f" \\\n        {p}" for p in prep) + "\n")
    combine = spec["combine"]
    if combine in _PAIRWISE:
        text, fields, key = _PAIRWISE[combine]
        code.append(text)
        body = [f'    return _pairwise(_input(sources["{names[0]}"]), _input(sources["{names[1]}"]))']
    else:
        fields, key = ("start", "k", "v", "ms"), ("k", "start")
        if not spec["stages"]:
            fields, key = ("id", "k", "v", "ms"), ("id",)
        if many:
            rest = ", ".join(f'_input(sources["{n}"])' for n in names[1:])
            body = [f'    stream = _input(sources["{names[0]}"]).union({rest})']
        else:
            body = ["    stream = _input(source)"]
        body += _stage_lines(spec["stages"])
        if spec.get("terminal"):
            code.append(_TERMINALS[spec["terminal"]])
            fields, key = _TERMINAL_FIELDS[spec["terminal"]], ("k",)
            body.append("    return _terminal(stream)")
        else:
            body.append("    return stream")
    sig = "def job(env, sources):" if many else "def job(env, source):"
    code.append("\n" + sig + "\n" + "\n".join(body) + "\n")
    return {"imports": _DS_IMPORTS, "code": "\n".join(code)}, fields, key


# -- Table/SQL ----------------------------------------------------------------------------------

_SQL_IMPORTS = """from pyflink.common import Row, RowKind, Types
from pyflink.datastream.functions import KeyedProcessFunction
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor
from pyflink.table import Schema, StreamTableEnvironment"""

_SQL_COMMON = '''
ROW = Types.ROW_NAMED(["id", "k", "v", "ms"], [Types.LONG(), Types.STRING(), Types.INT(), Types.LONG()])
END = 2 ** 62  # an event-time timer only the end of the input (the last watermark) fires


def _row(r, kind=None, v=None):
    row = Row(id=r[0], k=r[1], v=r[2] if v is None else v, ms=r[3])
    if kind is not None:
        row.set_row_kind(kind)
    return row


def _changes(r):  # a changelog: inserted, inserted then deleted, or inserted then updated
    op = r[4] if len(r) > 4 else "I"  # a source drawn without changes has inserts only
    yield _row(r)
    if op == "D":
        yield _row(r, RowKind.DELETE)
    elif op == "U":
        yield _row(r, RowKind.UPDATE_BEFORE)
        yield _row(r, RowKind.UPDATE_AFTER, (r[2] or 0) % 1000 + 1)


def _schema():
    return (Schema.new_builder()
            .column("id", "BIGINT").column("k", "STRING").column("v", "INT").column("ms", "BIGINT")
            .column_by_expression("ts", "CAST(TO_TIMESTAMP_LTZ(ms, 3) AS TIMESTAMP(3))")
            .watermark("ts", f"ts - INTERVAL '{SLACK_S}' SECOND")
            .build())


def _table(tables, stream):
    if CHANGELOG:
        return tables.from_changelog_stream(stream.flat_map(_changes, output_type=ROW), _schema())
    return tables.from_data_stream(stream.map(_row, output_type=ROW), _schema())


class FinalTable(KeyedProcessFunction):
    """The query's final table: its changelog folded per row, emitted when the input has ended."""

    def open(self, runtime_context):
        self.rows = runtime_context.get_map_state(MapStateDescriptor("rows", Types.STRING(), Types.LONG()))
        self.armed = runtime_context.get_state(ValueStateDescriptor("armed", Types.BOOLEAN()))

    def process_element(self, value, ctx):
        kind, text = value
        n = (self.rows.get(text) if self.rows.contains(text) else 0) + (1 if kind in ("INSERT", "UPDATE_AFTER") else -1)
        if n:
            self.rows.put(text, n)
        else:
            self.rows.remove(text)
        if not self.armed.value():
            self.armed.update(True)
            ctx.timer_service().register_event_time_timer(END)

    def on_timer(self, timestamp, ctx):
        for text in sorted(self.rows.keys()):
            for _ in range(max(0, self.rows.get(text))):
                yield tuple(json.loads(text))


def _plain(row):
    return row.get_row_kind().name, json.dumps([row[i] for i in range(len(FIELDS))])


def _key_of(change):
    values = json.loads(change[1])
    return json.dumps([values[FIELDS.index(name)] for name in KEY])
'''

_AGG_SQL = {"agg-count": "COUNT(*)", "agg-sum": "SUM(v)", "agg-min": "MIN(v)", "agg-max": "MAX(v)",
            "agg-avg": "AVG(v)", "agg-count-distinct": "COUNT(DISTINCT v)",
            "agg-filtered": "COUNT(*) FILTER (WHERE v >= {c})"}


def _aggs(spec: dict[str, Any]) -> tuple[str, list[str]]:
    names = [f"a{i}" for i in range(len(spec["aggs"]))]
    text = ", ".join(f"{_AGG_SQL[a].format(c=int(spec['filter_c']))} AS {n}" for a, n in zip(spec["aggs"], names,
                                                                                          strict=True))
    return text, names


def _base(spec: dict[str, Any]) -> str:
    names = [s["name"] for s in spec["sources"]]
    combine = spec["combine"]
    if combine == "none" or combine == "sql-union-all":
        used = names[:1] if combine == "none" else names[: len(names) - (1 if spec.get("post") == "post-join" else 0)]
        return " UNION ALL ".join(f"SELECT id, k, v, ms, ts FROM {n}" for n in used)
    a, b = names[0], names[1]
    join = "LEFT JOIN" if combine == "sql-join-left" else "JOIN"
    ts = "a.ts" if combine == "sql-join-interval" else "CAST(a.ts AS TIMESTAMP(3))"
    cond = "a.k = b.k"
    if combine == "sql-join-interval":
        x = int(spec["join_bound_s"])
        cond += f" AND a.ts BETWEEN b.ts - INTERVAL '{x}' SECOND AND b.ts + INTERVAL '{x}' SECOND"
    return (f"SELECT a.id * 1000000 + COALESCE(b.id, 0) AS id, a.k AS k, a.v + COALESCE(b.v, 0) AS v, "
            f"a.ms AS ms, {ts} AS ts FROM {a} a {join} {b} b ON {cond}")


def _where(spec: dict[str, Any]) -> str:
    """The WHERE clause of the view ``input`` ('' for none); only ``v-ge`` reads ``where_c``."""
    w = spec.get("where")
    if w == "v-ge":
        return f" WHERE v >= {int(spec['where_c'])}"
    return {None: "", "k-not-null": " WHERE k IS NOT NULL", "v-not-null": " WHERE v IS NOT NULL"}[w]


def _main(spec: dict[str, Any]) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The main query over the view ``input``: (SQL, its columns, its key)."""
    m = spec["main"]
    aggs, names = _aggs(spec)
    over = "PARTITION BY k ORDER BY ts"
    if m == "sql-select":
        return "SELECT id, k, v FROM input", ("id", "k", "v"), ("id",)
    if m == "sql-group-by":
        return f"SELECT k, {aggs} FROM input GROUP BY k", ("k", *names), ("k",)
    if m == "sql-global-agg":
        return f"SELECT 'all' AS k, {aggs} FROM input", ("k", *names), ("k",)
    if m.startswith("tvf-"):
        size, slide = int(spec["size_s"]), min(int(spec["slide_s"]), int(spec["size_s"]))
        tvf = {"tvf-tumble": f"TUMBLE(TABLE input, DESCRIPTOR(ts), INTERVAL '{size}' SECOND)",
               "tvf-hop": f"HOP(TABLE input, DESCRIPTOR(ts), INTERVAL '{slide}' SECOND, INTERVAL '{size}' SECOND)",
               "tvf-cumulate": f"CUMULATE(TABLE input, DESCRIPTOR(ts), INTERVAL '{slide}' SECOND, "
                               f"INTERVAL '{size}' SECOND)"}[m]
        extra = ", window_time AS ts" if spec.get("post") == "post-tvf" else ""
        return (f"SELECT k, CAST(window_start AS STRING) AS ws, CAST(window_end AS STRING) AS we{extra}, {aggs} "
                f"FROM TABLE({tvf}) GROUP BY k, window_start, window_end{', window_time' if extra else ''}",
                ("k", "ws", "we", *names), ("k", "ws", "we"))
    if m in ("over-sum-rows", "over-sum-range"):
        frame = (f"ROWS BETWEEN {int(spec['rows_preceding'])} PRECEDING AND CURRENT ROW" if m == "over-sum-rows"
                 else f"RANGE BETWEEN INTERVAL '{int(spec['size_s'])}' SECOND PRECEDING AND CURRENT ROW")
        return (f"SELECT id, k, SUM(v) OVER w AS a0, COUNT(*) OVER w AS a1 FROM input WINDOW w AS ({over} {frame})",
                ("id", "k", "a0", "a1"), ("id",))
    if m in ("over-row-number", "over-rank"):
        fn = "ROW_NUMBER()" if m == "over-row-number" else "RANK()"
        return f"SELECT id, k, {fn} OVER ({over}) AS a0 FROM input", ("id", "k", "a0"), ("id",)
    if m == "top-n":
        return (f"SELECT k, rn, id, v FROM (SELECT id, k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC, "
                f"id ASC) AS rn FROM input) WHERE rn <= {int(spec['top_n'])}", ("k", "rn", "id", "v"), ("k", "rn"))
    order = "ASC" if m == "dedup-first" else "DESC"
    return (f"SELECT k, id, v FROM (SELECT id, k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts {order}) AS rn "
            f"FROM input) WHERE rn = 1", ("k", "id", "v"), ("k",))


def sql_query(spec: dict[str, Any]) -> tuple[list[tuple[str, str]], str, tuple[str, ...], tuple[str, ...]]:
    """The views and the final query of a SQL spec: ``([(view, sql)], query, FIELDS, KEY)``.

    >>> views, q, f, k = sql_query({"sources": [{"name": "s0"}], "combine": "none", "where": None,
    ...                             "main": "sql-group-by", "aggs": ["agg-count"], "filter_c": 0, "post": None})
    >>> q, f, k
    ('SELECT k, COUNT(*) AS a0 FROM input GROUP BY k', ('k', 'a0'), ('k',))
    """
    views = [("base", _base(spec)), ("input", "SELECT * FROM base" + _where(spec))]
    main, fields, key = _main(spec)
    post = spec.get("post")
    if not post:
        return views, main, fields, key
    views.append(("main", main))
    if post == "post-group-by":
        return views, "SELECT k, COUNT(*) AS n FROM main GROUP BY k", ("k", "n"), ("k",)
    if post == "post-top-n":
        col = "a0" if "a0" in fields else "id"
        return (views, f"SELECT rn, k FROM (SELECT k, ROW_NUMBER() OVER (ORDER BY {col} DESC, k ASC) AS rn FROM main) "
                       f"WHERE rn <= {int(spec['top_n'])}", ("rn", "k"), ("rn",))
    if post == "post-tvf":
        size = int(spec["post_size_s"])
        return (views, f"SELECT k, CAST(window_start AS STRING) AS ws, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE main, "
                       f"DESCRIPTOR(ts), INTERVAL '{size}' SECOND)) GROUP BY k, window_start, window_end",
                ("k", "ws", "n"), ("k", "ws"))
    other = spec["sources"][-1]["name"]
    return (views, f"SELECT x.id AS id, m.k AS k, m.{fields[1]} AS a FROM main m JOIN {other} x ON m.k = x.k",
            ("id", "k", "a"), ("id",))


def render_sql(spec: dict[str, Any], slack: int) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """A Table/SQL job: ``({"imports", "code"}, FIELDS, KEY)``.

    Parameters
    ----------
    spec : dict
        The program's spec.
    slack : int
        The watermark's out-of-orderness bound, s.
    """
    names = [s["name"] for s in spec["sources"]]
    views, query, fields, key = sql_query(spec)
    settings = spec.get("settings") or {}
    conf = []
    if settings.get("minibatch"):
        conf += [("table.exec.mini-batch.enabled", "true"), ("table.exec.mini-batch.allow-latency", "100 ms"),
                 ("table.exec.mini-batch.size", "20")]
    if settings.get("two_phase"):
        conf.append(("table.optimizer.agg-phase-strategy", "TWO_PHASE"))
    if settings.get("distinct_split"):
        conf.append(("table.optimizer.distinct-agg.split.enabled", "true"))
    code = [f"SLACK_S = {slack}", f"CHANGELOG = {bool(spec.get('changelog'))}", f"CONFIG = {conf!r}",
            f"VIEWS = {views!r}", f"QUERY = {query!r}", _SQL_COMMON]
    many = len(names) > 1
    src = (lambda n: f'sources["{n}"]') if many else (lambda n: "source")
    body = ["    tables = StreamTableEnvironment.create(env)",
            "    for name, value in CONFIG:", "        tables.get_config().set(name, value)"]
    body += [f'    tables.create_temporary_view("{n}", _table(tables, {src(n)}))' for n in names]
    body += ["    for name, sql in VIEWS:", "        tables.create_temporary_view(name, tables.sql_query(sql))",
             "    changes = tables.to_changelog_stream(tables.sql_query(QUERY))",
             "    plain = changes.map(_plain, output_type=Types.TUPLE([Types.STRING(), Types.STRING()]))",
             "    return plain.key_by(_key_of, key_type=Types.STRING()).process(FinalTable())"]
    sig = "def job(env, sources):" if many else "def job(env, source):"
    code.append("\n" + sig + "\n" + "\n".join(body) + "\n")
    return {"imports": _SQL_IMPORTS, "code": "\n".join(code)}, fields, key
