"""A registry of the properties every algorithm must satisfy, with an example-counting runner.

A property is a Hypothesis test function (decorated with ``@given``) registered with
:func:`prop`, which records its name, the algorithm it targets and the theorem of ``specs/`` it
checks. Implementations under test are passed as keyword arguments with defaults, so the same
property runs against the reference and against a mutant::

    @prop("recovery-line-is-max", target="recovery", theorem="specs/theorems.md#T4")
    @given(p=patterns())
    def recovery_line_is_max(p, line=recovery_line): ...

(Hypothesis itself refuses parameters with defaults; :func:`prop` rebuilds the test so that
the defaulted parameters become implementation slots.) Call ``recovery_line_is_max()`` to run it
against the reference, ``recovery_line_is_max(line=broken)`` against a mutant.

:func:`run_property` runs one property under a profile and counts the examples it actually
executed; zero examples is *inconclusive*, never a pass.
"""

from __future__ import annotations

import contextvars
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import Phase, given, settings
from hypothesis.errors import Unsatisfiable

from rollcheck.properties.profiles import registered as _registered

__all__ = ["Property", "PropertyResult", "PROPERTIES", "prop", "run_property", "fails_on", "catches"]


@dataclass(frozen=True)
class Property:
    name: str
    target: str
    theorem: str
    func: Callable[..., Any]


@dataclass
class PropertyResult:
    name: str
    target: str
    theorem: str
    status: str  # "pass" | "fail" | "inconclusive"
    examples: int
    seconds: float
    error: str | None = None
    counterexample: Any = field(default=None, repr=False)


PROPERTIES: dict[str, Property] = {}


_IMPLS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("rollcheck_impls", default=None)
_COUNTER: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("rollcheck_counter", default=None)


def _rebuild(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn ``@given(...) def f(x, impl=default)`` into a runnable, example-counting property.

    Hypothesis refuses test functions whose parameters have defaults. The implementation
    parameters (those with defaults) are therefore removed from the signature Hypothesis sees and
    filled in from the defaults, or from the substitutes passed to the returned runner. The
    rebuilt test also counts the examples that ran to a verdict (for :func:`run_property`).
    """
    handle = func.hypothesis  # type: ignore[attr-defined]
    inner = handle.inner_test
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
        try:
            result = inner(**full)
        except AssertionError:
            if counter is not None:
                counter[0] += 1
            raise
        if counter is not None:
            counter[0] += 1  # an example that ran to a verdict (not rejected by assume())
        return result

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
    return runner


def prop(name: str, *, target: str, theorem: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a Hypothesis property under ``name`` (apply it above ``@given``).

    Parameters with defaults are implementation slots: ``f(impl=broken)`` (or
    ``run_property(name, impl=broken)``) runs the property against a substitute.
    """

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        if not hasattr(func, "hypothesis"):
            raise TypeError(f"property {name} must be decorated with @given first")
        runner = _rebuild(func)
        if name in PROPERTIES and PROPERTIES[name].func.__qualname__ != runner.__qualname__:
            raise ValueError(f"duplicate property name {name}")
        PROPERTIES[name] = Property(name, target, theorem, runner)
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
    counter = [0]
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
    status, error, cex = "pass", None, None
    try:
        if seed is None:
            from rollcheck.properties.profiles import seed as env_seed

            seed = env_seed()
        if seed is not None:
            from hypothesis import seed as hseed

            hseed(seed)(getattr(func, "_hyp", func))
        func(**impls)
    except Unsatisfiable as e:  # every example was filtered out: nothing was checked
        status, error = "inconclusive", f"Unsatisfiable: {e}"
    except AssertionError as e:
        status, error, cex = "fail", f"{type(e).__name__}: {e}", getattr(e, "counterexample", None)
    except BaseExceptionGroup as eg:  # several distinct failures: report the first
        first = eg.exceptions[0]
        status, error = "fail", f"{type(first).__name__}: {first}"
        cex = getattr(first, "counterexample", None)
    except Exception as e:  # a crash of the implementation is a failure too
        status, error = "fail", f"{type(e).__name__}: {e}"
    finally:
        _COUNTER.reset(count_token)
        if overrides or base is not previous:
            settings.register_profile("_rollcheck_tmp", previous)
            settings.load_profile("_rollcheck_tmp")
    dt = time.perf_counter() - t0
    if status == "pass" and counter[0] == 0:
        status, error = "inconclusive", "no example was executed"
    return PropertyResult(p.name, p.target, p.theorem, status, counter[0], dt, error, cex)


def fails_on(p: Property | str, drawn: dict[str, Any], **impls: Any) -> bool:
    """Run a property's body once on fixed drawn values; True iff it fails (for reducers)."""
    if isinstance(p, str):
        p = PROPERTIES[p]
    core = p.func._core  # type: ignore[attr-defined]
    token = _IMPLS.set(impls)
    try:
        core(**drawn)
    except AssertionError:
        return True
    except Exception:  # a crash is not the same failure: the reducer must not drift into it
        return False
    finally:
        _IMPLS.reset(token)
    return False


def catches(p: Property | str, max_examples: int | None = None, **impls: Any) -> bool:
    """True iff the property fails when run against the substituted (broken) implementations."""
    return run_property(p, max_examples=max_examples, **impls).status == "fail"
