"""The failures the Spark recorders inject: driver kill points, task retries, cluster faults.

The kill supervisor (with its inotify reader), the ``retry`` schedule and its check, the faults
only a cluster has and the second kill.
"""
