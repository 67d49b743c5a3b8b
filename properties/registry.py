"""A registry of the properties every algorithm must satisfy, with an example-counting runner.

:func:`prop` registers a Hypothesis test with its target and theorem; its defaulted keyword
arguments are implementation slots, so the same property runs against the reference and against
a mutant. :func:`run_property` counts the examples run (zero is inconclusive) and the share of
:func:`interesting` ones. Only a :class:`~rollcheck.pyimpl.errors.PropertyViolation` is a
violation; any other exception is a crash. See docs/internals/properties.md#registry.
"""

from __future__ import annotations

import contextvars
import copy
import inspect
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import Phase, event, given, settings
from hypothesis.errors import Unsatisfiable
from hypothesis.strategies import DataObject

from rollcheck.properties.profiles import registered as _registered
from rollcheck.pyimpl.errors import PropertyViolation

__all__ = ["Property", "PropertyResult", "PROPERTIES", "AREAS", "prop", "run_property", "fails_on", "catches",
           "interesting", "properties_of_area", "violation_on", "measure"]

#: The areas a property (and a mutant) belongs to; ``rollcheck verify`` has one section per area.
AREAS = ("foundation", "protocols", "spans", "elastic", "intervals", "simulate")

# modules registered before areas were explicit (a colleague's modules): their area by module
_MODULE_AREAS = {
    "protocols_cic": "protocols", "protocols_forced": "protocols", "foundation": "foundation",
    "z3check": "foundation", "spans_props": "spans", "elastic_props": "elastic",
    "intervals_model": "intervals", "intervals_sim": "intervals", "intervals_trt": "intervals",
    "simulate_props": "simulate",
}


@dataclass(frozen=True)
class Property:
    """A registered property.

    ``interesting`` says which examples count as interesting (the property reports each example
    with :func:`interesting`); ``floor`` is the least fraction of interesting examples a run needs
    to count as evidence (None: reported, never enforced).
    """

    name: str
    target: str
    theorem: str
    func: Callable[..., Any]
    area: str = "foundation"
    interesting: str = ""
    floor: float | None = None


@dataclass
class PropertyResult:
    """The outcome of :func:`run_property`.

    ``status`` is ``pass`` | ``fail`` | ``inconclusive``; for a failure, ``outcome`` says why:
    ``violation`` (a :class:`PropertyViolation`: the property does not hold), ``crash`` (another
    exception: the implementation or the harness broke, nothing was shown) or ``vacuous`` (every
    example passed but fewer than ``floor`` of them were interesting).
    """

    name: str
    target: str
    theorem: str
    status: str  # "pass" | "fail" | "inconclusive"
    examples: int
    seconds: float
    error: str | None = None
    counterexample: Any = field(default=None, repr=False)
    area: str = "foundation"
    outcome: str | None = None  # "violation" | "crash" | "vacuous" (for status "fail")
    interesting: int | None = None  # examples reported interesting (None: the property does not say)
    measured: int = 0  # examples that reported whether they were interesting
    floor: float | None = None
    what: str = ""  # what "interesting" means for this property
    drawn: dict[str, Any] | None = field(default=None, repr=False)  # the violating example's values

    @property
    def fraction(self) -> float | None:
        """Interesting examples / examples that reported (None when the property does not report)."""
        if self.interesting is None or not self.measured:
            return None
        return self.interesting / self.measured

    @property
    def violated(self) -> bool:
        """True iff the run found a property violation (the only thing that kills a mutant)."""
        return self.status == "fail" and self.outcome == "violation"

    def coverage_text(self) -> str:
        """``"interesting 41% (useless checkpoint; floor 25%)"`` or ``""`` when not measured."""
        f = self.fraction
        if f is None:
            return ""
        floor = f"; floor {self.floor:.0%}" if self.floor is not None else ""
        return f"interesting {self.interesting}/{self.measured} = {f:.0%} ({self.what}{floor})"


PROPERTIES: dict[str, Property] = {}


@dataclass
class _Counter:
    examples: int = 0
    interesting: int = 0
    measured: int = 0
    flag: bool | None = None  # set by interesting() during the current example


_IMPLS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("rollcheck_impls", default=None)
_COUNTER: contextvars.ContextVar[_Counter | None] = contextvars.ContextVar("rollcheck_counter", default=None)


