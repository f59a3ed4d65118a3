"""The Kafka SDK users import (`from memstream.sdk import MemoryClient`): publish what happens to an
agent, sync and async. Defined with the other adapters (adapters/sdk.py), which the services use too;
this module only gives it the package's public name.
"""
from adapters.sdk import AsyncMemoryClient, MemoryClient

__all__ = ["AsyncMemoryClient", "MemoryClient"]
