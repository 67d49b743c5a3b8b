"""The checks every Spark streaming trace gets, word count and user queries alike.

One pass over the trace (the view), the span model of a restart, and how the checks plug into the
shared trace checker.
"""
