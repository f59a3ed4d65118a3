"""memstream: long-term memory for AI agents as an event-sourced pipeline on Kafka."""

__version__ = "0.1.0"
