"""The query side: recall, profile, task memory, session window and prompt context over the read models."""
