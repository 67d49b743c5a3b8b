"""TLA+ value parser (tla/values.py): no TLC needed."""

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.tla.values import FrozenDict, ModelValue, parse_state, parse_value, to_jsonable


@pytest.mark.parametrize(
    "text, value",
    [
        ("42", 42),
        ("-3", -3),
        ('"a \\"b\\" \\\\ c"', 'a "b" \\ c'),
        ("TRUE", True),
        ("FALSE", False),
        ("<<>>", ()),
        ("<<1, <<2>>, {}>>", (1, (2,), frozenset())),
        ("{3, 1, 2}", frozenset({1, 2, 3})),
        ("2..4", frozenset({2, 3, 4})),
        ("[a |-> 1, bc |-> \"x\"]", {"a": 1, "bc": "x"}),
        ("(<<1, 2>> :> TRUE @@ <<2, 1>> :> FALSE)", {(1, 2): True, (2, 1): False}),
        ("p1", ModelValue("p1")),
        ("{[id |-> 1], [id |-> 2]}", frozenset({FrozenDict(id=1), FrozenDict(id=2)})),
    ],
)
def test_parse_value(text, value):
    assert parse_value(text) == value


def test_model_value_is_distinguishable_from_string():
    v = parse_value("{p0, \"p0\"}")
    assert len(v) == 2 and sum(isinstance(x, ModelValue) for x in v) == 1
    assert isinstance(parse_value("p0"), ModelValue)
    assert not isinstance(parse_value('"p0"'), ModelValue)


@pytest.mark.parametrize("bad", ["", "<<1, 2", "[a |-> ]", "{1,,2}", "1 2", '"open', "(1 :> 2"])
def test_parse_value_rejects(bad):
    with pytest.raises(InvalidInputError):
        parse_value(bad)


def test_parse_state_multiline_values():
    text = "/\\ net = {[id |-> 1, pb |-> <<1,\n   2>>]}\n/\\ x = 0\n"
    st = parse_state(text)
    assert st["x"] == 0
    (m,) = st["net"]
    assert m["pb"] == (1, 2)


def test_parse_state_rejects_garbage():
    with pytest.raises(InvalidInputError):
        parse_state("/\\ this is not a state")


def test_to_jsonable_is_deterministic_and_numeric_sorted():
    v = parse_value("[s |-> {10, 2, 1}, f |-> (2 :> \"b\" @@ 10 :> \"a\"), m |-> p0]")
    assert to_jsonable(v) == {"s": [1, 2, 10], "f": [[2, "b"], [10, "a"]], "m": "p0"}


# ------------------------------------------------------------------ round trip (Hypothesis)
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def to_tla(v) -> str:
    """Print a Python value the way TLC prints the TLA+ value (the inverse of parse_value)."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, ModelValue):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, tuple):
        return "<<" + ", ".join(to_tla(x) for x in v) + ">>"
    if isinstance(v, frozenset):
        return "{" + ", ".join(to_tla(x) for x in v) + "}"
    if isinstance(v, dict) and v and all(isinstance(k, str) and not isinstance(k, ModelValue) for k in v):
        return "[" + ", ".join(f"{k} |-> {to_tla(x)}" for k, x in v.items()) + "]"
    return "(" + " @@ ".join(f"{to_tla(k)} :> {to_tla(x)}" for k, x in v.items()) + ")"


scalars = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.booleans(),
    st.text(st.characters(codec="ascii", exclude_categories=("Cc",)) | st.just("\n"), max_size=6),
    st.from_regex(r"[a-z][a-z0-9_]{0,4}", fullmatch=True).map(ModelValue),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(tuple),
        st.frozensets(inner, max_size=3),
        st.dictionaries(st.from_regex(r"[a-z][a-z0-9]{0,3}", fullmatch=True), inner, min_size=1, max_size=3).map(FrozenDict),
        st.dictionaries(st.integers(0, 9), inner, min_size=1, max_size=3).map(FrozenDict),
    ),
    max_leaves=8,
)


@given(values)
def test_parse_value_round_trip(v):
    assert parse_value(to_tla(v)) == v


def test_round_trip_catches_a_broken_parser():
    """The round-trip property must catch a parser that drops string escapes."""
    import rollcheck.tla.values as tv

    saved = dict(tv._ESCAPES)
    try:
        tv._ESCAPES.clear()
        tv._ESCAPES.update({'"': '"', "\\": "\\"})  # forgets \n
        assert parse_value(to_tla("a\nb")) != "a\nb"
    finally:
        tv._ESCAPES.clear()
        tv._ESCAPES.update(saved)
