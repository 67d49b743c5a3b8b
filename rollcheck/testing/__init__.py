"""Test helpers shipped with rollcheck (used by ``tests/`` and by ``rollcheck verify``).

:mod:`rollcheck.testing.fuzzing` — the fuzz harness of every input format and numeric option.
"""
