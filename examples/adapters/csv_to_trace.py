"""Turn a plain CSV log of checkpoints, sends and receives into a ``rollcheck.trace/1`` file.

The log has one row per event, in the order the events happened (or with a ``time`` column to
sort by), and the columns ``time,process,event,peer,message,forced``:

- ``event`` is ``checkpoint``, ``send`` or ``receive`` (an engine's own words: edit ``KINDS``);
- ``peer`` is the destination of a send (empty otherwise);
- ``message`` is the message id of a send or receive;
- ``forced`` is ``1`` for a checkpoint the protocol forced before a receive, else ``0`` or empty.

Usage::

    python csv_to_trace.py log.csv --source myengine --protocol hmnr -o run.jsonl
    rollcheck check trace run.jsonl

Every row that cannot be converted stops the adapter with the row number and the reason, so the
trace never hides a defect of the log. Checkpoint indices are numbered 1, 2, … per process, in log
order.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys

KINDS = {"checkpoint": "checkpoint", "send": "send", "receive": "deliver"}
FORCED = {"": False, "0": False, "1": True, "false": False, "true": True}


def convert(rows: list[dict[str, str]], source: str, protocol: str | None) -> list[dict]:
    """The header and events of the trace (see the module docstring)."""
    if rows and "time" in rows[0] and all(r.get("time") for r in rows):
        rows = sorted(rows, key=lambda r: float(r["time"]))  # stable: ties keep log order
    processes: list[str] = []
    for r in rows:
        for name in (r.get("process"), r.get("peer")):
            if name and name not in processes:
                processes.append(name)
    header: dict = {"format": "rollcheck.trace/1", "source": source, "processes": processes}
    if protocol:
        header["protocol"] = protocol
    out = [header]
    index = dict.fromkeys(processes, 0)
    for row_no, r in enumerate(rows, start=2):  # row 1 is the CSV header
        kind = KINDS.get((r.get("event") or "").strip().lower())
        if kind is None:
            raise SystemExit(f"row {row_no}: unknown event {r.get('event')!r} (expected {', '.join(KINDS)})")
        ev: dict = {"seq": len(out), "kind": kind, "process": r["process"]}
        if kind == "checkpoint":
            forced = (r.get("forced") or "").strip().lower()
            if forced not in FORCED:
                raise SystemExit(f"row {row_no}: forced must be 0 or 1, got {r.get('forced')!r}")
            index[r["process"]] += 1
            ev.update(index=index[r["process"]], forced=FORCED[forced])
        else:
            if not r.get("message"):
                raise SystemExit(f"row {row_no}: {r['event']} without a message id")
            ev["message"] = r["message"]
            if kind == "send":
                if not r.get("peer"):
                    raise SystemExit(f"row {row_no}: send without a peer")
                ev["to"] = r["peer"]
        if r.get("time"):
            ev["x-time"] = r["time"]  # extra fields are kept and ignored by the checks
        out.append(ev)
    out.append({"seq": len(out), "kind": "end"})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--source", default="csvlog", help="engine name (prefix of its own event kinds)")
    ap.add_argument("--protocol", default=None, help="built-in protocol the engine runs (hmnr, bcs, uc)")
    args = ap.parse_args(argv)
    with open(args.csv, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    lines = convert(rows, args.source, args.protocol)
    with open(args.out, "w", encoding="utf-8") as fh:
        for obj in lines:
            fh.write(json.dumps(obj) + "\n")
    print(f"wrote {args.out}: {len(lines) - 1} events", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
