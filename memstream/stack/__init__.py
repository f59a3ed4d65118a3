"""The local stack (Kafka KRaft, Postgres 15 + pgvector, Neo4j 5.26) without Docker.

    from memstream.stack import install, up, down, status

Each reads get_settings(); see services.py for what they do and stack/ for the build inputs.
"""
from memstream.stack.services import down, install, installed, status, up

__all__ = ["install", "installed", "up", "down", "status"]
