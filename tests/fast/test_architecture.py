"""The import contract: layers point one way, and no module-level cycle exists anywhere.

Read from the source (AST), so it needs no services. Every import counts, including the ones
inside functions: a lazy import does not make an upward arrow or a cycle acceptable.

Layers, bottom to top, one top-level folder each (a module may import its own layer and the ones
below it, so no two folders import each other: test_folders_import_one_way):

  kernel      kernel/        errors, ids, settings, watermarks: no project imports but each other
  contract    schemas/       the event contract
  domain      domain/        the pure rules: the kernel, the contract's events and itself only
  adapters    adapters/      the edges: privacy (keys, sealing), the bus, embedding, erasure, metrics, ...
  processing  streams/ | projections/    siblings: neither imports the other
  read        query/
  replay      replay/
  services    services/      the use cases: access, read-your-writes, the events a use publishes
  app         memstream/     entry points (CLI, API, MCP, console, workers, demo, ticker), the HTTP SDK,
                             framework adapters, the local stack; memstream.errors and memstream.sdk
                             re-export the kernel's errors and the publishing client for users

Entry points (the HTTP API, the MCP server, the CLI, the console, the framework adapters) parse,
call a use case in services, and render: they open no store and no Kafka client
themselves (test_entry_points_open_no_store).
"""
from __future__ import annotations

import ast
from pathlib import Path
from tests.product_packages import product_packages

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = product_packages()

# (layer rank, group) by module prefix; the longest matching prefix wins.
LAYERS: dict[str, tuple[int, str]] = {
    "kernel": (0, "kernel"),
    "schemas": (1, "contract"),
    "domain": (2, "domain"),
    "adapters": (3, "adapters"),
    "streams": (4, "streams"),
    "projections": (4, "projections"),
    "query": (5, "query"),
    "replay": (6, "replay"),
    "services": (7, "services"),
    "memstream": (8, "app"),
}
# The pure domain: no adapters, no I/O, only the kernel, the contract and itself.
PURE = "domain"
PURE_MAY_IMPORT = ("domain", "schemas.events", "kernel.errors", "kernel.ids")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts).removesuffix(".__init__")
            out[name] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every project module `name` imports (module level or inside functions)."""
    found: set[str] = set()
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from pkg import sub` imports the module pkg.sub when it is one
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        for t in targets:
            if t.split(".")[0] in PACKAGES:
                while t not in known and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in known and t != name:
                    found.add(t)
    return found


def layer(name: str) -> tuple[int, str]:
    placed = [p for p in LAYERS if name == p or name.startswith(p + ".")]
    assert placed, f"{name}: not placed in a layer (add its folder to LAYERS in {__file__})"
    return LAYERS[max(placed, key=len)]


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def test_every_module_has_a_layer():
    for name in graph():
        layer(name)


def test_imports_point_down():
    upward = []
    for name, deps in graph().items():
        rank, group = layer(name)
        for dep in deps:
            dep_rank, dep_group = layer(dep)
            if dep_rank > rank or (dep_rank == rank and dep_group != group):
                upward.append(f"{name} ({group}) imports {dep} ({dep_group})")
    assert not upward, "imports that run upward or sideways:\n  " + "\n  ".join(sorted(upward))


def test_folders_import_one_way():
    """The folders show the layers: no two top-level folders import each other, directly or round a loop."""
    g = graph()
    arrows = {(a.split(".")[0], d.split(".")[0]) for a, deps in g.items() for d in deps} - {(f, f) for f in PACKAGES}
    both_ways = sorted(f"{a} <-> {b}" for a, b in arrows if (b, a) in arrows and a < b)
    assert not both_ways, "folders that import each other:\n  " + "\n  ".join(both_ways)
    order = sorted(PACKAGES, key=lambda f: LAYERS[f][0])
    backwards = sorted(f"{a} -> {b}" for a, b in arrows if order.index(b) > order.index(a))
    assert not backwards, "folders importing a folder above them:\n  " + "\n  ".join(backwards)


def test_domain_is_pure():
    impure = [f"{name} imports {dep}" for name, deps in graph().items() if name.startswith(PURE)
              for dep in deps if not dep.startswith(PURE_MAY_IMPORT)]
    assert not impure, "the pure domain imports adapters:\n  " + "\n  ".join(sorted(impure))


def test_no_import_cycles():
    g = graph()
    # Tarjan's strongly connected components; any component of two or more modules is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles:\n  " + "\n  ".join(" ↔ ".join(c) for c in cycles)


def test_the_contract_test_catches_an_upward_import(tmp_path):
    """The checker itself: an upward import in a made-up module is reported."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from memstream.app.cli import main\n")
    known = set(modules())
    deps = imports_of("domain.probe", probe, known)
    assert "memstream.app.cli" in deps
    assert layer("memstream.app.cli")[0] > layer("domain.probe")[0]


