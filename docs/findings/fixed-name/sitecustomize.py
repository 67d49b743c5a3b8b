"""The proposed fix, applied from outside: ``KeyedStream.reduce`` registers a fixed state name.

Python imports ``sitecustomize`` at start-up from the first folder of ``sys.path`` holding one.
Put this folder on ``PYTHONPATH`` and the client and the Python workers (process mode; thread
mode's embedded interpreter was not tried) see ``uuid.uuid4()`` in ``pyflink.datastream.data_stream``
return ``""``: the reduce state is then always named ``"_reduce_state"``. Not for production use.

Usage::

    PYTHONPATH=fixed-name python pyflink-reduce-failure.py
"""

import pyflink.datastream.data_stream as data_stream


class _NoUuid:
    @staticmethod
    def uuid4():
        return ""


data_stream.uuid = _NoUuid