def interesting(flag: bool, what: str = "interesting") -> bool:
    """Report whether the current example is interesting (call it once per example).

    The flag is counted by :func:`run_property` (several calls in one example: interesting if any
    says so) and shown to Hypothesis as an ``event``. Returns ``flag``.

    Examples
    --------
    >>> interesting(True, "useless checkpoint")  # outside a run: only returns the flag
    True
    """
    flag = bool(flag)
    counter = _COUNTER.get()
    if counter is not None:
        counter.flag = bool(counter.flag) or flag
    try:
        event(what if flag else f"not {what}")
    except Exception:  # outside a Hypothesis test
        pass
    return flag


#: Measures attached to properties defined elsewhere: name -> (what, fn(**drawn) -> bool, floor).
_MEASURES: dict[str, tuple[str, Callable[..., bool], float | None]] = {}


def measure(name: str, what: str, fn: Callable[..., bool], floor: float | None = None) -> None:
    """Attach an interesting-example measure to the registered property ``name``.

    For properties whose module does not call :func:`interesting` itself: ``fn`` gets the drawn
    values of each example and says whether it is interesting; ``floor`` as in :func:`prop`.
    """
    p = PROPERTIES[name]
    if p.interesting and p.interesting != what:
        raise ValueError(f"property {name} already measures {p.interesting!r}")
    _MEASURES[name] = (what, fn, floor)
    PROPERTIES[name] = Property(p.name, p.target, p.theorem, p.func, p.area, what, floor)


def _tally(counter: _Counter | None) -> None:
    if counter is None:
        return
    counter.examples += 1
    if counter.flag is not None:
        counter.measured += 1
        counter.interesting += int(counter.flag)
    counter.flag = None