# -- entry points reach stores only through the services ------------------------------------------

# The modules a caller comes in through. memstream.integrations are the framework adapters: they
# talk to the HTTP API (memstream.http_client), so they stand below the app layer but are held to
# the same rule.
ENTRY_POINTS = ("memstream.app.api", "memstream.app.mcp_server", "memstream.app.cli", "memstream.app.console",
                "memstream.integrations")
# What an entry point may not import, because it is a store or a Kafka client, or an adapter that
# opens one. Whatever needs them is a use case and belongs in services, where
# authorisation, the read-your-writes wait and the events a use publishes are written once.
#   third-party clients: Postgres (psycopg, psycopg_pool, pgvector), Neo4j, Kafka (confluent_kafka,
#     aiokafka, faust);
#   memstream's adapters: bus (producers, consumers, topic admin), sdk (the publishing client),
#     erasure (publishes and deletes keys), the key stores (privacy.keystore, privacy.apikeys);
#   the read side as a whole (query: its pools and queries; projections: read models and their SQL)
#     and the replay reads that serve callers (replay.audit, replay.timetravel).
# Operators' replay tools (rebuild, verify, what-if: memstream/app/replay_cli.py) are not entry
# points for callers and stay outside this rule.
STORE_CLIENTS = ("psycopg", "psycopg_pool", "pgvector", "neo4j", "confluent_kafka", "aiokafka", "faust",
                 "adapters.bus", "adapters.sdk", "adapters.erasure", "adapters.privacy.keystore",
                 "adapters.privacy.apikeys", "query", "projections", "replay.audit", "replay.timetravel")
# Unavoidable exceptions, each (importer, imported) with why. Empty: keep it so.
ALLOWED: dict[tuple[str, str], str] = {}


def all_imports(path: Path, name: str) -> set[str]:
    """Every module `path` imports by absolute name, the project's and third parties' alike."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)   # `from pkg import sub`
    return found


def _is(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def store_imports(name: str, path: Path) -> list[str]:
    return sorted({f"{name} imports {banned}" for mod in all_imports(path, name) for banned in STORE_CLIENTS
                   if _is(mod, banned) and (name, banned) not in ALLOWED})


def test_entry_points_open_no_store():
    entry = {n: p for n, p in modules().items() if any(_is(n, e) for e in ENTRY_POINTS)}
    assert {"memstream.app.api", "memstream.app.mcp_server", "memstream.app.cli"} <= set(entry)
    found = [line for name, path in sorted(entry.items()) for line in store_imports(name, path)]
    assert not found, ("entry points that import a store or a Kafka client (call a use case in "
                       "services instead):\n  " + "\n  ".join(found))


def test_the_entry_point_rule_catches_a_store_import(tmp_path):
    """The checker itself: a lazy import of a store client in a made-up entry point is reported."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from query.store import ReadModels\n    import psycopg\n")
    assert store_imports("memstream.app.probe", probe) == ["memstream.app.probe imports psycopg",
                                                          "memstream.app.probe imports query"]
