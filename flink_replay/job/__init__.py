"""The job process: what runs inside the PyFlink environment, and rollcheck's Java tap operators.

``main.py`` is run as a script (``python job/main.py CONFIG.json``) with this folder on
``sys.path``, so its modules import only the standard library, ``pyflink`` and each other.
The ``Rollcheck*.java`` taps are compiled by :func:`rollcheck.flink_replay.environment.tap_jar`.
"""

__all__: list[str] = []
