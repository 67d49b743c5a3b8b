"""A Structured Streaming checkpoint folder: read in plain Python, validated and watched.

The reader (with its LZ4 block decoder), the ``rollcheck spark checkpoint`` validation, the watcher
that records what Spark writes there, and the facts of the offset and commit logs.
"""
