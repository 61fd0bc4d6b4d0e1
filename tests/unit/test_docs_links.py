"""Every relative link in README.md and docs/*.md leads somewhere: the file exists and,
for a `#anchor`, the page has a heading of that name (GitHub's anchor rules). The
reference moved out of the README into docs/; this keeps the links from rotting."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, markup and punctuation dropped, each
    space a '-' (hyphens and underscores kept)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its words
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page's headings make; a repeated heading gets -1, -2, ... as on
    GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        base = anchor(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    """The link targets of a page, outside code blocks and inline code."""
    text = INLINE_CODE.sub("", FENCE.sub("", page.read_text()))
    return LINK.findall(text)


def broken(page: Path) -> list[str]:
    """The relative links of `page` that lead nowhere, each with why."""
    bad = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            bad.append(f"{target}: no heading #{fragment} in {dest.name}")
    return bad


def test_github_anchor_rules() -> None:
    assert anchor("When nobody is watching: `watch`, milestone pushes, alerts") == \
        "when-nobody-is-watching-watch-milestone-pushes-alerts"
    assert anchor("`status --json`") == "status---json"
    assert anchor("A first fleet") == "a-first-fleet"
    assert anchor("Stop, start_and destroy (v2)") == "stop-start_and-destroy-v2"


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    """The check itself: a missing file and a missing heading are both caught, a good
    link and a link inside code are not."""
    (tmp_path / "other.md").write_text("# Other\n\n## Host keys\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#host-keys) [gone](nothing.md) [bad](other.md#keys)\n"
                    "`[code](nothing.md)`\n```\n[fenced](nothing.md)\n```\n"
                    "[here](#page) [web](https://example.org/x)\n\n# Page\n")
    assert broken(page) == ["nothing.md: no such file",
                            "other.md#keys: no heading #keys in other.md"]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    assert links(page), f"{page.name} links nowhere"
    assert broken(page) == []


def test_the_readme_links_every_docs_page() -> None:
    """The README is the front door: every page in docs/ is reachable from it."""
    linked = {(ROOT / target.partition("#")[0]).resolve()
              for target in links(ROOT / "README.md")}
    missing = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"


def test_architecture_names_every_layer_the_layer_test_enforces() -> None:
    """docs/architecture.md explains the layers tests/unit/test_layers.py enforces: a
    layer added to its LAYERS table (read from its syntax tree) must be named on the page
    too, as a path (`tui.model` -> tui/model, `tui.app` -> tui/app.py)."""
    tree = ast.parse((ROOT / "tests" / "unit" / "test_layers.py").read_text())
    table = next(node.value for node in tree.body
                 if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                 and node.target.id == "LAYERS")
    assert isinstance(table, ast.Dict)
    layers = [ast.literal_eval(key) for key in table.keys if key is not None]
    assert "tui.model" in layers
    page = (ROOT / "docs" / "architecture.md").read_text()
    unnamed = [layer for layer in layers if layer != "tui"
               and layer.replace(".", "/") not in page
               and layer.replace(".", "/") + ".py" not in page]
    assert not unnamed, f"layers docs/architecture.md does not name: {unnamed}"


def test_the_readmes_keys_name_every_binding_id() -> None:
    """The keys stay in the README (a newcomer needs them): every binding id the config's
    `[keys]` may remap is named in its "Keys in the panel" section."""
    from tui.model.keys import DEFAULT_KEYS

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Keys in the panel", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", section))
    assert not set(DEFAULT_KEYS) - named, sorted(set(DEFAULT_KEYS) - named)
