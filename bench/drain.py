"""A benchmark's pipeline, started, waited for and stopped on any machine, however loaded.

`Backlog` reads where a namespace's pipeline stands: per stage, the records it has still to read
(its consumer group's committed offsets against the ends of its input topics: the extractor on
turns, the memory processor on turns (session episodes), facts and memory, each projector on memory, the projectors'
stored positions (their truth, law 3) counted where their committed hint trails), and per turns
partition the turns not yet decided (the extractor's source watermark, stored by the projectors
beside their positions, below the partition's end: kernel/watermarks.py). Committed offsets
and positions are read before the ends, so a backlog read as zero was zero: a stage that had
read everything its input held when it was asked about it had also written its output by then.

`wait_drained` waits until that backlog is zero (every stage's lag zero and every published turn
decided), printing what is left per stage every `every` seconds. It never gives up on a fixed
total: only when nothing moved at all for `stall_s` seconds (no stage read a record, no turn was
decided, no topic grew), or when a worker exited. `Pipeline` starts the workers (once) and stops
them on exit: an exception, Ctrl-C or SIGTERM/SIGHUP included.
"""
from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field

from adapters.kafka_auth import ADMIN, kafka_config

SCORED_PROJECTORS = ("pgvector-items", "neo4j-graph")


class Stalled(RuntimeError):
    """The pipeline made no progress at all for the stall time-out."""


@dataclass(frozen=True)
class Stage:
    name: str                    # its consumer group, less "<namespace>."
    topics: tuple[str, ...]      # the logical topics it reads
    projector: str | None = None


def stages(settings, extract: bool = True, projectors: tuple[str, ...] = SCORED_PROJECTORS) -> list[Stage]:
    """The stages a benchmark waits for: the extractor(s) when turns are the input, the memory
    processor, and the projectors whose read models it scores."""
    out = []
    if extract:
        out.append(Stage("extractor", ("turns",)))
        if settings.llm_base_url:
            out.append(Stage("llm-extractor", ("turns",)))
    # the memory processor's app reads turns too: its session summarizer makes episodes (facts) of them
    out.append(Stage("memory", ("turns", "facts", "memory")))
    out += [Stage(f"projector.{p}", ("memory",), p) for p in projectors]
    return out


@dataclass
class State:
    lag: dict[str, int]                                   # stage → records still to read
    undecided: dict[int, int] = field(default_factory=dict)  # turns partition → offsets not yet decided
    ends: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return not any(self.lag.values()) and not any(self.undecided.values())

    def key(self) -> tuple:
        return tuple(sorted(self.lag.items())), tuple(sorted(self.undecided.items())), tuple(sorted(self.ends.items()))

    def describe(self) -> str:
        left = ", ".join(f"{name} {n:,}" for name, n in self.lag.items())
        if self.undecided:
            left += f"; turns not yet decided: {sum(self.undecided.values()):,}"
        return left


class Backlog:
    """Reads a namespace's backlog (State) through the one bounded log reader (adapters/bus.py)."""

    def __init__(self, settings, stages_: list[Stage], turns: bool = True):
        from adapters.bus import LogReader, ensure_topics
        from projections.registry import build_projector
        ensure_topics(settings)   # every topic and partition exists before an end is read
        self.settings, self.stages, self.turns = settings, stages_, turns
        self.reader = LogReader(kafka_config(settings, ADMIN), "bench-backlog")
        self.projectors = {}
        try:
            for p in sorted({s.projector for s in stages_ if s.projector} | (set(SCORED_PROJECTORS) if turns else set())):
                proj = build_projector(p, settings)
                proj.setup()
                self.projectors[p] = proj
        except BaseException:
            self.close()
            raise

    def read(self) -> State:
        from kernel import watermarks
        from adapters.lag import consumer_lag
        s = self.settings
        groups = {f"{s.namespace}.{st.name}": st for st in self.stages}
        committed: dict[tuple[str, str, int], int] = {}
        for r in consumer_lag(s, timeout=10.0, groups=sorted(groups)):
            if r.committed is not None:
                committed[(r.group, r.topic, r.partition)] = r.committed
        positions = {name: proj.positions() for name, proj in self.projectors.items()}
        # a stage reads the topics it is known to read and any other it has committed on (an agent added later)
        reads = {group: {s.topic(t) for t in st.topics} | {t for g, t, _p in committed if g == group}
                 for group, st in groups.items()}
        topics = set().union(*reads.values()) | ({s.topic("turns")} if self.turns else set())
        ends = self.reader.ends(topics)       # read last: the backlog can only be over-counted
        lag = {}
        for group, st in groups.items():
            n = 0
            for topic in sorted(reads[group]):
                for (t, p), end in ends.items():
                    if t != topic:
                        continue
                    done = committed.get((group, t, p), 0)
                    if st.projector:   # the stored position is the truth, the committed offset a hint
                        done = max(done, positions[st.projector].get((t, p), 0))
                    n += max(0, end - done)
            lag[st.name] = n
        undecided = {}
        if self.turns:
            turns = s.topic("turns")
            for (t, p), end in ends.items():
                if t == turns and end > 0:
                    have = min(pos.get(watermarks.position_key(turns, p), 0) for pos in positions.values())
                    undecided[p] = max(0, end - have)
        return State(lag, undecided, ends)

    def close(self) -> None:
        for proj in self.projectors.values():
            proj.close()
        self.reader.close()


