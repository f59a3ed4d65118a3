"""The product's top-level packages, read from where the wheel takes them (pyproject.toml), so the
tests that walk the source (architecture, packaging, faust's private attributes, laws cited) cannot
miss a folder the wheel ships."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def product_packages() -> tuple[str, ...]:
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return tuple(p.removesuffix("*") for p in find["include"])
