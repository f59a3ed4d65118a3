"""The use cases, one module each, under every entry point (HTTP API, MCP server, CLI, console).

An entry point parses its input, calls a use case here and renders the answer; it opens no store
and no Kafka client itself (tests/fast/test_architecture.py holds it to that). A use case owns what
would otherwise be written once per entry point:
- who may do it: the caller's scopes, tenant and bound end user (access.py). The CLI acts as the
  OPERATOR, who holds the stack's credentials already and names internal user ids as they are;
- read your writes: wait until the read models it uses have applied the caller's `after` token
  (read_your_writes.py), then query;
- its side effects as events: a recall publishes `memory.recalled` (recall.py);
- failures as the root error types of kernel/errors.py (and privacy.tenants.NotYours), which
  each entry point maps once: to an HTTP status, an MCP error, a CLI exit code.

  remember.py        publish turns, task steps, a task's start and finish
  recall.py          recall (and recall as of a past time); publishes memory.recalled
  context.py         prompt context within a token budget
  profile.py         profile and preference table (and as of a past time)
  memories.py        list and browse a user's memories and preferences; the tenant's users; the graph
  short_term.py      a task's steps, a session's window
  forget.py          forget a memory, a session or a user (memory.forgotten, session.forgotten, user.forgotten)
  erase.py           erase a user (crypto-shredding)
  audit.py           a memory's whole life, a user's timeline
  operator_view.py   dead letters and projector positions
  keys.py            API keys and the key store's master key (operators)
  topics.py          the namespace's topics (operators)
  backend.py         the connections the use cases share, opened on first use
  as_of.py           the budget of replay-based as-of reads

Time travel is the `as_of` argument of the read use cases (as_of.py only bounds how many replay at once).
The use cases a caller asks for are coroutines (the read-your-writes wait is asyncio's, holding no
thread); the CLI runs one with asyncio.run. The operators' (keys, topics) are plain functions.
"""
