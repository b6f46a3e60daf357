"""BENCHMARKS.md reads at a glance (issue 85): short lines, one short figure per table cell, and every link into
docs/benchmarks-history.md names a heading that is there."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "BENCHMARKS.md"
HISTORY = ROOT / "docs" / "benchmarks-history.md"

LONGEST_LINE = 600
LONGEST_CELL = 320

# an inline link's target, "(docs/benchmarks-history.md#anchor)", or a reference definition's,
# "[label]: docs/benchmarks-history.md#anchor"
INLINE_LINK = re.compile(r"\(docs/benchmarks-history\.md#([^)\s]*)\)")
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[([^\]]+)\]:\s*docs/benchmarks-history\.md#(\S*)\s*$", re.MULTILINE)
REFERENCE_USE = re.compile(r"\]\[([^\]]+)\]")


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading's text: lowercase, only letters, digits, spaces and hyphens kept, spaces to
    hyphens."""
    kept = re.sub(r"[^\w\s-]|_", "", heading.strip().lower())
    return re.sub(r"\s", "-", kept)


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor, a repeated one numbered as GitHub numbers it (-1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not match:
            continue
        anchor = github_anchor(match.group(1))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def table_cells(line: str) -> list[str]:
    """A table row's cells: the pieces between its pipes, less the empty ones before the first and after the last."""
    pieces = line.strip().split("|")
    if pieces and not pieces[0].strip():
        pieces = pieces[1:]
    if pieces and not pieces[-1].strip():
        pieces = pieces[:-1]
    return [piece.strip() for piece in pieces]


def test_github_anchor_follows_githubs_rule():
    assert github_anchor("Session 54: the page shell from HAProxy's cache (issue 53)") == (
        "session-54-the-page-shell-from-haproxys-cache-issue-53")
    assert github_anchor("Moved from BENCHMARKS.md (session 55)") == "moved-from-benchmarksmd-session-55"
    assert github_anchor("de->en, `model.evaluate`") == "de-en-modelevaluate"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n#5f5e5b is a colour\n") == {"a", "a-1"}


def test_benchmarks_reads_at_a_glance():
    text = BENCHMARKS.read_text(encoding="utf-8")
    long_lines = [(number, len(line)) for number, line in enumerate(text.splitlines(), 1) if len(line) > LONGEST_LINE]
    assert not long_lines, f"lines over {LONGEST_LINE} characters (line, length): {long_lines}"
    long_cells = [
        (number, len(cell), cell[:60])
        for number, line in enumerate(text.splitlines(), 1)
        if line.lstrip().startswith("|")
        for cell in table_cells(line)
        if len(cell) > LONGEST_CELL
    ]
    assert not long_cells, f"table cells over {LONGEST_CELL} characters (line, length, start): {long_cells}"


def test_links_into_the_history_name_its_headings():
    text = BENCHMARKS.read_text(encoding="utf-8")
    known = anchors(HISTORY.read_text(encoding="utf-8"))
    definitions = {label.lower(): anchor for label, anchor in REFERENCE_DEFINITION.findall(text)}
    targets = INLINE_LINK.findall(text) + list(definitions.values())
    assert targets, "BENCHMARKS.md links to no section of docs/benchmarks-history.md"
    missing = sorted({target for target in targets if target not in known})
    assert not missing, f"links to headings docs/benchmarks-history.md does not have: {missing}"
    defined = {label.lower() for label, _ in re.findall(r"^\s{0,3}\[([^\]]+)\]:\s*(\S+)", text, re.MULTILINE)}
    undefined = {label.lower() for label in REFERENCE_USE.findall(text)} - defined
    assert not undefined, f"reference links without a definition: {sorted(undefined)}"