def _rebuild(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn ``@given(...) def f(x, impl=default)`` into a runnable, example-counting property.

    Hypothesis refuses test functions whose parameters have defaults. The implementation
    parameters (those with defaults) are therefore removed from the signature Hypothesis sees and
    filled in from the defaults, or from the substitutes passed to the returned runner. The
    rebuilt test also counts the examples that ran to a verdict (for :func:`run_property`).
    """
    handle = func.hypothesis  # type: ignore[attr-defined]
    inner = handle.inner_test
    meta: dict[str, str] = {}
    sig = inspect.signature(inner)
    defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not p.empty}
    given_kwargs = dict(handle._given_kwargs)
    names = [n for n, p in sig.parameters.items() if p.default is p.empty]

    def core(*args: Any, **kw: Any) -> Any:
        # Hypothesis may pass the drawn values positionally when it replays an example
        kw.update(zip(names, args, strict=False))
        subs = _IMPLS.get() or {}
        full = {**defaults, **{k: v for k, v in subs.items() if k in defaults}, **kw}
        counter = _COUNTER.get()
        recorded = dict(kw)
        if counter is not None:
            counter.flag = None
            try:  # a body may change what it was given: keep the drawn values as drawn (not st.data()'s
                # DataObject: it cannot be replayed, and copying Hypothesis's internals grows with the run)
                recorded = {k: v if isinstance(v, DataObject) else copy.deepcopy(v) for k, v in kw.items()}
            except Exception:
                pass
        try:
            result = inner(**full)
        except PropertyViolation as e:
            # the values to replay it: the reproducer
            e.drawn = recorded  # type: ignore[attr-defined]
            _measure(counter, recorded)
            _tally(counter)
            raise
        except AssertionError:
            _tally(counter)
            raise
        _measure(counter, recorded)
        _tally(counter)  # an example that ran to a verdict (not rejected by assume())
        return result

    def _measure(counter: _Counter | None, drawn: dict[str, Any]) -> None:
        m = _MEASURES.get(meta.get("name", ""))
        if counter is None or m is None or counter.flag is not None:
            return
        try:
            counter.flag = bool(m[1](**drawn))
        except Exception:  # a measure that cannot judge an example does not count it
            counter.flag = None

    core.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[p for p in sig.parameters.values() if p.default is p.empty]
    )
    core.__name__ = inner.__name__
    core.__qualname__ = inner.__qualname__
    core.__module__ = inner.__module__
    core.__doc__ = inner.__doc__
    hyp = given(**given_kwargs)(core)
    explicit_examples = getattr(func, "hypothesis_explicit_examples", None)
    if explicit_examples:  # keep @example(...) cases (applied above @given)
        hyp.hypothesis_explicit_examples = list(explicit_examples)  # type: ignore[attr-defined]
    # Hypothesis binds settings.default when @given is applied; unless the property has its own
    # @settings (kept as they are), use the profile that is active when the property runs.
    own = getattr(func, "_hypothesis_internal_use_settings", None)
    explicit = own is not None and own is not settings.default
    if explicit and own is not None:
        hyp = own(hyp)

    # the settings object this runner installed last: anything else was set on purpose by a caller
    auto = [getattr(hyp, "_hypothesis_internal_use_settings", None)]

    def runner(**impls: Any) -> Any:
        unknown = set(impls) - set(defaults)
        if unknown:
            raise TypeError(f"{inner.__name__}: no implementation parameter(s) {sorted(unknown)}")
        current = getattr(hyp, "_hypothesis_internal_use_settings", None)
        if not explicit and current is auto[0]:
            hyp._hypothesis_internal_use_settings = settings.default  # type: ignore[attr-defined]
            auto[0] = settings.default
        token = _IMPLS.set(impls)
        try:
            return hyp()
        finally:
            _IMPLS.reset(token)

    runner.__name__ = inner.__name__
    runner.__qualname__ = inner.__qualname__
    runner.__module__ = inner.__module__
    runner.__doc__ = inner.__doc__
    runner.hypothesis = hyp.hypothesis  # type: ignore[attr-defined]
    runner._hyp = hyp  # type: ignore[attr-defined]
    runner._core = core  # type: ignore[attr-defined]
    runner.is_hypothesis_test = True  # type: ignore[attr-defined]
    runner.implementation_defaults = defaults  # type: ignore[attr-defined]
    runner._meta = meta  # type: ignore[attr-defined]
    return runner


def prop(name: str, *, target: str, theorem: str, area: str | None = None, interesting: str = "",
         floor: float | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a Hypothesis property under ``name`` (apply it above ``@given``).

    Parameters with defaults are implementation slots: ``f(impl=broken)`` (or
    ``run_property(name, impl=broken)``) runs the property against a substitute. ``area`` is one
    of :data:`AREAS` (default: the area of the defining module); ``interesting`` names what the
    property reports with :func:`interesting`, ``floor`` the least fraction it must reach.
    """
    if area is not None and area not in AREAS:
        raise ValueError(f"property {name}: unknown area {area!r} (one of {AREAS})")
    if floor is not None and not (0.0 <= floor <= 1.0 and interesting):
        raise ValueError(f"property {name}: a floor needs a description of what is interesting and 0 <= floor <= 1")

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        if not hasattr(func, "hypothesis"):
            raise TypeError(f"property {name} must be decorated with @given first")
        runner = _rebuild(func)
        if name in PROPERTIES and PROPERTIES[name].func.__qualname__ != runner.__qualname__:
            raise ValueError(f"duplicate property name {name}")
        mod = runner.__module__.rsplit(".", 1)[-1]
        where = area or _MODULE_AREAS.get(mod, "foundation")
        PROPERTIES[name] = Property(name, target, theorem, runner, where, interesting, floor)
        runner._meta["name"] = name  # type: ignore[attr-defined]
        runner.property_name = name  # type: ignore[attr-defined]
        return runner

    return deco


def run_property(
    p: Property | str,
    *,
    max_examples: int | None = None,
    seed: int | None = None,
    shrink: bool = True,
    profile: str | None = None,
    **impls: Any,
) -> PropertyResult:
    """Run one property (optionally against substituted implementations) and count examples.

    ``profile`` runs it under that Hypothesis profile instead of the active one; ``shrink=False``
    skips Hypothesis's shrinking (a failure is reported as first found).
    """
    if isinstance(p, str):
        p = PROPERTIES[p]
    func = p.func
    counter = _Counter()
    count_token = _COUNTER.set(counter)
    previous = settings.default
    base = settings.get_profile(_registered(profile)) if profile is not None else previous
    overrides: dict[str, Any] = {}
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    if not shrink:
        overrides["phases"] = (Phase.explicit, Phase.reuse, Phase.generate)
    if overrides or base is not previous:
        settings.register_profile("_rollcheck_tmp", settings(base, **overrides))
        settings.load_profile("_rollcheck_tmp")
    t0 = time.perf_counter()
    status, error, cex, outcome = "pass", None, None, None
    drawn: dict[str, Any] | None = None
    try:
        if seed is None:
            from rollcheck.properties.profiles import seed as env_seed

            seed = env_seed()
        # Derandomised runs get a fixed seed per property name: Hypothesis would otherwise derive
        # one from the source of the shared runner above (the same for every property, and a
        # different one after any edit of this module).
        # (set the attribute itself: hypothesis.seed() would also replace the test's settings object,
        # after which the runner could no longer switch profiles or budgets)
        hyp = getattr(func, "_hyp", func)
        hyp._hypothesis_internal_use_seed = (  # type: ignore[union-attr]
            seed if seed is not None else zlib.crc32(p.name.encode()))
        func(**impls)
    except Unsatisfiable as e:  # every example was filtered out: nothing was checked
        status, error = "inconclusive", f"Unsatisfiable: {e}"
    except BaseExceptionGroup as eg:  # several distinct failures: report the first
        first = eg.exceptions[0]
        status, error = "fail", f"{type(first).__name__}: {first}"
        cex = getattr(first, "counterexample", None)
        outcome = "violation" if isinstance(first, PropertyViolation) else "crash"
        drawn = getattr(first, "drawn", None)
    except PropertyViolation as e:
        status, error, cex, outcome = "fail", f"{type(e).__name__}: {e}", e.counterexample, "violation"
        drawn = getattr(e, "drawn", None)
    except Exception as e:  # a crash (a bare assert included) shows nothing about the property
        status, error, outcome = "fail", f"{type(e).__name__}: {e}", "crash"
    finally:
        _COUNTER.reset(count_token)
        if overrides or base is not previous:
            settings.register_profile("_rollcheck_tmp", previous)
            settings.load_profile("_rollcheck_tmp")
    dt = time.perf_counter() - t0
    if status == "pass" and counter.examples == 0:
        status, error = "inconclusive", "no example was executed"
    res = PropertyResult(p.name, p.target, p.theorem, status, counter.examples, dt, error, cex, p.area, outcome,
                         counter.interesting if counter.measured else None, counter.measured, p.floor,
                         p.interesting, drawn)
    f = res.fraction
    if status == "pass" and p.floor is not None and (f is None or f < p.floor):
        res.status, res.outcome = "fail", "vacuous"
        res.error = (f"only {res.interesting or 0} of {counter.measured} examples were interesting "
                     f"({p.interesting}): below the floor of {p.floor:.0%}")
    return res


def violation_on(p: Property | str, drawn: dict[str, Any], **impls: Any) -> PropertyViolation | None:
    """Run a property's body once on fixed drawn values; the violation it raises, or None.

    A crash is not the same failure: reducers must not drift into it.
    """
    if isinstance(p, str):
        p = PROPERTIES[p]
    import warnings

    core = p.func._core  # type: ignore[attr-defined]
    token = _IMPLS.set(impls)
    try:
        with warnings.catch_warnings():  # assume() outside a Hypothesis run only warns
            warnings.simplefilter("ignore")
            core(**drawn)
    except PropertyViolation as e:
        return e
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # incl. Hypothesis's StopTest from a data object of a finished run
        return None
    finally:
        _IMPLS.reset(token)
    return None


def fails_on(p: Property | str, drawn: dict[str, Any], **impls: Any) -> bool:
    """Run a property's body once on fixed drawn values; True iff it fails (for reducers)."""
    if isinstance(p, str):
        p = PROPERTIES[p]
    core = p.func._core  # type: ignore[attr-defined]
    token = _IMPLS.set(impls)
    try:
        core(**drawn)
    except PropertyViolation:
        return True
    except Exception:  # a crash is not the same failure: the reducer must not drift into it
        return False
    finally:
        _IMPLS.reset(token)
    return False


def catches(p: Property | str, max_examples: int | None = None, **impls: Any) -> bool:
    """True iff the property is violated when run against the substituted (broken) implementations."""
    return run_property(p, max_examples=max_examples, **impls).violated


def properties_of_area(area: str) -> list[str]:
    """Names of the registered properties of ``area``, sorted."""
    return sorted(n for n, q in PROPERTIES.items() if q.area == area)
