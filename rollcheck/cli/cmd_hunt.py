"""``rollcheck spark hunt`` / ``rollcheck flink hunt``: programs rollcheck writes itself, run as cells.

See ``docs/hunt.md`` (usage) and ``specs/hunt.md`` (what a program, a cell, a finding and the
store are). The engine's side is its hunt adapter, built lazily
(``rollcheck.spark_replay.hunt.adapter.SparkHuntAdapter``,
``rollcheck.flink_replay.hunt.adapter.FlinkHuntAdapter``); the engine-neutral loop, store and
findings are :mod:`rollcheck.infra.hunt`.

Exit codes: 1 a finding; 0 no finding and at least one cell conformant; 3 nothing decided;
2 usage (one line naming the flag); 4 an internal error (also: no hunt adapter for the engine).
"""

from __future__ import annotations

import argparse
import importlib
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from rollcheck.cli._util import add_parser, check_limit, check_output_path, emit_json
from rollcheck.pyimpl.errors import InternalError, InvalidInputError

__all__ = ["ADAPTERS", "register", "register_engine"]

#: The hunt adapter of each engine: (module, class).
ADAPTERS = {
    "spark": ("rollcheck.spark_replay.hunt.adapter", "SparkHuntAdapter"),
    "flink": ("rollcheck.flink_replay.hunt.adapter", "FlinkHuntAdapter"),
}

#: Options a resumed hunt must keep (flag, meta key); another value is exit 2 naming the flag.
_KEPT = (("--seed", "seed"), ("--engine-version", "engine_version"),
         ("--reference-version", "reference_version"), ("--failures", "failures"),
         ("--providers", "providers"), ("--backends", "backends"), ("--checkpoints", "checkpoints"))

_MAX_JOBS = 64
_MAX_SHRINK_RUNS = 10_000


def register(sub: Any) -> None:
    """No command of its own: the hunt is ``spark hunt`` and ``flink hunt`` (:func:`register_engine`)."""


def register_engine(sub: Any, engine: str) -> None:
    """Add ``hunt`` to the subcommands ``sub`` of ``engine`` (``spark`` or ``flink``)."""
    p = add_parser(sub, "hunt", f"Generate {engine.capitalize()} programs and fault schedules from "
                   "grammars, run them as cells, and minimise, deduplicate, confirm and triage what "
                   "breaks (docs/hunt.md).", _hunt)
    p.set_defaults(hunt_engine=engine)
    p.add_argument("--engine-version", default=None, metavar="V", help="the release hunted (default: the pinned one)")
    p.add_argument("--reference-version", default=None, metavar="R", help="the release-differential's other release")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--budget", default=None, metavar="30m|90s|2h", help="wall-clock budget of this run (default 30m)")
    g.add_argument("--programs", type=int, default=None, metavar="N",
                   help="stop after N programs in all (counted over resumed runs)")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="default: a random one, printed "
                   "(a resumed hunt: its stored seed)")
    p.add_argument("--failures", default=None, metavar="KIND,...", help="the failure kinds to draw from")
    if engine == "spark":
        p.add_argument("--providers", default=None, metavar="P,...", help="state store providers")
    else:
        p.add_argument("--backends", default=None, metavar="B,...", help="state backends")
        p.add_argument("--checkpoints", default=None, metavar="aligned,unaligned", help="checkpoint modes")
    p.add_argument("--jobs", type=int, default=1, metavar="J", help="programs run at the same time")
    p.add_argument("--out", default=f"hunt-{engine}", metavar="DIR",
                   help=f"the hunt's folder; the same DIR resumes it (default hunt-{engine})")
    p.add_argument("--shrink-runs", type=int, default=20, metavar="N",
                   help="cell runs each finding's minimisation may spend (default 20)")
    p.add_argument("--json", action="store_true", help="print the hunt's JSON document")


def _split(text: str | None, flag: str) -> list[str] | None:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",")]
    if not items or any(not t for t in items):
        raise InvalidInputError(f"{text!r}: an empty item in the comma-separated list", location=flag)
    return items


def _requested(args: argparse.Namespace) -> dict[str, Any]:
    """The options of this run that a resumed hunt must keep (None: not given)."""
    return {"seed": args.seed, "engine_version": args.engine_version,
            "reference_version": args.reference_version,
            "failures": _split(args.failures, "--failures"),
            "providers": _split(getattr(args, "providers", None), "--providers"),
            "backends": _split(getattr(args, "backends", None), "--backends"),
            "checkpoints": _split(getattr(args, "checkpoints", None), "--checkpoints")}


