"""Keeps generated parts of README.md true: `memstream config --markdown` renders the table."""
from __future__ import annotations

import re
from pathlib import Path

from memstream.config import REPO_ROOT, Settings

README = REPO_ROOT / "README.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def with_config_table(text: str) -> str:
    return re.sub(re.escape(START) + r".*?" + re.escape(END),
                  lambda _: f"{START}\n{Settings.markdown_table()}\n{END}", text, flags=re.S)


def update(path: Path = README) -> bool:
    text = path.read_text()
    new = with_config_table(text)
    path.write_text(new)
    return new != text
