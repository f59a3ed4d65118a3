"""The projectors by name: what `memstream worker projectors`, rebuild, verify and what-if build."""
from __future__ import annotations

from kernel.config import Settings
from projections.audit_index import AuditIndexProjector
from projections.graph_projector import GraphProjector
from projections.postgres_projectors import MemoryItemsProjector, PreferencesProjector
from projections.relations import RelationsProjector
from projections.runner import Projector
from projections.session_windows import SessionWindowsProjector
from projections.task_buffers import TaskBuffersProjector

PROJECTOR_TYPES: dict[str, type[Projector]] = {
    "kv-preferences": PreferencesProjector, "pgvector-items": MemoryItemsProjector,
    "neo4j-graph": GraphProjector, "task-buffers": TaskBuffersProjector,
    "session-windows": SessionWindowsProjector, "audit-index": AuditIndexProjector,
    "pg-relations": RelationsProjector,
}
PROJECTORS = tuple(PROJECTOR_TYPES)


def build_projector(name: str, settings: Settings, generation: str | None = None) -> Projector:
    """A projector of `name` over `settings`; the graph one pinned to `generation` when given
    (a shadow being rebuilt), else following the namespace's graph pointer (the live one)."""
    projector = PROJECTOR_TYPES[name](settings)
    if generation is not None and isinstance(projector, GraphProjector):
        projector.generation = generation
    return projector


def checksums(settings: Settings, names=PROJECTORS) -> dict[str, str]:
    """Each named projection's content checksum (`Projector.checksum`): what rebuild and replay
    comparisons diff, what a drop or a rebalance must leave as it was."""
    out = {}
    for name in names:
        p = build_projector(name, settings)
        p.setup()
        try:
            out[name] = p.checksum()
        finally:
            p.close()
    return out