def _resolve(engine: str, requested: dict[str, Any], meta: dict[str, Any] | None, store: Path) -> dict[str, Any]:
    """The options of the hunt: the stored ones for a resumed hunt (a different one given: exit 2)."""
    if meta is None:
        opts = dict(requested)
        if opts["seed"] is None:
            opts["seed"] = secrets.randbelow(2**31)
        return opts
    if meta.get("engine") != engine:
        raise InvalidInputError(f"{store} holds a {meta.get('engine')} hunt, not a {engine} one", location="--out")
    for flag, key in _KEPT:
        given = requested.get(key)
        if given is not None and given != meta.get(key):
            raise InvalidInputError(f"{given!r} differs from the hunt stored in {store} ({meta.get(key)!r}); "
                                    "resume with the same value or use another --out", location=flag)
    return {key: meta.get(key) for _, key in _KEPT}


def _adapter_class(engine: str) -> type | None:
    """The hunt adapter class of ``engine`` (None: not installed)."""
    spec = os.environ.get("ROLLCHECK_HUNT_ADAPTER", "").strip()
    module_name, cls_name = spec.split(":", 1) if spec else ADAPTERS[engine]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if spec or e.name is None or not module_name.startswith(e.name):
            raise
        return None
    cls = getattr(module, cls_name, None)
    if not isinstance(cls, type):
        if spec:
            raise InternalError(f"ROLLCHECK_HUNT_ADAPTER: {module_name} has no class {cls_name}")
        return None
    return cls


def _check(args: argparse.Namespace) -> tuple[Any, Path]:
    """The budget and the hunt's folder, checked before anything is written."""
    from rollcheck.infra.hunt import Budget, parse_duration
    from rollcheck.infra.hunt.budget import DEFAULT_BUDGET

    check_limit(args.jobs, _MAX_JOBS, "--jobs", low=1)
    check_limit(args.shrink_runs, _MAX_SHRINK_RUNS, "--shrink-runs", low=0)
    if args.seed is not None and not 0 <= args.seed < 2**63:
        raise InvalidInputError(f"must be in [0, 2**63), got {args.seed}", location="--seed")
    if args.programs is not None:
        check_limit(args.programs, 10**7, "--programs", low=1)
        budget = Budget(programs=args.programs)
    else:
        budget = Budget(seconds=parse_duration(args.budget or DEFAULT_BUDGET, "--budget"))
    out = check_output_path(args.out, "--out", directory=True)
    return budget, out


def _hunt(args: argparse.Namespace) -> int:
    from rollcheck.infra.hunt import (
        Hunt,
        HuntOptions,
        HuntStore,
        build_document,
        exit_code,
        write_document,
    )

    engine = args.hunt_engine
    budget, out = _check(args)
    meta = HuntStore.read_meta(out / "hunt.sqlite")
    opts = _resolve(engine, _requested(args), meta, out / "hunt.sqlite")
    cls = _adapter_class(engine)
    if cls is None:
        module_name, cls_name = ADAPTERS[engine]
        print(f"rollcheck: internal error: no {engine} hunt adapter ({module_name}.{cls_name} is not installed)",
              file=sys.stderr)
        return 4
    lists = ("failures", "providers") if engine == "spark" else ("failures", "backends", "checkpoints")
    kwargs = {"engine_version": opts["engine_version"], "reference_version": opts["reference_version"],
              "seed": opts["seed"], **{k: opts[k] for k in lists if opts.get(k) is not None}}
    adapter = cls(**kwargs, out=out, jobs=args.jobs)
    print(f"hunt: seed {opts['seed']}{' (resumed)' if meta else ''}, out {out}", file=sys.stderr)
    store = HuntStore.open(out / "hunt.sqlite")
    interrupted: KeyboardInterrupt | None = None
    try:
        if meta is None:
            store.set_meta(format="rollcheck.hunt/1", engine=engine, adapter=f"{cls.__module__}.{cls.__name__}",
                           **{key: opts.get(key) for _, key in _KEPT})
        hunt = Hunt(adapter, store, HuntOptions(out=out, seed=int(opts["seed"]), budget=budget, jobs=args.jobs,
                                                shrink_runs=args.shrink_runs, progress=sys.stderr))
        try:
            hunt.run()
        except KeyboardInterrupt as e:
            interrupted = e
        doc = build_document(adapter, store, out, budget)
        write_document(doc, out / "hunt.json")
    finally:
        store.close()
        adapter.close()
    if interrupted is not None:
        raise interrupted
    if args.json:
        emit_json(doc)
    else:
        _summary(doc, out)
    return exit_code(doc)


def _summary(doc: dict[str, Any], out: Path) -> None:
    print(f"hunt: {doc['programs']} programs, {doc['cells']} cells, {len(doc['findings'])} finding(s), "
          f"{doc['unconfirmed']} unconfirmed; seed {doc['seed']}")
    for f in doc["findings"]:
        print(f"  {f['id']} {f['status']}: {f['signature']} ({f['programs']} program(s)) {f['module']}")
    print(f"  document: {out / 'hunt.json'}")
