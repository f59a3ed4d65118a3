"""The suite's own imports hold: every `from tests.x import name` names something tests/x.py defines.

A stack-tier module that imports a helper the fast tier renamed fails only at collection, 20 minutes
into `.ci/run`; read from the source (AST), this catches it in the fast tier's first second."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def top_level_names(path: Path) -> set[str]:
    """What `from module import name` can take from the file: its top-level definitions and imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def test_every_import_from_the_suite_names_what_its_module_defines():
    missing = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests.")):
                continue
            target = TESTS.parent / (node.module.replace(".", "/") + ".py")
            if not target.exists():
                target = target.with_suffix("") / "__init__.py"
            if not target.exists():
                missing.append(f"{path.relative_to(TESTS.parent)}: no module {node.module}")
                continue
            defined = top_level_names(target)
            missing += [f"{path.relative_to(TESTS.parent)}: {node.module} has no {a.name}"
                        for a in node.names if a.name != "*" and a.name not in defined]
    assert not missing, "\n".join(missing)
