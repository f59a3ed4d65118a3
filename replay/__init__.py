"""Replay over the log: rebuild, verify, what-if, time travel and audit.

- engine.py    read the log once, decode once, apply to several projectors (bounded, resumable)
- stores.py    shadow stores (Postgres schema, Neo4j generation), writer locks, atomic swaps
- rebuild.py   `replay rebuild` (and `--from TIME`)
- verify.py    `replay verify`, with row-level diffs (diff.py)
- whatif.py    `replay whatif`: the memory processor's decisions under other settings
- timetravel.py  `--as-of TIME` for recall, profile, preferences
- audit.py     `audit memory|user`: lives and timelines from the audit index and the log (fetch.py)
- cli.py       the commands
"""
