"""The `memstream` command line. Errors of the MemstreamError family print one line, exit 2.

Start-up is kept cheap (`memstream --help` and `memstream status` at most 0.3 s of CPU; bench:
`python -m bench.cli_startup`): argument parsing imports only the standard library, orjson and
kernel.errors. Everything else — the settings (pydantic), Kafka, Postgres and Neo4j clients,
the event models, the embedder — is imported inside the command that needs it
(tests/fast/test_cli_startup.py checks which modules `--help` loads).
"""
from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone

import orjson

from kernel.errors import InvalidInput, MemstreamError


def get_settings():
    """The settings, imported on first use: pydantic alone is ~0.2 s of CPU, which `--help` never needs."""
    from kernel.config import get_settings as settings
    return settings()


def _print(obj, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
    elif isinstance(obj, list):
        for row in obj:
            print("  ".join(f"{k}={v}" for k, v in row.items()))
    else:
        print(obj)


def _time(text: str | None) -> datetime | None:
    """An ISO 8601 time or date; a bare date (2024-06-01) or a time without a timezone reads as UTC."""
    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise MemstreamError(f"{text!r} is not an ISO 8601 date or time, e.g. 2024-06-01 or 2026-01-02T10:00:00+00:00") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t


def cmd_stack(args) -> None:
    from memstream import stack
    if args.brokers is not None:
        if args.action != "up":
            raise MemstreamError("--brokers goes with `stack up` (the stack records it; other commands read it)")
        os.environ["MEMSTREAM_KAFKA_BROKERS"] = str(args.brokers)
        from kernel.config import get_settings as cached
        cached.cache_clear()
    if args.action == "status":
        result = stack.status(quiet=args.json)
        if args.json:
            _print(result, True)
    else:
        getattr(stack, args.action)()


def _use(case):
    """Run one use case of services as the operator: `case(backend, caller)` returns its
    coroutine. The backend opens only what the use case touches and is closed after it (closing
    delivers what it published, e.g. a recall's memory.recalled)."""
    import asyncio

    from services.access import OPERATOR
    from services.backend import Backend
    backend = Backend(get_settings(), pool_size=2)
    try:
        return asyncio.run(case(backend, OPERATOR))
    finally:
        backend.close()


def cmd_publish(args) -> None:
    from services import remember
    if args.what != "turn" and not args.task:
        raise MemstreamError(f"publish {args.what} needs --task")
    if args.what in ("turn", "step") and args.text is None:
        raise MemstreamError(f"publish {args.what} needs --text")
    at = _time(args.at)
    if args.what == "turn":
        pos = _use(lambda b, op: remember.turn(b, op, args.user, args.session, args.role, args.text, task=args.task,
                                               at=at))
    elif args.what == "step":
        pos = _use(lambda b, op: remember.step(b, op, args.user, args.task, args.text, status=args.status,
                                               kind=args.kind, at=at))
    elif args.what == "task-start":  # resets the task's step buffer
        pos = _use(lambda b, op: remember.start_task(b, op, args.user, args.task, session=args.session,
                                                     goal=args.text or "", at=at))
    else:
        pos = _use(lambda b, op: remember.finish_task(b, op, args.user, args.task, status=args.outcome, at=at))
    _print(pos.as_dict() if args.json else pos.token(), args.json)


def cmd_prefs(args) -> None:
    from services import memories
    as_of = _as_of(args)   # time travel: query/as_of.py (the replay where versions have a gap)
    _print(_use(lambda b, op: memories.preference_rows(b, op, args.user, as_of=as_of)), args.json)


def cmd_memories(args) -> None:
    from services import memories
    as_of = _as_of(args)
    _print(_use(lambda b, op: memories.listed(b, op, args.user, args.limit, as_of=as_of)), args.json)


def cmd_entities(args) -> None:
    from services import relations
    out = _use(lambda b, op: relations.entities(b, op, args.user, args.type))
    if args.json:
        _print(out, True)
        return
    for e in out["entities"]:
        aka = f" (also {', '.join(e['aliases'])})" if e["aliases"] else ""
        print(f"{e['entity_id']}  [{e['entity_type']}] {e['name'] or '-'}{aka}")
        for r in e["relations_to_user"]:
            print(f"    {r['text'] or r['predicate']}  since {r['valid_from'].date()}  (turn {r['source_turn']})")


def cmd_relations(args) -> None:
    from services import relations
    as_of = _as_of(args)
    out = _use(lambda b, op: relations.relations(b, op, args.user, predicate=args.predicate, group=args.group,
                                                 subject=args.subject, obj=args.object, as_of=as_of))
    if args.json:
        _print(out, True)
        return
    for r in out["relations"]:
        until = f" until {r['valid_to'].date()}" if r["valid_to"] else ""
        print(f"{r['text'] or (r['subject_id'] + ' ' + r['predicate'] + ' ' + r['object_id'])}  "
              f"[{r['predicate']}] since {r['valid_from'].date()}{until}  (turn {r['source_turn']})")


def _as_of(args) -> datetime | None:
    from memstream.app.replay_cli import parse_time
    return parse_time(args.as_of, "--as-of")


def cmd_steps(args) -> None:
    from services import short_term
    _print(_use(lambda b, op: short_term.steps(b, op, args.user, args.task, args.k)), args.json)


def cmd_session(args) -> None:
    from services import short_term
    _print(_use(lambda b, op: short_term.session(b, op, args.user, args.session)), args.json)


def cmd_recall(args) -> None:
    from services import recall
    as_of = _as_of(args)   # what memory held then; reading the past is not a use, so nothing is published
    hits = _use(lambda b, op: recall.recall(b, op, args.user, args.query, channel="cli", k=args.k,
                                            categories=args.category, tags=args.tag,
                                            max_age_hours=args.max_age_hours, min_score=args.min_score,
                                            expand=not args.no_expand, after=args.after, as_of=as_of))
    if args.json:
        _print([h.as_dict() for h in hits], True)
    else:
        for h in hits:
            print(f"{h.score:.3f}  [{h.category}] {h.content}  {h.why}")


def cmd_profile(args) -> None:
    from services import profile
    as_of = _as_of(args)
    _print(_use(lambda b, op: profile.profile(b, op, args.user, after=args.after, as_of=as_of)), True)


def cmd_context(args) -> None:
    from services import context
    out = _use(lambda b, op: context.context(b, op, args.user, args.query, session=args.session, task=args.task,
                                             budget=args.budget, after=args.after))
    if args.json:
        _print(out, True)
    else:
        print(out["text"])


def cmd_api(args) -> None:
    import logging

    import uvicorn

    from memstream.app.api import create_app
    s = get_settings()
    host, port = args.host or s.api_host, args.port or s.api_port
    # Our own lines (the URL, one access line per request: memstream/app/probes.py); uvicorn's own
    # at warning, so its access log (raw paths, which hold user ids) stays off.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s api %(levelname)s %(name)s: %(message)s")
    logging.getLogger("memstream.api").info("serving the HTTP API on http://%s:%d (OpenAPI /docs, liveness /healthz, "
                                            "readiness /readyz, metrics /metrics)", host, port)
    # SIGTERM: requests still waiting (at most MEMSTREAM_MAX_WAIT_S) are cancelled after 5 s, not awaited
    uvicorn.run(create_app(s), host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)


def cmd_mcp(args) -> None:
    from memstream.app.mcp_server import serve   # the optional extra .[mcp]: memstream/app/mcp_server.py
    serve(get_settings(), args.transport, host=args.host, port=args.port)


def cmd_worker(args) -> None:
    from memstream.app.replay_cli import PROJECTOR_NAMES as PROJECTORS   # the registry's (test_cli_startup)
    from memstream.app.workers import Supervisor, run_worker
    if args.rollover:   # through the environment, so supervised copies (--instances) get it too
        os.environ["MEMSTREAM_RULES_ROLLOVER"] = "1"
        from kernel.config import get_settings as cached
        cached.cache_clear()
    if args.instances > 1:   # N supervised copies in the stage's consumer group
        if args.only:
            raise SystemExit("--only and --instances do not combine: run the copies one by one with --only")
        raise SystemExit(Supervisor(get_settings(), names=(args.name,), instances=args.instances).run())
    only = tuple(args.only.split(",")) if args.only else PROJECTORS
    run_worker(args.name, get_settings(), only)   # a fatal error raises (SystemExit ≠ 0 or a traceback: exit 1)


def cmd_run(args) -> None:
    from memstream.app.workers import Supervisor
    Supervisor(get_settings(), instances=args.instances).run()


def cmd_pipeline(args) -> None:
    from memstream.app.status import pipeline_lines, pipeline_status
    status = pipeline_status(get_settings())
    _print(status, True) if args.json else print("\n".join(pipeline_lines(status)))


def cmd_status(args) -> None:
    """Workers, the broker (named when it is down: a connect, not a Kafka time-out) and every group's lag."""
    from memstream.app.status import status_lines, status_report
    _print(status_report(get_settings()), True) if args.json else print("\n".join(status_lines(get_settings())))


def cmd_demo(args) -> None:
    from memstream.app.demo import run_demo
    run_demo(get_settings())


def cmd_erase(args) -> None:
    from memstream.app.storage_scrub import erase_and_scrub, scrub_storage
    if args.what == "scrub":
        report = scrub_storage(get_settings(), after=args.after, wait_s=args.wait_s, progress=not args.json)
        _print(report.as_dict() if args.json else _scrub_line(report.as_dict()), args.json)
        return
    if not args.user:
        raise MemstreamError("erase user needs the user id")
    out = erase_and_scrub(get_settings(), args.user, requested_by=args.by, scrub=not args.no_scrub,
                          wait_s=args.wait_s, progress=not args.json)
    if args.json:
        _print(out, True)
    else:
        print(f"{out['token']} erased {args.user}" + (f"; {_scrub_line(out['scrub'])}" if "scrub" in out else
                                                     "; storage scrub skipped (run `memstream erase scrub`)"))


def _scrub_line(r: dict) -> str:
    rewrite = r["rewrite"]
    line = (f"storage scrubbed in {r['seconds']:.1f} s ("
            + (f"tables rewritten online, writers held {rewrite['writers_held_s']:.2f} s" if rewrite.get("swapped")
               else rewrite.get("skipped", "no tables rewritten"))
            + f"; {r['wal']['removed']} WAL segments removed)")
    return line + ("" if r["complete"] else "; NOT complete: " + "; ".join(r["gaps"]))


def cmd_forget(args) -> None:
    from services import forget
    at = _time(args.at)
    if args.what == "memory":
        if not args.user:
            raise MemstreamError("forget memory needs --user")
        out = _use(lambda b, op: forget.memory(b, op, args.user, args.target, requested_by=args.by,
                                               reason=args.reason, at=at, force=args.force))
        _print(out if args.json else f"{out['token']} forgot {', '.join(out['memory_ids'])}", args.json)
    else:
        pos = _use(lambda b, op: forget.user(b, op, args.target, requested_by=args.by, reason=args.reason, at=at))
        _print(pos.as_dict() if args.json else pos.token(), args.json)


def cmd_ticker(args) -> None:
    import logging

    from memstream.app import ticker
    s = get_settings()
    if args.period_s:
        s = s.model_copy(update={"tick_period_s": args.period_s})
    if args.once or args.at:
        at = _time(args.at)
        ids = ticker.publish_ticks(s, at)
        # One tick per partition: their ids (--json), or one line that says what was published.
        _print(ids, True) if args.json else print(
            f"published {len(ids)} decay ticks{' at ' + at.isoformat() if at else ''} (one per memory partition)")
    else:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s ticker %(levelname)s %(name)s: %(message)s")
        ticker.run(s)


def cmd_keys(args) -> None:
    if args.action != "rotate":
        return _api_keys(args)
    from services.keys import rotate_master_key
    print(f"re-wrapped {rotate_master_key(get_settings())} data keys with the current master key")


def _api_keys(args) -> None:
    """API keys of the HTTP API (adapters/privacy/apikeys.py). Whoever runs this has the stack's
    database credentials, i.e. is already an operator: the CLI needs no API key for it."""
    from services import keys
    s = get_settings()
    if args.action == "create-api-key":
        if not args.tenant or not args.scopes:
            raise InvalidInput("create-api-key needs --tenant and --scopes (comma-separated)")
        info, token = keys.create_api_key(s, args.tenant, args.scopes.split(","), user=args.user, name=args.name or "")
        # The key itself, once, on stdout (for a pipe or a secrets manager); it is stored only hashed.
        _print({**info, "api_key": token}, True) if args.json else print(token)
        if not args.json:
            print(f"key {info['key_id']} for tenant {info['tenant']} ({','.join(info['scopes'])})"
                  + (f", bound to user {args.user}" if args.user else "") + ": shown once, store it now",
                  file=sys.stderr)
    elif args.action == "list-api-keys":
        rows = keys.list_api_keys(s, args.tenant)
        if args.json:
            _print(rows, True)
        for r in [] if args.json else rows:
            print(f"{r['key_id']}  {r['tenant']:<12} {','.join(r['scopes']):<48} user={r['user'] or '*'}  "
                  f"{'revoked ' + r['revoked_at'] if r['revoked_at'] else 'active'}  {r['name']}")
    else:
        if not args.id:
            raise InvalidInput("revoke-api-key needs the key id (see list-api-keys)")
        keys.revoke_api_key(s, args.id)
        print(f"revoked {args.id} (API processes refuse it within {s.api_key_cache_s:g} s, MEMSTREAM_API_KEY_CACHE_S)")


def cmd_init(args) -> None:
    from memstream.app.init_cmd import cmd_init as init   # lazy: secrets, topics, tables, the admin key
    init(args)


def cmd_topics(args) -> None:
    from services.topics import create_topics
    created = create_topics(get_settings())
    print("created: " + (", ".join(created) if created else "nothing (all topics exist)"))


def cmd_namespace(args) -> None:
    from replay import namespaces
    settings = get_settings()
    if args.action == "list":
        found = namespaces.list_namespaces(settings)
        if args.json:
            sys.stdout.write(orjson.dumps([f.as_dict() for f in found], option=orjson.OPT_INDENT_2).decode() + "\n")
            return
        print(f"{'namespace':<32} {'topics':>6} {'groups':>6} {'schemas':>7} {'keys':>4} {'graph nodes':>11}")
        for f in found:
            print(f"{f.namespace:<32} {len(f.topics):>6} {len(f.groups):>6} {len(f.schemas):>7} "
                  f"{'yes' if f.key_schemas else '-':>4} {f.graph_nodes:>11,}"
                  + ("   (the configured namespace)" if f.namespace == settings.namespace else ""))
        return
    if not args.name:
        raise InvalidInput("namespace drop needs the namespace's name (see `memstream namespace list`)")
    fp = namespaces.drop(settings, args.name, force=args.force) if args.yes else namespaces.footprint(settings, args.name)
    if args.json:
        sys.stdout.write(orjson.dumps({"dropped": args.yes, **fp.as_dict()}, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if fp.empty:
        print(f"namespace {args.name}: nothing on the stack")
        return
    print(f"namespace {args.name}{' (in use: ' + ', '.join(fp.active_groups) + ')' if fp.active_groups else ''}:\n"
          f"  topics       {', '.join(fp.topics) or '-'}\n  groups       {', '.join(fp.groups) or '-'}\n"
          f"  ACL bindings {fp.acls}\n  schemas      {', '.join(fp.schemas) or '-'}\n"
          f"  key store    {', '.join(fp.key_schemas) or '-'}\n  graph nodes  {fp.graph_nodes:,}\n"
          f"  files        {', '.join(fp.files) or '-'}")
    print("dropped." if args.yes else "nothing dropped: run again with --yes to drop all of it "
          "(its data keys too: what its log sealed becomes unreadable)")


def cmd_llm(args) -> None:
    from memstream.app.llm_serve import serve
    serve(get_settings(), args.host, args.port, args.n_ctx)


def cmd_schemas(args) -> None:
    from schemas.jsonschema_export import export
    for path in export():
        print(path)


def cmd_config(args) -> None:
    from kernel.config import GROUPS, Settings
    if args.update_docs:
        from memstream.app.readme import CONFIG_DOC, update
        print(f"{CONFIG_DOC}: {'updated' if update() else 'already current'}")
    elif args.markdown:
        print(Settings.markdown_table())
    elif args.json:
        _print(get_settings().masked_by_group(), True)
    else:
        grouped = get_settings().masked_by_group()
        width = max(len(name) for values in grouped.values() for name in values)
        print("\n\n".join(GROUPS[group][0] + "\n" + "\n".join(
            f"  {name:<{width}}  {'(not set)' if value is None else value}" for name, value in values.items())
            for group, values in grouped.items()))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memstream", description="Long-term memory for AI agents on Kafka.")
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("stack", help="the local Kafka / Postgres / Neo4j stack")
    s.add_argument("action", choices=["install", "up", "down", "status"])
    s.add_argument("--json", action="store_true")
    s.add_argument("--brokers", type=int, choices=range(1, 10), metavar="N",
                   help="up: a Kafka cluster of N nodes (3: every topic with 3 replicas, min.insync.replicas 2); "
                        "fixed when the stack is first created")
    s.set_defaults(fn=cmd_stack)

    s = sub.add_parser("publish", help="publish a turn, a task step, or a task's start / finish")
    s.add_argument("what", choices=["turn", "step", "task-start", "task-finish"])
    s.add_argument("--user", required=True)
    s.add_argument("--session", default="default")
    s.add_argument("--role", default="user", choices=["user", "assistant", "system", "tool"])
    s.add_argument("--task")
    s.add_argument("--status", default="ok", choices=["ok", "failed", "pending"])
    s.add_argument("--kind", default="step", help="step: its kind (action, tool call, observation, …)")
    s.add_argument("--outcome", default="succeeded", choices=["succeeded", "failed", "abandoned"], help="task-finish: how it ended")
    s.add_argument("--text", help="turn/step: the content (required); task-start: the goal")
    s.add_argument("--at", help="event time, ISO 8601 date or time, UTC unless it names a timezone (default: now)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_publish)

    for name, fn in (("prefs", cmd_prefs), ("memories", cmd_memories)):
        s = sub.add_parser(name, help=f"the user's {name} read model")
        s.add_argument("--user", required=True)
        s.add_argument("--limit", type=int, default=100)
        s.add_argument("--as-of", metavar="TIME", help="what memory held at TIME (ISO 8601 date or time; UTC unless it names a timezone)")
        s.add_argument("--json", action="store_true")
        s.set_defaults(fn=fn)

    s = sub.add_parser("entities", help="the people, places, organisations … of a user's world, with their "
                                        "current relations to the user")
    s.add_argument("user")
    s.add_argument("--type", choices=("person", "pet", "place", "organisation", "product", "event", "user"))
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_entities)

    s = sub.add_parser("relations", help="a user's relations holding now or at --as-of (docs/relations.md)")
    s.add_argument("user")
    s.add_argument("--as-of", metavar="TIME", help="relations holding at TIME (ISO 8601 date or time; UTC unless it names a timezone; event time)")
    s.add_argument("--group", choices=("family", "partner", "social", "work", "place", "possession",
                                       "participation", "identity"), help="family: kin and partners")
    s.add_argument("--predicate", help="one relation type, e.g. lives_in")
    s.add_argument("--subject", help="an entity id, self, a name, or role:<word> (role:sister)")
    s.add_argument("--object", help="as --subject")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_relations)

    s = sub.add_parser("steps", help="a task's ring buffer: its newest steps, oldest first")
    s.add_argument("--user", required=True)
    s.add_argument("--task", required=True)
    s.add_argument("--k", type=int, default=20)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_steps)

    s = sub.add_parser("session", help="a session's short-term window (MaxTurns x 2 messages)")
    s.add_argument("--user", required=True)
    s.add_argument("--session", required=True)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_session)

    s = sub.add_parser("recall", help="recall memories for a query (filters, vectors, keywords, graph)")
    s.add_argument("--user", required=True)
    s.add_argument("--query", required=True)
    s.add_argument("--k", type=int, default=10)
    s.add_argument("--category", action="append", help="any of (repeatable)")
    s.add_argument("--tag", action="append", help="all of (repeatable)")
    s.add_argument("--max-age-hours", type=float)
    s.add_argument("--min-score", type=float)
    s.add_argument("--no-expand", action="store_true", help="no 1-hop graph expansion")
    s.add_argument("--after", help="position token of a publish: read your own write")
    s.add_argument("--as-of", metavar="TIME", help="recall from what memory held at TIME (ISO 8601 date or time; UTC unless it names a timezone)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_recall)

    s = sub.add_parser("profile", help="identity, preferences and policies, by category")
    s.add_argument("--user", required=True)
    s.add_argument("--after")
    s.add_argument("--as-of", metavar="TIME", help="the profile as it was at TIME (ISO 8601 date or time; UTC unless it names a timezone)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_profile)

    s = sub.add_parser("context", help="assemble prompt context within a token budget")
    s.add_argument("--user", required=True)
    s.add_argument("--query", required=True)
    s.add_argument("--session")
    s.add_argument("--task")
    s.add_argument("--budget", type=int, default=1200)
    s.add_argument("--after")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_context)

    s = sub.add_parser("api", help="serve the HTTP API (OpenAPI at /docs)")
    s.add_argument("--host")
    s.add_argument("--port", type=int)
    s.set_defaults(fn=cmd_api)

    s = sub.add_parser("mcp", help="serve memory to agents over MCP: stdio, or streamable HTTP at /mcp (.[mcp])")
    s.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    s.add_argument("--host", help="http: where to listen (default MEMSTREAM_API_HOST)")
    s.add_argument("--port", type=int, help="http: the port (default MEMSTREAM_MCP_PORT)")
    s.set_defaults(fn=cmd_mcp)

    s = sub.add_parser("worker", help="run one processor (extractor, memory) or the projectors")
    s.add_argument("name", choices=["extractor", "llm-extractor", "memory", "projectors", "ticker"])
    s.add_argument("--only", help="projectors: comma-separated subset")
    s.add_argument("--instances", type=int, default=1, choices=range(1, 100), metavar="N",
                   help="run N supervised copies that share the stage's consumer group (default 1); "
                        "the same command on other machines adds more")
    s.add_argument("--rollover", action="store_true",
                   help="memory: start even though the memory topic's decisions were made under another rules "
                        "profile, and decide under this worker's from now on (MEMSTREAM_RULES_ROLLOVER=1)")
    s.set_defaults(fn=cmd_worker)

    s = sub.add_parser("run", help="run the whole pipeline until Ctrl-C, restarting a worker that exits")
    s.add_argument("--instances", type=int, default=1, choices=range(1, 100), metavar="N",
                   help="copies of each stage (extractor, memory, projectors; the ticker stays one)")
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("pipeline", help="the pipeline's workers: alive, waiting (on what), restarts")
    s.add_argument("action", choices=["status"])
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_pipeline)
    s = sub.add_parser("status", help="the workers' health and every consumer group's lag")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_status)
    sub.add_parser("demo", help="bring up the stack and run a short demo conversation").set_defaults(fn=cmd_demo)

    s = sub.add_parser("erase", help="erase a user: user.erased + delete their data key, then scrub storage "
                                     "(rewrite what held their rows, drop old WAL); `erase scrub`: the scrub alone")
    s.add_argument("what", choices=["user", "scrub"])
    s.add_argument("user", nargs="?")
    s.add_argument("--by", default="operator")
    s.add_argument("--no-scrub", action="store_true", help="only crypto-shredding and row deletion; scrub later")
    s.add_argument("--after", help="erase scrub: first wait until the projectors applied this position token")
    s.add_argument("--wait-s", type=float, default=120.0,
                   help="how long to wait for the projectors to apply the erasure before scrubbing (default 120)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_erase)

    s = sub.add_parser("forget", help="hard-delete a memory, or everything memory learned about a user (as events)")
    s.add_argument("what", choices=["memory", "user"])
    s.add_argument("target", help="memory: its id; user: the user id")
    s.add_argument("--user", help="memory: the user it belongs to")
    s.add_argument("--by", default="operator")
    s.add_argument("--reason", default="")
    s.add_argument("--at", help="event time, ISO 8601 date or time, UTC unless it names a timezone (default: now)")
    s.add_argument("--force", action="store_true", help="memory: publish even if the read model does not know it")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_forget)

    s = sub.add_parser("ticker", help="publish decay.ticked per partition every period (idle users decay too)")
    s.add_argument("--once", action="store_true", help="publish one round of ticks now and exit")
    s.add_argument("--at", help="with --once: the ticks' event time, ISO 8601, UTC unless it names a timezone")
    s.add_argument("--period-s", type=float, help="override MEMSTREAM_TICK_PERIOD_S")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_ticker)

    s = sub.add_parser("keys", help="key store operations: master key rotation, the HTTP API's keys")
    s.add_argument("action", choices=["rotate", "create-api-key", "list-api-keys", "revoke-api-key"])
    s.add_argument("id", nargs="?", help="revoke-api-key: the key id")
    s.add_argument("--tenant", help="create-api-key: the tenant ([a-z0-9][a-z0-9-]{0,39}); list-api-keys: only its keys")
    s.add_argument("--scopes", help="create-api-key: comma-separated, of memory:write, memory:read, audit:read, "
                                    "audit:content, admin")
    s.add_argument("--user", help="create-api-key: bind the key to this one end user")
    s.add_argument("--name", help="create-api-key: a label")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_keys)

    s = sub.add_parser("init", help="set up a namespace on running Kafka/Postgres/Neo4j: secrets, topics, ACLs, "
                                    "tables, the admin API key (idempotent; docker-compose's init service)")
    s.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the services to answer (default 120)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_init)

    s = sub.add_parser("topics", help="create the namespace's topics")
    s.add_argument("action", choices=["create"])
    s.set_defaults(fn=cmd_topics)

    s = sub.add_parser("namespace", help="what a namespace (a benchmark's, a test's) holds on the stack; drop one whole")
    s.add_argument("action", choices=["list", "drop"])
    s.add_argument("name", nargs="?", help="drop: the namespace (its shadows <name>__… go with it)")
    s.add_argument("--yes", action="store_true", help="drop: really drop (without it: show what would go)")
    s.add_argument("--force", action="store_true", help="drop: even while its consumer groups have members")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_namespace)

    s = sub.add_parser("llm", help="a small local LLM for the LLM channel (optional extra: .[llm])")
    s.add_argument("action", choices=["serve"])
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--n-ctx", dest="n_ctx", type=int, default=4096)
    s.set_defaults(fn=cmd_llm)
    s = sub.add_parser("schemas", help="export the JSON Schemas from the typed models")
    s.add_argument("action", choices=["export"])
    s.set_defaults(fn=cmd_schemas)

    s = sub.add_parser("config", help="print the effective settings by group (secrets masked)")
    s.add_argument("--markdown", action="store_true", help="every setting with its default, a table per group")
    s.add_argument("--json", action="store_true", help="the effective settings as JSON: {group: {setting: value}}")
    s.add_argument("--update-docs", "--update-readme", dest="update_docs", action="store_true",
                   help="rewrite the settings table in docs/configuration.md (--update-readme: its old name)")
    s.set_defaults(fn=cmd_config)

    from memstream.app.replay_cli import add_parsers  # replay rebuild|verify|whatif, audit memory|user
    add_parsers(sub)
    return p


def _check_input(args) -> None:
    """The input contract (schemas/limits.py) before any command touches a store or the log: ids
    1-200 printable characters; counts within the API's bounds. Content is checked by the SDK."""
    ids = {name: value for name in ("user", "session", "task") if isinstance(value := getattr(args, name, None), str)}
    if ids:   # imported only then: schemas.limits loads pydantic, which `status` and `--help` do without
        from schemas.limits import check_id
        for name, value in ids.items():
            check_id(value, name)
    for name, low, high in (("k", 1, 100), ("limit", 1, 100_000)):
        value = getattr(args, name, None)
        if isinstance(value, int) and not low <= value <= high:
            raise InvalidInput(f"--{name} {value} is out of range ({low}-{high})")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        _check_input(args)
        args.fn(args)
    except MemstreamError as exc:
        print(f"memstream: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)  # 1: a check found differences (replay verify)
    return 0


if __name__ == "__main__":
    sys.exit(main())
