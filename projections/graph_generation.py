"""Graph generations: which `ns` value a namespace's live memory graph is stored under.

Neo4j community has one database, so every graph lives in it, told apart by the nodes' `ns`
property. A namespace's live graph starts under `ns = <namespace>`. A rebuild (replay/) projects
the log into a fresh generation (another `ns` value) while the live one keeps serving, then
flips the namespace's pointer node, `(:GraphPointer {ns: <namespace>, current: <generation>})`,
in one transaction: the swap is atomic for readers because every reader resolves the pointer in
the same query that reads the graph (`RESOLVE` below), and the old generation is deleted in
batches afterwards.

Writers take the pointer's write lock at the start of every batch (`follow`), so a swap waits
for a batch in flight and the next batch writes into the generation the swap installed.
No pointer means generation = namespace (every namespace starts that way).
"""
from __future__ import annotations

SETUP = "CREATE CONSTRAINT graph_pointer IF NOT EXISTS FOR (g:GraphPointer) REQUIRE g.ns IS UNIQUE"

# Prefix of a reader's query: binds `gen` to the namespace's current generation ($ns).
RESOLVE = "OPTIONAL MATCH (gp:GraphPointer {ns: $ns}) WITH coalesce(gp.current, $ns) AS gen "


def current(runner, namespace: str) -> str:
    """The generation readers see now (`runner`: a session or a transaction)."""
    rec = runner.run(RESOLVE + "RETURN gen", ns=namespace).single()
    return rec["gen"] if rec else namespace


def follow(tx, namespace: str) -> str:
    """Lock the namespace's pointer for this transaction and return its generation.

    The SET takes the node's write lock: a concurrent swap either committed before (we read its
    new generation) or waits until this transaction ends.
    """
    rec = tx.run("MERGE (gp:GraphPointer {ns: $ns}) ON CREATE SET gp.current = $ns "
                 "SET gp.locked = true RETURN gp.current AS gen", ns=namespace).single()
    return rec["gen"]
