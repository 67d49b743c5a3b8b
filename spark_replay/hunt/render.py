"""A hunt program's spec rendered as an ordinary query module (DataFrame or SQL form).

:func:`render` is a pure function of the spec (the hunt re-renders every shrunk spec): the module
has a docstring saying it was generated (seed, index) and what it does, ``SCHEMA`` (one source) or
``SOURCES``, ``batches(seed)`` returning the drawn data literally (``datetime.datetime(...)``,
``float("nan")``), ``query(...)``, ``OUTPUT_MODE`` and ``KEY``. The SQL form applies each source's
watermark on the DataFrame, registers temporary views (names hashed from the spec) and runs the
rest as one ``spark.sql`` statement of common table expressions.

Expressions of the grammar are JSON lists: ``["col", name]``, ``["lit", value, type]``,
``["cmp", op, a, b]``, ``["and", a, b]``, ``["or", a, b]``, ``["not", a]``, ``["isnull", a]``,
``["isnotnull", a]``, ``["coalesce", a, b]``, ``["concat", a, b]``, ``["add", a, b]``.

Examples
--------
>>> py_expr(["cmp", ">", ["col", "v"], ["lit", 3, "INT"]])
'(F.col("v") > F.lit(3))'
>>> sql_expr(["and", ["isnotnull", ["col", "k"]], ["lit", False, "BOOLEAN"]])
'(`k` IS NOT NULL AND false)'
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from typing import Any

from rollcheck.spark_replay.hunt.plan import Rel, agg_name, analyse, key_columns, window_name

__all__ = ["py_expr", "render", "spec_hash", "sql_expr", "value_literal"]

_PY_CMP = {"=": "==", "!=": "!=", "<": "<", ">": ">", "<=": "<=", ">=": ">="}
_SQL_AGG = {"count": "count", "sum": "sum", "min": "min", "max": "max", "avg": "avg", "first": "first",
            "last": "last", "count-distinct": "approx_count_distinct"}
_PY_AGG = {"count": "F.count", "sum": "F.sum", "min": "F.min", "max": "F.max", "avg": "F.avg",
           "first": "F.first", "last": "F.last", "count-distinct": "F.approx_count_distinct"}
_JOIN_SQL = {"inner": "JOIN", "left_outer": "LEFT OUTER JOIN", "right_outer": "RIGHT OUTER JOIN",
             "full_outer": "FULL OUTER JOIN", "left_semi": "LEFT SEMI JOIN"}


def spec_hash(spec: dict[str, Any]) -> str:
    """Eight hex digits of the spec's canonical JSON (temporary view names)."""
    return hashlib.blake2b(json.dumps(spec, sort_keys=True).encode(), digest_size=4).hexdigest()


def _lit_py(v: Any, t: str) -> str:
    if t == "BIGINT":
        return f'F.lit({v!r}).cast("bigint")'
    if t == "DOUBLE":
        return f'F.lit({float(v)!r})'
    return f"F.lit({v!r})"


