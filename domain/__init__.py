"""Domain rules: pure functions, no I/O. Used by the processors and directly by tests."""
