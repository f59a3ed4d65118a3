"""The application shell: entry points (CLI, HTTP API, workers, demo, ticker, operator commands).

Everything here may import every layer below; nothing below imports from here (tests/fast/test_architecture.py).
"""
