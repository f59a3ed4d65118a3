"""The fast tier: tests that need no services (tests/conftest.py marks them `fast`)."""