def _lit_sql(v: Any, t: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if t == "STRING":
        return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if t == "BIGINT":
        return f"CAST({int(v)} AS BIGINT)"
    if t == "DOUBLE":
        return f"CAST({float(v)!r} AS DOUBLE)"
    return str(v)


def py_expr(e: list[Any]) -> str:
    """An expression as PySpark Column code."""
    h = e[0]
    if h == "col":
        return f'F.col("{e[1]}")'
    if h == "lit":
        return _lit_py(e[1], e[2])
    if h == "cmp":
        return f"({py_expr(e[2])} {_PY_CMP[e[1]]} {py_expr(e[3])})"
    if h in ("and", "or"):
        return f"({py_expr(e[1])} {'&' if h == 'and' else '|'} {py_expr(e[2])})"
    if h == "not":
        return f"(~{py_expr(e[1])})"
    if h == "isnull":
        return f"{py_expr(e[1])}.isNull()"
    if h == "isnotnull":
        return f"{py_expr(e[1])}.isNotNull()"
    if h == "coalesce":
        return f"F.coalesce({py_expr(e[1])}, {py_expr(e[2])})"
    if h == "concat":
        return f"F.concat({py_expr(e[1])}, {py_expr(e[2])})"
    if h == "add":
        return f"({py_expr(e[1])} + {py_expr(e[2])})"
    raise ValueError(f"unknown expression {h!r}")


def sql_expr(e: list[Any], q: str = "") -> str:
    """An expression as Spark SQL (columns qualified by ``q`` when given).

    Parameters
    ----------
    e : list
        The expression.
    q : str, optional
        The qualifier of its columns.

    Returns
    -------
    str
        Spark SQL.
    """
    h = e[0]
    if h == "col":
        return f"{q}`{e[1]}`"
    if h == "lit":
        return _lit_sql(e[1], e[2])
    if h == "cmp":
        return f"({sql_expr(e[2], q)} {e[1]} {sql_expr(e[3], q)})"
    if h in ("and", "or"):
        return f"({sql_expr(e[1], q)} {h.upper()} {sql_expr(e[2], q)})"
    if h == "not":
        return f"(NOT {sql_expr(e[1], q)})"
    if h in ("isnull", "isnotnull"):
        return f"{sql_expr(e[1], q)} IS {'NOT ' if h == 'isnotnull' else ''}NULL"
    if h in ("coalesce", "concat"):
        return f"{h}({sql_expr(e[1], q)}, {sql_expr(e[2], q)})"
    if h == "add":
        return f"({sql_expr(e[1], q)} + {sql_expr(e[2], q)})"
    raise ValueError(f"unknown expression {h!r}")


def value_literal(v: Any, t: str) -> str:
    """One input value as Python source.

    Timestamps stored as ISO strings, doubles' NaN and infinities as strings.

    Parameters
    ----------
    v : Any
        The value.
    t : str
        The column's SQL type.

    Returns
    -------
    str
        Python source.
    """
    if v is None:
        return "None"
    if t == "TIMESTAMP":
        d = dt.datetime.fromisoformat(v)
        return (f"datetime.datetime({d.year}, {d.month}, {d.day}, {d.hour}, {d.minute}, {d.second}"
                + (f", {d.microsecond})" if d.microsecond else ")"))
    if t == "DOUBLE":
        f = float(v)
        if math.isnan(f) or math.isinf(f):
            return f'float("{v}")'
        return repr(f)
    return repr(v)


def _join_cond(step: dict[str, Any]) -> str:
    parts = [f"l.`{lc}` = r.`{rc}`" for lc, rc in step["eq"]]
    b = step.get("bound")
    if b:
        parts.append(f"l.`{b['l']}` >= r.`{b['r']}` - INTERVAL {b['lower']} SECONDS")
        parts.append(f"l.`{b['l']}` <= r.`{b['r']}` + INTERVAL {b['upper']} SECONDS")
    return " AND ".join(parts)


def _join_select(lrel: Rel, rrel: Rel, how: str) -> list[tuple[str, str]]:
    """(qualified source column, output name) of a join's output."""
    out = [(f"l.{c}", c) for c in lrel.names]
    if how != "left_semi":
        lnames = set(lrel.names)
        out += [(f"r.{c}", f"r_{c}" if c in lnames else c) for c in rrel.names]
    return out


def _static_rows(step: dict[str, Any]) -> str:
    cols = step["static"]["columns"]
    rows = ", ".join("(" + ", ".join(value_literal(v, t) for v, (_, t) in zip(r, cols, strict=True)) + ",)"
                     for r in step["static"]["rows"])
    return f"[{rows}]"


def _static_ddl(step: dict[str, Any]) -> str:
    return ", ".join(f"{c} {t}" for c, t in step["static"]["columns"])


def _window_py(w: dict[str, Any]) -> str:
    col = f'F.window_time("{w["col"]}")' if w.get("of_window") else f'"{w["col"]}"'
    if w["kind"] == "session":
        return f'F.session_window({col}, "{w["gap"]} seconds")'
    slide = f', "{w["slide"]} seconds"' if w["kind"] == "sliding" else ""
    return f'F.window({col}, "{w["size"]} seconds"{slide})'


def _window_sql(w: dict[str, Any]) -> str:
    col = f"window_time(`{w['col']}`)" if w.get("of_window") else f"`{w['col']}`"
    if w["kind"] == "session":
        return f"session_window({col}, '{w['gap']} seconds')"
    slide = f", '{w['slide']} seconds'" if w["kind"] == "sliding" else ""
    return f"window({col}, '{w['size']} seconds'{slide})"


def _df_step(i: int, step: dict[str, Any], rels: list[Rel], params: dict[str, str]) -> list[str]:
    """The DataFrame-form lines of step ``i`` (assigning ``r{i}``)."""
    op, v = step["op"], f"r{i}"
    if op == "source":
        return [f"{v} = {params[step['source']]}"]
    src = f"r{step['in']}" if "in" in step else ""
    if op == "watermark":
        return [f'{v} = {src}.withWatermark("{step["col"]}", "{step["delay"]} seconds")']
    if op == "filter":
        return [f"{v} = {src}.where({py_expr(step['pred'])})"]
    if op == "project":
        cols = ", ".join(py_expr(e) if e == ["col", n] else f'{py_expr(e)}.alias("{n}")' for n, e in step["cols"])
        return [f"{v} = {src}.select({cols})"]
    if op == "agg":
        keys = ([_window_py(step["window"])] if step.get("window") else []) + [f'"{k}"' for k in step["keys"]]
        aggs = ", ".join(
            'F.count(F.lit(1)).alias("cnt")' if c is None else f'{_PY_AGG[fn]}("{c}").alias("{agg_name(fn, c)}")'
            for fn, c in step["aggs"])
        return [f"{v} = {src}.groupBy({', '.join(keys)}).agg({aggs})"]
    if op == "dedup":
        meth = "dropDuplicatesWithinWatermark" if step.get("within") else "dropDuplicates"
        return [f"{v} = {src}.{meth}({step['cols']!r})".replace("'", '"')]
    if op == "join":
        lrel, rrel = rels[step["left"]], rels[step["right"]]
        sel = ", ".join(f'F.col("{q}").alias("{n}")' for q, n in _join_select(lrel, rrel, step["how"]))
        return [f'{v} = (r{step["left"]}.alias("l").join(r{step["right"]}.alias("r"), '
                f'F.expr("{_join_cond(step)}"), "{step["how"]}")',
                f"      .select({sel}))"]
    if op == "join_static":
        rel = rels[step["in"]]
        sel = ", ".join([f'F.col("l.{c}").alias("{c}")' for c in rel.names]
                        + (['F.col("s.s_tag").alias("s_tag")'] if step["how"] != "left_semi" else []))
        return [f"static{i} = {src}.sparkSession.createDataFrame({_static_rows(step)}, \"{_static_ddl(step)}\")",
                f'{v} = ({src}.alias("l").join(static{i}.alias("s"), F.expr("l.`{step["col"]}` = s.s_k"), '
                f'"{step["how"]}")',
                f"      .select({sel}))"]
    if op == "union":
        return [f"{v} = r{step['left']}.union(r{step['right']})"]
    if op == "pandas_state":
        rel = rels[i]
        ddl = ", ".join(f"{c} {t}" for c, t in rel.cols)
        return [f'{v} = {src}.groupBy("{step["key"]}").applyInPandasWithState(',
                f'    _state_fn, "{ddl}", "cnt BIGINT, total DOUBLE", "{step["mode"].capitalize()}",',
                "    GroupStateTimeout.NoTimeout)"]
    raise ValueError(f"unknown step {op!r}")


def _sql_step(i: int, step: dict[str, Any], rels: list[Rel]) -> str:
    """The SELECT of step ``i`` (a common table expression ``r{i}``)."""
    op = step["op"]
    src = f"r{step['in']}" if "in" in step else ""
    if op == "filter":
        return f"SELECT * FROM {src} WHERE {sql_expr(step['pred'])}"
    if op == "project":
        return "SELECT " + ", ".join(f"{sql_expr(e)} AS `{n}`" for n, e in step["cols"]) + f" FROM {src}"
    if op == "agg":
        w = step.get("window")
        keys = [f"`{k}`" for k in step["keys"]]
        group = ([_window_sql(w)] if w else []) + keys
        sel = ([f"{_window_sql(w)} AS {window_name(w['kind'])}"] if w else []) + keys
        sel += ["count(*) AS cnt" if c is None else f"{_SQL_AGG[fn]}(`{c}`) AS `{agg_name(fn, c)}`"
                for fn, c in step["aggs"]]
        return f"SELECT {', '.join(sel)} FROM {src} GROUP BY {', '.join(group)}"
    if op == "join":
        jsel = ", ".join(f"{q.split('.')[0]}.`{q.split('.', 1)[1]}` AS `{n}`"
                         for q, n in _join_select(rels[step["left"]], rels[step["right"]], step["how"]))
        return (f"SELECT {jsel} FROM r{step['left']} AS l {_JOIN_SQL[step['how']]} r{step['right']} AS r "
                f"ON {_join_cond(step)}")
    if op == "join_static":
        ssel = ", ".join([f"l.`{c}`" for c in rels[step["in"]].names]
                         + (["s.s_tag"] if step["how"] != "left_semi" else []))
        return (f"SELECT {ssel} FROM {src} AS l {_JOIN_SQL[step['how']]} static{i} AS s "
                f"ON l.`{step['col']}` = s.s_k")
    if op == "union":
        return f"SELECT * FROM r{step['left']} UNION ALL SELECT * FROM r{step['right']}"
    raise ValueError(f"step {op!r} has no SQL form")


def _output_select(rel: Rel, var: str) -> str:
    cols = []
    for c, t in rel.cols:
        if t == "WINDOW":
            cols += [f'F.col("{c}.start").alias("{c}_start")', f'F.col("{c}.end").alias("{c}_end")']
        else:
            cols.append(f'F.col("{c}")')
    return f"{var}.select({', '.join(cols)})"


def _query_body(spec: dict[str, Any], rels: list[Rel], params: dict[str, str]) -> list[str]:
    steps = spec["steps"]
    if spec.get("form") != "sql":
        lines = [ln for i, s in enumerate(steps) for ln in _df_step(i, s, rels, params)]
        return lines + [f"return {_output_select(rels[-1], f'r{len(steps) - 1}')}"]
    h = spec_hash(spec)
    lines, ctes = [], []
    for i, s in enumerate(steps):
        if s["op"] in ("source", "watermark"):
            lines += _df_step(i, s, rels, params)
            reader = any(t.get("in") == i or t.get("left") == i or t.get("right") == i
                         for t in steps if t["op"] not in ("watermark",))
            if reader:
                lines.append(f'r{i}.createOrReplaceTempView("h{h}_r{i}")')
                ctes.append(f"r{i} AS (SELECT * FROM h{h}_r{i})")
            continue
        if s["op"] == "join_static":
            lines.append(f"static{i}_df = r0.sparkSession.createDataFrame({_static_rows(s)}, "
                         f"\"{_static_ddl(s)}\")")
            lines.append(f'static{i}_df.createOrReplaceTempView("h{h}_static{i}")')
            ctes.append(f"static{i} AS (SELECT * FROM h{h}_static{i})")
        ctes.append(f"r{i} AS ({_sql_step(i, s, rels)})")
    last = len(steps) - 1
    lines.append("sql = (" + "\n       ".join(
        json.dumps(part + ("," if k < len(ctes) - 1 else "") + " ") for k, part in
        enumerate(["WITH " + ctes[0]] + ctes[1:])) + f"\n       {json.dumps(f'SELECT * FROM r{last}')})")
    lines.append(f"r{last} = r0.sparkSession.sql(sql)")
    lines.append(f"return {_output_select(rels[-1], f'r{last}')}")
    return lines


def _describe(spec: dict[str, Any], rels: list[Rel]) -> str:
    ops = [k for k in rels[-1].kinds if k != "source"]
    srcs = ", ".join(spec["sources"])
    text = (f"Generated by rollcheck's hunt (seed {spec.get('seed')}, program {spec.get('index')}"
            f"{', shrunk' if spec.get('shrunk') else ''}) for Spark {spec['release']} rules, "
            f"{spec.get('form', 'dataframe')} form: reads {srcs}; "
            f"{' -> '.join(ops) if ops else 'passes the rows through'}; output mode "
            f"{spec['output_mode']}"
            f"{'; its own idempotent foreachBatch sink' if spec.get('sink') == 'foreachbatch' else ''}.")
    words, out, line = text.split(), [], ""
    for w in words:
        if len(line) + len(w) + 1 > 96:
            out.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    return "\n".join(out + [line])


def _batches_lines(spec: dict[str, Any]) -> list[str]:
    names = list(spec["sources"])
    multi = len(names) > 1
    out = ["def batches(seed):", "    return ["]
    for batch in spec["batches"]:
        parts = []
        for n in names:
            rows = batch.get(n) or []
            types = [t for _, t in spec["sources"][n]]
            lits = ["(" + ", ".join(value_literal(v, t) for v, t in zip(r, types, strict=True)) + ",)" for r in rows]
            if multi and not rows:
                continue
            parts.append((n, lits))
        if not multi:
            lits = parts[0][1] if parts else []
            out.append("        [" + ",\n         ".join(lits) + "],")
        else:
            inner = ",\n         ".join(f'"{n}": [' + ",\n             ".join(lits) + "]" for n, lits in parts)
            out.append("        {" + inner + "},")
    out.append("    ]")
    return out


_SINK = ["def sink(batch_df, batch_id, out_dir):",
         "    import json",
         "    import os",
         "",
         "    rows = [{k: (v.isoformat() if isinstance(v, datetime.datetime) else v) for k, v in r.asDict().items()}",
         "            for r in batch_df.collect()]",
         '    path = os.path.join(out_dir, f"part-{batch_id:05d}.json")',
         '    with open(path + ".tmp", "w", encoding="utf-8") as f:',
         "        json.dump(rows, f)",
         '    os.replace(path + ".tmp", path)  # idempotent: a batch run again replaces its file',
         "", "",
         "def read_output(out_dir):",
         "    import glob",
         "    import json",
         "    import os",
         "",
         "    rows = []",
         '    for path in sorted(glob.glob(os.path.join(out_dir, "part-*.json"))):',
         '        with open(path, encoding="utf-8") as f:',
         "            rows += json.load(f)",
         "    return rows", "", ""]


def render(spec: dict[str, Any]) -> str:
    """The query module of ``spec`` (deterministic text)."""
    rels = analyse(spec)
    names = list(spec["sources"])
    multi = len(names) > 1
    params = {n: (n if multi else "df") for n in names}
    rel = rels[-1]
    lines = ['"""' + _describe(spec, rels) + '\n"""', "", "import datetime", "",
             "from pyspark.sql import functions as F", ""]
    if multi:
        lines.append("SOURCES = {" + ",\n           ".join(
            f'"{n}": "' + ", ".join(f"{c} {t}" for c, t in spec["sources"][n]) + '"' for n in names) + "}")
    else:
        lines.append('SCHEMA = "' + ", ".join(f"{c} {t}" for c, t in spec["sources"][names[0]]) + '"')
    lines += [f'OUTPUT_MODE = "{spec["output_mode"]}"',
              "KEY = " + json.dumps(key_columns(rel, spec["output_mode"])), "", ""]
    pandas = [s for s in spec["steps"] if s["op"] == "pandas_state"]
    if pandas:
        s = pandas[0]
        lines += ["def _state_fn(key, pdfs, state):", "    import pandas as pd", "",
                  "    cnt, total = state.get if state.exists else (0, 0.0)", "    for pdf in pdfs:",
                  "        cnt += len(pdf)",
                  f'        total += float(pd.to_numeric(pdf["{s["value"]}"], errors="coerce").sum())',
                  "    state.update((cnt, total))",
                  f'    yield pd.DataFrame({{"{s["key"]}": [key[0]], "cnt": [cnt], "total": [total]}})', "", ""]
    if spec.get("sink") == "foreachbatch":
        lines += _SINK
    lines += _batches_lines(spec) + ["", ""]
    lines.append(f"def query({', '.join(params[n] for n in names)}):")
    if pandas:
        lines.append("    from pyspark.sql.streaming.state import GroupStateTimeout")
        lines.append("")
    lines += ["    " + ln for ln in _query_body(spec, rels, params)]
    return "\n".join(lines) + "\n"
