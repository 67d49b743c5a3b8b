"""Files and HTTP of the Flink job process: atomic JSON files, a free port, the REST API.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``main.py``; like it, it
imports only the standard library, ``pyflink`` and its sibling ``job_*`` modules.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.request

__all__ = ["write_json", "free_port", "get_json"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (for the MiniCluster's REST API)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str) -> dict | None:
    """GET ``url`` and decode its JSON; None when the endpoint does not answer (it is polled)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return json.loads(r.read().decode())
    except Exception:  # noqa: BLE001 - the endpoint is polled; a miss is retried
        return None


def write_json(path: str, obj: dict) -> None:
    """Write ``obj`` to ``path`` through ``PATH.tmp`` renamed into place (never half-written).

    Parameters
    ----------
    path : str
        The file.
    obj : dict
        The JSON value.
    """
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)
