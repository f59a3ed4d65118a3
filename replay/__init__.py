"""Rebuild, time travel and audit over the log (issue 6). Nothing here yet."""
