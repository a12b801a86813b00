"""mkdocs hook: the repository files the pages link to but that live outside ``docs/``
(the benchmark suite's README and results, the compose stack's README) join the site under
their repository paths, so those links are checked by ``mkdocs build --strict`` like any other."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
EXTRA = ("bench/README.md", "bench/results", "temporal-dev/README.md")


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


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    """The CLI reference: typer's usage lines (``tnx ls [OPTIONS] [ID]``) read as markdown
    reference links to mkdocs-autorefs; put them back as the text they are."""
    if page.file.src_uri != "reference/cli.md":
        return html

    def text(match: re.Match[str]) -> str:
        identifier = re.search(r'identifier="([^"]*)"', match.group("attrs"))
        ref = identifier.group(1) if identifier else ""
        return f"[{match.group('title')}] [{ref}]"

    return AUTOREF.sub(text, html)
