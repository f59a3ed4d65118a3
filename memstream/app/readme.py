"""Keeps the generated parts of the docs true: docs/configuration.md holds the settings table,
rendered from the settings themselves (`memstream config --markdown` prints it,
`memstream config --update-docs` rewrites it between its markers)."""
from __future__ import annotations

import re
from pathlib import Path

from kernel.config import REPO_ROOT, Settings

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
CONFIG_DOC = DOCS / "configuration.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def with_config_table(text: str) -> str:
    return re.sub(re.escape(START) + r".*?" + re.escape(END),
                  lambda _: f"{START}\n{Settings.markdown_table()}\n{END}", text, flags=re.S)


def update(path: Path = CONFIG_DOC) -> bool:
    text = path.read_text()
    new = with_config_table(text)
    path.write_text(new)
    return new != text
