"""The kernel: what every other layer stands on and that imports nothing of the project but itself.

errors (the one root error type and its family), ids (identifiers and their checks), config (typed
settings from MEMSTREAM_* environment variables) and watermarks (positions in the log).
"""
