"""Render the contract as JSON Schema files: schemas/json/<type>.v<version>.json + envelope.json.

The typed models in schemas/events.py are the single source; these files are what other
languages and tools read. A test fails when a model changed and the files were not re-exported
(`memstream schemas export`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from schemas.envelope import WireEnvelope
from schemas.events import ALL_EVENTS, EventData

JSON_DIR = Path(__file__).parent / "json"


def event_schema(cls: type[EventData]) -> dict[str, Any]:
    schema = cls.model_json_schema()
    schema["$id"] = f"memstream:{cls.TYPE}:v{cls.VERSION}"
    schema["title"] = f"{cls.TYPE} v{cls.VERSION}"
    schema["description"] = cls.DESCRIPTION
    schema["x-event-type"] = cls.TYPE
    schema["x-event-version"] = cls.VERSION
    # Which fields travel only inside the envelope's `sealed` part (crypto-shredding).
    schema["x-sealed"] = sorted(cls.SEALED)
    for name in cls.SEALED:
        schema["properties"][name]["x-sealed"] = True
    return schema


def rendered() -> dict[str, bytes]:
    opts = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
    files = {f"{c.TYPE}.v{c.VERSION}.json": orjson.dumps(event_schema(c), option=opts) for c in ALL_EVENTS}
    env = WireEnvelope.model_json_schema()
    env["$id"] = "memstream:envelope"
    files["envelope.json"] = orjson.dumps(env, option=opts)
    return files


def export(directory: Path = JSON_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in rendered().items():
        path = directory / name
        path.write_bytes(content)
        written.append(path)
    return written
