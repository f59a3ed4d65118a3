"""The event contract without services: the JSON Schema files under schemas/ match the models. The
contract on the real log: tests/test_contract.py."""
from __future__ import annotations

import orjson

from schemas.jsonschema_export import JSON_DIR, rendered


def test_json_schema_files_match_the_models():
    files = rendered()
    on_disk = {p.name: p.read_bytes() for p in JSON_DIR.glob("*.json")}
    assert on_disk == files, "schemas/json is stale: run `memstream schemas export`"
    fact = orjson.loads(files["fact.extracted.v1.json"])
    assert fact["x-sealed"] == ["content", "embedding", "key", "metadata", "tags", "value"]
    assert fact["properties"]["embedding"]["x-sealed"] is True
