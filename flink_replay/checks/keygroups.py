"""Flink's key-group assignment, computed independently of Flink.

Flink splits the key space of every keyed operator into ``max_parallelism`` key groups and gives
each parallel subtask a contiguous range of them; a restore at another parallelism hands whole key
groups to their new owners. A key's group is ``murmur(hashCode(key)) % max_parallelism`` and the
group's owner is ``group * parallelism // max_parallelism``. This module recomputes that from
the key alone (Java's ``hashCode`` of a ``Long`` or a ``String``, then Flink's murmur finaliser),
so that a rescaled restore can be checked against what Flink should have done rather than against
what it reports.

References
----------
Apache Flink documentation, "Working with State" / "Scaling" (key groups as the unit of state
redistribution); Carbone et al., "State Management in Apache Flink", VLDB 2017, §3.3 (key groups).
"""

from __future__ import annotations

__all__ = ["java_hash", "row_hash", "murmur", "key_group", "operator_index", "key_group_range", "owner"]

_M32 = 0xFFFFFFFF


def _i32(x: int) -> int:
    x &= _M32
    return x - (1 << 32) if x & 0x80000000 else x


def _rotl(x: int, r: int) -> int:
    x &= _M32
    return ((x << r) | (x >> (32 - r))) & _M32


def java_hash(key: int | str | bytes) -> int:
    """Java's ``hashCode`` of a ``Long`` (a Python int) or a ``String`` (a Python str).

    For ``bytes``, ``Arrays.hashCode(byte[])`` (how a ``Row`` hashes a byte-array field: PyFlink's
    ``key_by`` without a key type keys by the pickled key).

    Examples
    --------
    >>> java_hash("hello"), java_hash(3), java_hash(-1), java_hash(2**40 + 5)
    (99162322, 3, 0, 261)
    >>> java_hash(b""), java_hash(bytes([1, 255]))
    (1, 991)
    """
    if isinstance(key, bytes):
        h = 1
        for b in key:
            h = (31 * h + (b - 256 if b > 127 else b)) & _M32
        return _i32(h)
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise TypeError(f"only Long (int), String (str) and byte[] (bytes) keys are supported, "
                        f"not {type(key).__name__}")
    if isinstance(key, int):
        v = key & 0xFFFFFFFFFFFFFFFF
        return _i32(v ^ (v >> 32))
    h = 0
    units = key.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _M32
    return _i32(h)


def murmur(code: int) -> int:
    """Flink's ``MathUtils.murmurHash``: one murmur3 round and finaliser, made non-negative.

    Examples
    --------
    >>> murmur(0), murmur(1)
    (593689054, 68075478)
    """
    c = (code & _M32) * 0xCC9E2D51 & _M32
    c = _rotl(c, 15)
    c = c * 0x1B873593 & _M32
    c = _rotl(c, 13)
    c = (c * 5 + 0xE6546B64) & _M32
    c ^= 4
    c ^= c >> 16
    c = c * 0x85EBCA6B & _M32
    c ^= c >> 13
    c = c * 0xC2B2AE35 & _M32
    c ^= c >> 16
    s = _i32(c)
    if s >= 0:
        return s
    return -s if s != -(1 << 31) else 0


def row_hash(field: int | str | bytes) -> int:
    """``hashCode`` of a one-field Flink ``Row`` (RowKind INSERT): 62 + the field's hash.

    PyFlink's ``key_by`` keys a stream by ``Row(key)``, so the Python keyed operators' key groups
    come from this hash (checked against Flink 2.3's ``Row.of(k).hashCode()``).

    Examples
    --------
    >>> row_hash(0), row_hash("x0")
    (62, 3830)
    """
    return _i32(62 + java_hash(field))


def key_group(key: int | str | bytes, max_parallelism: int, *, row: bool = False) -> int:
    """The key group of ``key``: ``murmur(hashCode(key)) % max_parallelism``.

    Parameters
    ----------
    key : int, str or bytes
        The key (a Java ``Long``, ``String`` or byte array).
    max_parallelism : int
        The job's maximum parallelism (the number of key groups).
    row : bool
        The key wrapped in a one-field ``Row``, as PyFlink's ``key_by`` does.

    Returns
    -------
    int
        The key group, in ``[0, max_parallelism)``.

    Examples
    --------
    >>> [key_group(k, 128, row=True) for k in range(4)]
    [33, 44, 97, 104]
    """
    if max_parallelism < 1:
        raise ValueError("max_parallelism must be positive")
    return murmur(row_hash(key) if row else java_hash(key)) % max_parallelism


def operator_index(group: int, parallelism: int, max_parallelism: int) -> int:
    """The subtask that owns key group ``group`` at ``parallelism``.

    Parameters
    ----------
    group : int
        The key group, ``0 <= group < max_parallelism``.
    parallelism : int
        The operator's parallelism.
    max_parallelism : int
        The number of key groups.

    Returns
    -------
    int
        The subtask's index.

    Examples
    --------
    >>> [operator_index(g, 3, 128) for g in (0, 42, 43, 85, 86, 127)]
    [0, 0, 1, 1, 2, 2]
    """
    if not 0 <= group < max_parallelism or not 1 <= parallelism <= max_parallelism:
        raise ValueError(f"key group {group} / parallelism {parallelism} outside max parallelism {max_parallelism}")
    return group * parallelism // max_parallelism


def key_group_range(index: int, parallelism: int, max_parallelism: int) -> tuple[int, int]:
    """The key groups (first, last, inclusive) of subtask ``index``.

    Parameters
    ----------
    index : int
        The subtask's index.
    parallelism : int
        The operator's parallelism.
    max_parallelism : int
        The number of key groups.

    Returns
    -------
    tuple of (int, int)
        The first and last key group.

    Examples
    --------
    >>> [key_group_range(i, 3, 128) for i in range(3)]
    [(0, 42), (43, 85), (86, 127)]
    """
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return start, end


def owner(key: int | str | bytes, parallelism: int, max_parallelism: int, *, row: bool = False) -> int:
    """The subtask whose keyed state holds ``key``.

    Parameters
    ----------
    key : int, str or bytes
        The Java key's value.
    parallelism : int
        The operator's parallelism.
    max_parallelism : int
        The number of key groups.
    row : bool, optional
        The key is a one-field Row holding ``key``.

    Returns
    -------
    int
        The subtask's index.
    """
    return operator_index(key_group(key, max_parallelism, row=row), parallelism, max_parallelism)