def check_alive(procs: dict | None, settings=None) -> None:
    dead = {name: p.returncode for name, p in (procs or {}).items() if p.poll() is not None}
    if dead:
        where = settings.stack_dir / "logs" if settings is not None else ".stack/logs"
        raise RuntimeError(f"pipeline worker(s) exited ({', '.join(f'{n}: rc {rc}' for n, rc in dead.items())}); "
                           f"their logs: {where}")


def _say(line: str) -> None:
    print(line, flush=True)


def wait_drained(backlog: Backlog, procs: dict | None, *, stall_s: float = 600.0, every: float = 10.0,
                 poll_s: float = 1.0, log=_say) -> State:
    """Until the backlog is zero; progress every `every` s; Stalled after `stall_s` s without any
    movement (a failed read counts as none); RuntimeError if a worker exits."""
    started = last_move = last_report = time.monotonic()
    seen, state, why = None, None, ""
    while True:
        check_alive(procs, backlog.settings)
        try:
            state = backlog.read()
        except Exception as exc:  # noqa: BLE001 - a broker busy under load: read again, it is no progress
            why = f" (last read failed: {type(exc).__name__}: {exc})"
        else:
            why = ""
            if state.done:
                return state
            if state.key() != seen:
                seen, last_move = state.key(), time.monotonic()
        now = time.monotonic()
        if now - last_move > stall_s:
            raise Stalled(f"the pipeline made no progress for {stall_s:.0f} s; still to read: "
                          f"{state.describe() if state else 'unknown'}{why}. `memstream pipeline status` says what each "
                          f"worker waits for; logs in {backlog.settings.stack_dir / 'logs'}")
        if now - last_report >= every:
            last_report = now
            log(f"  … draining ({now - started:.0f}s): still to read: {state.describe() if state else 'unknown'}{why}")
        time.sleep(poll_s)


class Pipeline:
    """The pipeline's workers for one namespace, started at most once (start()), stopped when the
    `with` block ends however it ends; SIGTERM and SIGHUP end it like Ctrl-C does."""

    def __init__(self, settings, env: dict | None = None):
        self.settings, self.env = settings, env
        self.procs: dict = {}
        self._old: dict = {}

    def start(self) -> dict:
        from memstream.app.workers import start_pipeline
        if not self.procs:
            self.procs = start_pipeline(self.settings, env=self.env)
        return self.procs

    @property
    def started(self) -> bool:
        return bool(self.procs)

    def _raise(self, signum, _frame) -> None:
        raise SystemExit(128 + signum)

    def __enter__(self) -> "Pipeline":
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._old[sig] = signal.signal(sig, self._raise)
            except ValueError:   # not the main thread: the caller handles its signals
                pass
        return self

    def __exit__(self, *exc) -> None:
        from memstream.app.workers import stop_pipeline
        try:
            if self.procs:
                try:
                    stop_pipeline(self.procs)
                except BaseException:   # interrupted while stopping: do not leave them running
                    for p in self.procs.values():
                        if p.poll() is None:
                            p.kill()
                    raise
        finally:
            for sig, old in self._old.items():
                signal.signal(sig, old)
