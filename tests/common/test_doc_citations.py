"""Code comments cite PTX facts the repo holds: every citation in ptxgen/ names a page under
docs/ptx_facts/ that exists and a section (§N) that page has, and none points at the fact sheet
outside the repo. A comment that drifts from the docs fails here, not in review.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "ptx_facts"

#: Citations of the fact sheet outside the repo (the old forms); the docs pages replace them.
OUTSIDE = re.compile(r"ptx_facts\.md|ptx_facts §|\.\./shared|/work/shared|\bfacts §|facts? sheet",
                     re.IGNORECASE)
#: A docs page with or without its docs/ptx_facts/ prefix, then its sections: "wgmma.md §9a, §9c",
#: "module.md (§10", "wgmma.md §9a–§9c".
SECTION = r"§[0-9][\w′]*"
PAGE_SECTIONS = re.compile(rf"([\w-]+)\.md\s*\(?({SECTION}(?:\s*(?:,|[–-])\s*{SECTION})*)")
DOCS_PAGE = re.compile(r"docs/ptx_facts/([\w.-]+)")
#: Citations of an issue tracker the repo does not hold ("issue 13, item 3", "issue #12").
TRACKER = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)


def sources() -> list[Path]:
    files = sorted((ROOT / "ptxgen").rglob("*.py"))
    assert len(files) > 50, "ptxgen sources not found next to the tests"
    return files


def has_section(page: Path, section: str) -> bool:
    """The page names the section, as a heading or a bold sub-item (§9d must not match §9d′)."""
    return re.search(re.escape(section) + r"(?![\w′])", page.read_text()) is not None


def test_no_comment_cites_the_fact_sheet_outside_the_repo():
    bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
           for p in sources() for i, line in enumerate(p.read_text().splitlines(), 1)
           if OUTSIDE.search(line)]
    assert not bad, ("these lines cite the fact sheet outside the repo; cite the page and section "
                     "under docs/ptx_facts/ instead (docs/ptx_facts/README.md maps §N to pages):\n"
                     + "\n".join(bad))


def test_no_comment_cites_an_issue_tracker():
    """A reader has the repo, not the tracker: comments cite docs pages and files instead."""
    bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
           for p in sources() for i, line in enumerate(p.read_text().splitlines(), 1)
           if TRACKER.search(line)]
    assert not bad, ("these lines cite an issue tracker outside the repo; say what the code does and "
                     "cite docs/ptx_facts/ or the files that hold it instead:\n" + "\n".join(bad))


def test_every_cited_docs_page_and_section_exists():
    bad, cited = [], 0
    for p in sources():
        text = p.read_text()
        for m in DOCS_PAGE.finditer(text):
            name = m.group(1).rstrip(".")
            if name and not (DOCS / name).exists():
                bad.append(f"{p.relative_to(ROOT)}: docs/ptx_facts/{name} does not exist")
        for m in PAGE_SECTIONS.finditer(text):
            page = DOCS / f"{m.group(1)}.md"
            cited += 1
            if not page.exists():
                bad.append(f"{p.relative_to(ROOT)}: {m.group(0)!r} cites a page not in docs/ptx_facts/")
                continue
            for section in re.findall(SECTION, m.group(2)):
                if not has_section(page, section):
                    bad.append(f"{p.relative_to(ROOT)}: {m.group(0)!r}: {page.name} has no {section}")
    assert cited > 40, f"only {cited} citations found: the citation pattern no longer matches the code"
    assert not bad, "\n".join(bad)


def test_the_citation_checks_catch_a_wrong_page_and_section():
    """The patterns above really find the forms the checks are meant to reject."""
    assert OUTSIDE.search("(facts §9e)") and OUTSIDE.search("see ../shared/ptx_facts.md §4")
    assert OUTSIDE.search("(PTX facts sheet §1)") and not OUTSIDE.search("docs/ptx_facts/tma.md §9d")
    assert TRACKER.search("(issue 13, item 3)") and TRACKER.search("see issue #12")
    assert not TRACKER.search("tissue 3") and not TRACKER.search("issues the copies")
    m = PAGE_SECTIONS.search("(docs/ptx_facts/wgmma.md §9a–§9c, tma.md §9d)")
    assert m.group(1) == "wgmma" and re.findall(SECTION, m.group(2)) == ["§9a", "§9c"]
    assert not has_section(DOCS / "tma.md", "§9z") and has_section(DOCS / "tma.md", "§9d′")
