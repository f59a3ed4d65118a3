"""Projectors and their read models: each its own consumer group, positions stored atomically."""
