"""Flink's side of ``rollcheck hunt``: generated PyFlink programs, their cells and reproducers.

A grammar draws job specs (:mod:`.grammar`, :mod:`.ops`), :mod:`.render` and :mod:`.forms` write
them as job modules, :mod:`.cells` and :mod:`.adapter` run them through the matrix, :mod:`.plan`
plans them inside the PyFlink environment, :mod:`.shrink` and :mod:`.repro` reduce and reproduce.
"""

__all__: list[str] = []
