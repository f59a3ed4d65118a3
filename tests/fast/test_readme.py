"""The docs stay true: a short README, a settings table generated from the settings, links that
lead somewhere, and every "law N" in the code pointing to where the laws are defined.

No services: these read files only.
"""
import re
from pathlib import Path

from memstream.app.readme import CONFIG_DOC, DOCS, README, with_config_table
from tests.product_packages import product_packages

ROOT = README.parent
README_MAX_LINES = 250
LAW_PACKAGES = product_packages()
LAWS_DOC = "docs/concepts.md"


def _docs() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where `[a](b)` or `# x` is not markdown."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen."""
    heading = re.sub(r"[*_`]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", _prose(path.read_text()), flags=re.M):
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_config_table_is_current():
    text = CONFIG_DOC.read_text()
    assert "<!-- config-table:start -->" in text
    assert with_config_table(text) == text, "run `memstream config --update-docs`"


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci.strip() in README.read_text()


def test_relative_links_lead_to_files_and_anchors():
    broken = []
    for doc in _docs():
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(doc.read_text())):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):   # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_laws_are_defined_once_with_stable_anchors():
    anchors = _anchors(ROOT / LAWS_DOC)
    laws = [a for a in anchors if re.match(r"law-\d-", a)]
    assert "laws" in anchors
    assert sorted(int(a.split("-")[1]) for a in laws) == list(range(1, 9)), laws
    assert "law-1-the-log-is-the-truth" in anchors


def test_every_law_cited_in_the_code_points_to_its_definition():
    anchors = _anchors(ROOT / LAWS_DOC)
    missing, dangling = [], []
    for package in LAW_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            if not re.search(r"(?i)\blaws? \d", text):
                continue
            if LAWS_DOC not in text:
                missing.append(str(path.relative_to(ROOT)))
            dangling += [f"{path.relative_to(ROOT)}: #{a}" for a in re.findall(re.escape(LAWS_DOC) + r"#([\w-]+)", text)
                         if a not in anchors]
    assert not missing, f"these modules cite a law without pointing to {LAWS_DOC}#laws: {missing}"
    assert not dangling, dangling
