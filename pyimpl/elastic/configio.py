"""The ``rollcheck.elastic/1`` document: a simulator configuration plus an optional failure.

Counterexamples of the elastic properties are written in this format, and
``rollcheck elastic simulate FILE`` replays them. Layout (``docs/elastic.md``)::

    {"format": "rollcheck.elastic/1", "keys": 6, "ops": ["affine", "sum"],
     "parallelism": [1, 2], "rounds": 10, "max_rate": 4, "ack_interval": 1,
     "checkpoint_interval": 3, "seed": 0, "workload": "uniform",
     "scaling": [{"round": 4, "op": 2, "parallelism": 3}],
     "failure": {"step": 57, "op": 2, "key": 1, "parallel": 1}}

``failure`` may be ``null`` or absent; its ``parallel`` (default 1) is the number of tasks that
recover the failed task's keys (parallel recovery). Every other field except ``format`` and ``ops`` has the
default of :class:`rollcheck.pyimpl.elastic.Config`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollcheck.pyimpl.elastic.config import Config, Failure, ScaleEvent
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.jsonio import load_json_file, safe_name

__all__ = ["FORMAT", "config_to_dict", "config_from_dict", "load_config"]

FORMAT = "rollcheck.elastic/1"
_INT_FIELDS = ("keys", "rounds", "max_rate", "ack_interval", "checkpoint_interval", "seed")
_FIELDS = frozenset({"format", "ops", "parallelism", "workload", "scaling", "failure", *_INT_FIELDS})
_SCALE_FIELDS = frozenset({"round", "op", "parallelism"})
_FAILURE_FIELDS = frozenset({"step", "op", "key", "parallel"})


def _no_unknown(obj: dict[str, Any], known: frozenset[str], where: str) -> None:
    for k in obj:
        if k not in known:
            raise InvalidInputError(f"unknown field {safe_name(k)} (known: {', '.join(sorted(known))})",
                                    location=f"{where}{k}" if isinstance(k, str) and len(k) < 80 else where.rstrip(".") or None)


def config_to_dict(cfg: Config, failure: Failure | None = None) -> dict[str, Any]:
    """The JSON document of ``cfg`` (and ``failure``).

    Parameters
    ----------
    cfg : Config
        The configuration.
    failure : Failure, optional
        The failure to inject (None: written as null).

    Examples
    --------
    >>> d = config_to_dict(Config(keys=3), Failure(5, 1, 2))
    >>> config_from_dict(d) == (Config(keys=3), Failure(5, 1, 2))
    True
    """
    return {
        "format": FORMAT,
        "keys": cfg.keys,
        "ops": list(cfg.ops),
        "parallelism": list(cfg.parallelism),
        "rounds": cfg.rounds,
        "max_rate": cfg.max_rate,
        "ack_interval": cfg.ack_interval,
        "checkpoint_interval": cfg.checkpoint_interval,
        "seed": cfg.seed,
        "workload": cfg.workload,
        "scaling": [{"round": s.round, "op": s.op, "parallelism": s.parallelism} for s in cfg.scaling],
        "failure": None if failure is None else {"step": failure.step, "op": failure.op, "key": failure.key,
                                                 "parallel": failure.parallel},
    }


def _int(obj: dict[str, Any], name: str, where: str) -> int:
    if name not in obj:
        raise InvalidInputError("missing field", location=f"{where}{name}")
    v = obj.get(name)
    if not isinstance(v, int) or isinstance(v, bool):
        raise InvalidInputError(f"must be an integer, got {safe_name(v)}", location=f"{where}{name}")
    return v


def config_from_dict(doc: Any, source: str | None = None, *,
                     allow_large: bool = True) -> tuple[Config, Failure | None]:
    """Parse and validate a ``rollcheck.elastic/1`` document; errors name the field.

    Unknown fields are rejected. With ``allow_large=False`` (the CLI's default) the run-size bounds
    of :data:`rollcheck.pyimpl.elastic.config.LIMITS` are enforced as well.

    Parameters
    ----------
    doc : object
        The parsed JSON document.
    source : str, optional
        The file name that error messages give.
    allow_large : bool, optional
        Skip the run-size bounds.

    Returns
    -------
    tuple
        The :class:`Config` and the :class:`Failure` or None.

    Examples
    --------
    >>> config_from_dict({"format": "rollcheck.elastic/1", "ops": ["sum"], "keyz": 3}, "c.json")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: c.json: keyz: unknown field 'keyz' (known: ack_interval, checkpoint_interval, failure, format, keys, max_rate, ops, parallelism, rounds, scaling, seed, workload)
    """
    try:
        if not isinstance(doc, dict):
            raise InvalidInputError(f"expected a JSON object, got {safe_name(doc)}")
        if doc.get("format") != FORMAT:
            raise InvalidInputError(f"expected {FORMAT!r}, got {safe_name(doc.get('format'))}", location="format")
        _no_unknown(doc, _FIELDS, "")
        ops = doc.get("ops")
        if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
            raise InvalidInputError("must be a list of operator names", location="ops")
        if len(ops) > 1000:
            raise InvalidInputError(f"{len(ops)} operators is more than any pipeline can run", location="ops")
        for i, o in enumerate(ops):
            if len(o) > 80:
                raise InvalidInputError(f"unknown operator {safe_name(o)}", location=f"ops[{i}]")
        defaults = Config(ops=tuple(ops), parallelism=tuple(1 for _ in ops))
        kw: dict[str, Any] = {}
        for name in _INT_FIELDS:
            kw[name] = _int(doc, name, "") if name in doc else getattr(defaults, name)
        par = doc.get("parallelism", list(defaults.parallelism))
        if not isinstance(par, list) or not all(isinstance(g, int) and not isinstance(g, bool) for g in par):
            raise InvalidInputError("must be a list of integers", location="parallelism")
        scaling = doc.get("scaling", [])
        if not isinstance(scaling, list):
            raise InvalidInputError("must be a list", location="scaling")
        evs = []
        for j, s in enumerate(scaling):
            if not isinstance(s, dict):
                raise InvalidInputError("must be an object", location=f"scaling[{j}]")
            _no_unknown(s, _SCALE_FIELDS, f"scaling[{j}].")
            evs.append(ScaleEvent(_int(s, "round", f"scaling[{j}]."), _int(s, "op", f"scaling[{j}]."),
                                  _int(s, "parallelism", f"scaling[{j}].")))
        workload = doc.get("workload", "uniform")
        if not isinstance(workload, str):
            raise InvalidInputError(f"must be a string, got {safe_name(workload)}", location="workload")
        if workload not in ("uniform", "constant"):
            raise InvalidInputError(f"must be 'uniform' or 'constant', got {safe_name(workload)}",
                                    location="workload")
        cfg = Config(ops=tuple(ops), parallelism=tuple(par), scaling=tuple(evs), workload=workload, **kw)
        cfg.check_bounds(allow_large)
        cfg.validate()
        f = doc.get("failure")
        failure = None
        if f is not None:
            if not isinstance(f, dict):
                raise InvalidInputError("must be an object or null", location="failure")
            _no_unknown(f, _FAILURE_FIELDS, "failure.")
            failure = Failure(_int(f, "step", "failure."), _int(f, "op", "failure."), _int(f, "key", "failure."),
                              _int(f, "parallel", "failure.") if "parallel" in f else 1)
            if failure.parallel < 1:
                raise InvalidInputError(f"must be at least 1, got {failure.parallel}", location="failure.parallel")
            if failure.step < 1:
                raise InvalidInputError(f"must be at least 1, got {failure.step}", location="failure.step")
            if not 1 <= failure.op <= len(cfg.ops):
                raise InvalidInputError(f"must be in 1..{len(cfg.ops)}, got {failure.op}", location="failure.op")
            if not 0 <= failure.key < cfg.keys:
                raise InvalidInputError(f"must be in 0..{cfg.keys - 1}, got {failure.key}", location="failure.key")
        return cfg, failure
    except InvalidInputError as e:
        raise e.with_source(source) if source else e from None


def load_config(path: str | Path, *, allow_large: bool = True) -> tuple[Config, Failure | None]:
    """Read a ``rollcheck.elastic/1`` file (the checks of :mod:`rollcheck.pyimpl.jsonio`, at most 1 MiB).

    Parameters
    ----------
    path : str or Path
        The configuration file.
    allow_large : bool, optional
        Skip the run-size bounds.

    Returns
    -------
    tuple
        The :class:`Config` and the :class:`Failure` or None.
    """
    doc = load_json_file(path, max_bytes=2**20, reject_duplicate_keys=True)
    return config_from_dict(doc, source=str(path), allow_large=allow_large)
