"""The `memstream replay …` and `memstream audit …` commands (registered by memstream/app/cli.py)."""
from __future__ import annotations

import sys
from datetime import datetime

import orjson

from kernel.errors import MemstreamError

# The projectors' names, for --projection's choices and help. projections/registry.py is the
# source (PROJECTORS); importing it loads every projector and its store clients (~0.5 s of CPU),
# so argument parsing keeps this copy and tests/fast/test_cli_startup.py checks the two agree.
PROJECTOR_NAMES = ("kv-preferences", "pgvector-items", "neo4j-graph", "task-buffers", "session-windows",
                   "audit-index", "pg-relations")


def get_settings():
    from kernel.config import get_settings as settings   # pydantic: only when a command runs
    return settings()


def parse_time(text: str | None, flag: str) -> datetime | None:
    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise MemstreamError(f"{flag} {text!r}: not an ISO 8601 time") from None
    if t.tzinfo is None:
        raise MemstreamError(f"{flag} {text!r} needs a timezone, e.g. 2026-01-02T10:00:00+00:00")
    return t


def _json(obj) -> None:
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")


class Failed(MemstreamError):
    """A check that found differences: exit status 1, its report already printed."""
    exit_code = 1


def cmd_rebuild(args) -> None:
    from replay.rebuild import rebuild
    report = rebuild(get_settings(), args.projection, since=parse_time(args.since, "--from"), fresh=args.fresh,
                     progress=not args.quiet, stop_after=args.stop_after, batch_size=args.batch, workers=args.workers)
    if args.json:
        _json(report.as_dict())
    elif report.swapped:
        print(f"rebuilt {', '.join(report.projections)}: {report.load.records:,} events in {report.load.seconds:.1f}s "
              f"({report.load.rate:,.0f} events/s), indexes {report.index_seconds:.1f}s, swap {report.swap_seconds:.2f}s")
    else:
        print(f"stopped after {report.load.records:,} events; the shadow {report.shadow_schema} resumes on the next run")


def cmd_verify(args) -> None:
    from replay.verify import verify
    report = verify(get_settings(), args.projection, progress=not args.quiet, rows=args.rows, keep=args.keep,
                    batch_size=args.batch)
    if args.json:
        _json(report.as_dict())
    else:
        for c in report.checks:
            print(f"{'ok  ' if c.equal else 'DIFF'} {c.name:16s} {c.live}")
            if not c.equal:
                print(f"     shadow           {c.shadow}")
                for d in c.diffs:
                    print("     " + orjson.dumps(d, default=str).decode()[:600])
        if report.rules_profiles:   # which rules made the decisions the projections were rebuilt from
            print("decisions replayed by rules profile: " + ", ".join(
                f"{h} {n:,}" for h, n in sorted(report.rules_profiles.items(), key=lambda x: -x[1])))
    if not report.ok:
        raise Failed(f"{sum(not c.equal for c in report.checks)} projection(s) differ from a replay of the log")


def cmd_whatif(args) -> None:
    from replay.whatif import render, whatif
    report = whatif(get_settings(), args.name, args.set or [], progress=not args.quiet, examples=args.examples,
                    project=not args.no_project).as_dict()
    _json(report) if args.json else print(render(report))


def cmd_reextract(args) -> None:
    from adapters.privacy.keystore import KeyStore
    from replay.reextract import reextract
    s = get_settings()
    keys = KeyStore(s)
    try:
        report = reextract(s, parse_time(args.since, "--from"), keys=keys, dry_run=args.dry_run)
    finally:
        keys.close()
    if args.json:
        _json(report.as_dict())
    else:
        print(f"{report.turns:,} turn records read ({report.unreadable:,} unreadable, {report.user_turns:,} user turns): "
              f"{report.facts:,} facts, {report.present:,} already in the facts topic, {report.missing:,} missing"
              + (" (dry run: nothing published)" if report.dry_run else f", {report.published:,} published"))


def cmd_audit(args) -> None:
    from replay.audit import memory_audit, render_memory, render_user, user_timeline
    s = get_settings()
    if args.what == "memory":
        out = memory_audit(s, args.target, content=not args.no_content)
        _json(out) if args.json else print(render_memory(out))
    else:
        out = user_timeline(s, args.target, content=args.content, limit=args.limit,
                            since=parse_time(args.since, "--since"), until=parse_time(args.until, "--until"))
        _json(out) if args.json else print(render_user(out))


def add_parsers(sub) -> None:
    choices = [*PROJECTOR_NAMES, "all"]

    r = sub.add_parser("replay", help="rebuild projections from the log, verify them, or re-derive memory what-if")
    rs = r.add_subparsers(dest="replay_cmd", required=True)

    s = rs.add_parser("rebuild", help="rebuild into shadow stores while the live ones serve, then swap atomically")
    s.add_argument("--projection", required=True, choices=choices)
    s.add_argument("--from", dest="since", metavar="TIME",
                   help="re-project only the log's tail: start from a copy of the live projection and re-apply "
                        "every record appended at or after TIME (ISO 8601 with timezone)")
    s.add_argument("--fresh", action="store_true", help="discard an interrupted rebuild's shadow instead of resuming it")
    s.add_argument("--stop-after", type=int, metavar="N", help="stop after N events without swapping (the next run resumes)")
    s.add_argument("--batch", type=int, default=5000, help="records per batch (default 5000)")
    s.add_argument("--workers", type=int, default=1,
                   help="bulk-load in N processes, sharded by partition (each decodes its own partitions)")
    s.add_argument("--quiet", action="store_true", help="no progress on stderr")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_rebuild)

    s = rs.add_parser("verify", help="rebuild into throw-away shadows and compare checksums with the live projections")
    s.add_argument("--projection", default="all", choices=choices)
    s.add_argument("--rows", type=int, default=5, help="differing rows shown per projection")
    s.add_argument("--keep", action="store_true", help="keep the shadow (<ns>__verify) for inspection")
    s.add_argument("--batch", type=int, default=5000)
    s.add_argument("--quiet", action="store_true")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_verify)

    s = rs.add_parser("whatif", help="re-derive memory decisions from the facts with other settings, and compare")
    s.add_argument("--name", required=True, help="names the decision topic <ns>.whatif-NAME.memory and its read models")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="a setting override (repeatable), e.g. dedup_threshold=0.9")
    s.add_argument("--examples", type=int, default=5)
    s.add_argument("--no-project", action="store_true", help="only the decision topic and the comparison, no read models")
    s.add_argument("--quiet", action="store_true")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_whatif)

    s = rs.add_parser("reextract", help="re-run the offline extraction over the turns topic and publish the facts "
                                        "missing from the facts topic (repairs lost extractor output)")
    s.add_argument("--from", dest="since", metavar="TIME",
                   help="only turns appended at or after TIME (ISO 8601 with timezone; log time); default: the whole topic")
    s.add_argument("--dry-run", action="store_true", help="count what is missing, publish nothing")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_reextract)

    a = sub.add_parser("audit", help="a memory's whole life, or a user's timeline (audit index + the log)")
    a.add_argument("what", choices=["memory", "user"])
    a.add_argument("target", help="the memory id, or the user id")
    a.add_argument("--no-content", action="store_true", help="memory: do not unseal the records' content")
    a.add_argument("--content", action="store_true", help="user: unseal every record's content")
    a.add_argument("--limit", type=int, default=1000, help="user: most events shown")
    a.add_argument("--since", help="user: events at or after this time")
    a.add_argument("--until", help="user: events at or before this time")
    a.add_argument("--json", action="store_true")
    a.set_defaults(fn=cmd_audit)
