"""mkdocs hook: the repository files the pages link to but that live outside ``docs/``
(the benchmark suite's README and results, the compose stack's README) join the site under
their repository paths, so those links are checked by ``mkdocs build --strict`` like any other."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
EXTRA = ("bench/README.md", "bench/results", "temporal-dev/README.md")


def on_startup(command: str, dirty: bool) -> None:
    """Put this interpreter's scripts folder first on PATH: mkdocs-typer2 runs the ``typer``
    command, which lives beside ``mkdocs`` in the venv, so ``.venv/bin/mkdocs build`` works
    without an activated venv (issue 37 item 5)."""
    scripts = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if scripts not in path.split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([scripts, path]) if path else scripts


def on_files(files: Files, config: Any) -> Files:
    for entry in EXTRA:
        path = ROOT / entry
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in found:
            files.append(
                File(
                    file.relative_to(ROOT).as_posix(),
                    src_dir=str(ROOT),
                    dest_dir=config["site_dir"],
                    use_directory_urls=config["use_directory_urls"],
                )
            )
    return files


AUTOREF = re.compile(r"<autoref (?P<attrs>[^>]*)>(?P<title>[^<]*)</autoref>")


ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):<code>~?\.?(?P<name>[^<]*)</code>")
"""A Sphinx role left in a docstring, as mkdocstrings renders it (``:class:<code>~.x.Y</code>``)."""

EXTRA_H1 = re.compile(r'<h1 id="(?!cli")[^"]*">.*?</h1>\n?', re.S)
"""A second top heading on the CLI page: mkdocs-typer2's ``# tnx`` under the page's ``## tnx``."""


USAGE = re.compile(r"<p><code>console\n(?P<body>.*?)</code></p>", re.S)
"""A usage block of mkdocs-typer2 (a ``console`` fence it emits where no fence is parsed):
it rendered as inline code starting with the word ``console``."""

HEADING = re.compile(r'<h[23] id="(?P<id>[^"]*)"[^>]*>(?P<title>.*?)<a class="headerlink"', re.S)
"""A section heading of the CLI page, with its anchor and its title."""


def usage_block(match: re.Match[str]) -> str:
    """A usage line as the block of shell it is."""
    return f'<pre><code class="language-console">{match.group("body")}</code></pre>'


def toc_ids(items: Any) -> set[str]:
    """Every anchor of a table of contents (any depth)."""
    found: set[str] = set()
    for item in items:
        found.add(item.id)
        found |= toc_ids(item.children)
    return found


def add_generated_toc(html: str, page: Any) -> None:
    """List the generated commands' headings (``tnx ls``, ``tnx answer``, ...) in the
    page's table of contents, each under the page's own heading it follows: mkdocs-typer2
    writes them after the table of contents was built, so it listed only ``tnx``."""
    from mkdocs.structure.toc import AnchorLink

    if page.toc is None or not page.toc.items:
        return
    known = toc_ids(page.toc.items)
    top = page.toc.items[0]
    parent = None
    for match in HEADING.finditer(html):
        anchor = match.group("id")
        own = next((item for item in top.children if item.id == anchor), None)
        if own is not None:
            parent = own
            continue
        if anchor in known or parent is None:
            continue
        title = re.sub(r"<[^>]+>", "", match.group("title")).strip()
        parent.children.append(AnchorLink(title, anchor, parent.level + 1))
        known.add(anchor)


def role_text(match: re.Match[str]) -> str:
    """``:class:`~.a.B``` shows ``B``; ``:mod:`a.b``` shows ``a.b``; as code, no role."""
    name = match.group("name")
    raw = match.group(0)
    short = name.rsplit(".", 1)[-1] if ":<code>~" in raw else name
    return f"<code>{short}</code>"


def drop_toc(items: Any, anchor: str) -> None:
    """Remove the table-of-contents entry with ``anchor`` (any depth)."""
    for item in list(items):
        if item.id == anchor:
            items.remove(item)
        else:
            drop_toc(item.children, anchor)


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    """Every page: Sphinx roles in docstrings (``:class:`X```) render as code, not raw markup.
    The CLI reference: the generated second ``tnx`` heading is dropped, and typer's usage
    lines (``tnx ls [OPTIONS] [ID]``) read as markdown reference links to mkdocs-autorefs are
    put back as the text they are."""
    html = ROLE.sub(role_text, html)
    if page.file.src_uri != "reference/cli.md":
        return html
    for match in EXTRA_H1.finditer(html):
        anchor = re.search(r'id="([^"]*)"', match.group(0))
        if anchor and page.toc is not None:
            drop_toc(page.toc.items, anchor.group(1))
    html = EXTRA_H1.sub("", html)
    html = USAGE.sub(usage_block, html)
    add_generated_toc(html, page)

    def text(match: re.Match[str]) -> str:
        identifier = re.search(r'identifier="([^"]*)"', match.group("attrs"))
        ref = identifier.group(1) if identifier else ""
        return f"[{match.group('title')}] [{ref}]"

    return AUTOREF.sub(text, html)
