"""The documentation's examples run, and the site builds (issue 22 item 4).

The convention (docs/contributing.md, "Examples in the docs"): an example that runs lives as a
file under ``docs/examples/`` and a page shows it with a pymdownx.snippets include
(``--8<-- "approval.py"``); this module runs every such file against the test session's dev
server: each ``.py`` as a script in a subprocess (``TEMPORAL_ADDRESS`` points at the server),
each ``.sh`` with ``bash -eu`` while an in-process worker serves the agents of
``docs/examples/agents.py``. Any other ``bash``/``python`` block in a page is not run and says
so in its title (``title="Not run: ..."``). Examples close the agents they start: after each
one, nothing of its runtime but the root still runs.
"""

from __future__ import annotations

import asyncio
import html
import importlib.util
import itertools
import os
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from tests.helpers import communicate
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentRuntime
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.worker import create_worker

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
BIN = Path(sys.executable).parent

PYTHON_EXAMPLES = {
    # file: (the last line it prints, the scope its runtime uses)
    "approval.py": ("billing is deployed", "my-app"),
    "verbs.py": ("closed", "verbs"),
    "cluster_config.py": ("connected to namespace default", None),
    "workspace.py": ("notes.txt says draft", "ws-app"),
}
SHELL_EXAMPLES = ("shell_verbs.sh", "shell_approval.sh", "shell_temporal.sh")
SUPPORT = {"agents.py"}
"""Files under docs/examples/ that are not examples themselves (the shell examples' registry)."""

RUN_LANGS = {"bash", "sh", "shell", "console", "python", "py", "pycon"}
FENCE = re.compile(r"^(\s*)```(\w+)?(.*)$")
INCLUDE = re.compile(r'--8<--\s+"([^"]+)"')

SETUP_COMMANDS = [
    "python3 -m venv .venv && . .venv/bin/activate && pip install -q -e . && tnx demo",
    "bash scripts/test.sh",
    '.venv/bin/python -m pytest -m "not stress" -n 2',
]
"""The README's shell blocks, exactly: the set-up commands (CI runs the second itself)."""


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md"))


def fenced_blocks(source: str) -> list[tuple[str, str, str]]:
    """Every fenced block of a markdown text: (language, the fence's attributes, body)."""
    blocks: list[tuple[str, str, str]] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, lang, attrs = match.group(1), match.group(2) or "", match.group(3)
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :])
            i += 1
        blocks.append((lang, attrs, "\n".join(body)))
        i += 1
    return blocks


# ---------------------------------------------------------------- the convention, no server


def test_every_code_block_is_run_or_says_it_is_not() -> None:
    """A bash/python block either includes a file of docs/examples/ or is titled "Not run"."""
    offenders: list[str] = []
    for page in pages():
        for lang, attrs, body in fenced_blocks(page.read_text()):
            if lang not in RUN_LANGS:
                continue
            included = INCLUDE.findall(body)
            if included:
                assert body.strip() == f'--8<-- "{included[0]}"', (page, body)
                continue
            if 'title="Not run' not in attrs:
                offenders.append(f"{page.relative_to(ROOT)}: ```{lang}{attrs}\n{body[:120]}")
    assert not offenders, "\n\n".join(offenders)


def test_every_example_is_shown_and_run() -> None:
    included = {
        name
        for page in pages()
        for _, _, body in fenced_blocks(page.read_text())
        for name in INCLUDE.findall(body)
    }
    files = {p.name for p in EXAMPLES.iterdir() if p.suffix in (".py", ".sh")}
    run = set(PYTHON_EXAMPLES) | set(SHELL_EXAMPLES)
    assert files == run | SUPPORT, files ^ (run | SUPPORT)
    assert included == files, files ^ included


def test_readme_shows_the_approval_example_and_the_set_up_commands() -> None:
    """The README cannot include files: its Python example is docs/examples/approval.py as
    is (run below), and its shell blocks are the set-up commands."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    blocks = fenced_blocks(readme)
    python = [body for lang, _, body in blocks if lang == "python"]
    assert python == [(EXAMPLES / "approval.py").read_text().rstrip("\n")]
    shell = [body.strip() for lang, _, body in blocks if lang in ("bash", "sh")]
    assert shell == SETUP_COMMANDS


def test_readme_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links to the docs pages"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, missing


# ---------------------------------------------------------------- running the examples


def _clean_env(address: str) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TEMPORAL_", "TNX_", "OPENAI_")) and k != "PYTHONPATH"
    }
    return {
        **base,
        "TEMPORAL_ADDRESS": address,
        "PATH": f"{BIN}{os.pathsep}{base.get('PATH', '')}",
        "COLUMNS": "100",
    }


async def _running(client: Client, scope: str | None) -> list[str]:
    """Agents of the scope that still run and are not closed. (A closed agent's workflow
    completes at its next workflow task, which a worker that stops right after the close,
    as an example's in-process worker does, leaves for the next worker to poll.)"""
    query = 'WorkflowType="AgentWorkflow" AND ExecutionStatus="Running" AND AgentState!="closed"'
    ids = [wf.id async for wf in client.list_workflows(query)]
    if scope is None:
        return sorted(i for i in ids if i == "root" or i.startswith("root/"))
    return sorted(i for i in ids if i.startswith(f"{scope}/"))


async def _only_roots_run(client: Client, scope: str | None) -> None:
    """What an example started is closed: only its runtime's root is still open (visibility
    lags a moment behind a close)."""
    root = "root" if scope is None else f"{scope}/root"
    running: list[str] = []
    for _ in range(50):
        running = await _running(client, scope)
        if running == [root]:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"left running: {running}")


@pytest.mark.parametrize("name", sorted(PYTHON_EXAMPLES))
async def test_python_example_runs(env: WorkflowEnvironment, tmp_path: Path, name: str) -> None:
    expected, scope = PYTHON_EXAMPLES[name]
    address = env.client.service_client.config.target_host
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / name),
        cwd=tmp_path,  # the worker's default store (.tnx/) lands here
        env={**_clean_env(address), "PYTHONFAULTHANDLER": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await communicate(proc, 120)
    lines = out.decode().strip().splitlines()
    assert lines and lines[-1] == expected, (out.decode(), err.decode()[-3000:])
    assert proc.returncode == 0 or _aborted_at_exit(proc.returncode, err.decode()), err.decode()
    if scope is not None:
        await _only_roots_run(env.client, scope)


def _aborted_at_exit(code: int | None, err: str) -> bool:
    """The SDK's known abort while the interpreter finalizes, after the script's work is done
    (temporalio/sdk-python#300, open: the client's Rust threads outlive the interpreter;
    seen here once in about a dozen runs). Accepted only with the whole output printed."""
    return code == -6 and "PyGILState_Release" in err and "runtime state: finalizing" in err


def _load_agents() -> Any:
    spec = importlib.util.spec_from_file_location("docs_example_agents", EXAMPLES / "agents.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reply(request: dict[str, Any]) -> dict[str, Any]:
    """The scripted model of the shell examples: an agent with the ``deploy`` tool calls it
    once per turn, then says what it did; any other agent answers ``ok``."""
    messages = request.get("messages", [])
    tools = {t["function"]["name"] for t in request.get("tools", [])}
    if messages and messages[-1].get("role") == "tool":
        return text(f"done: {messages[-1].get('content')}")
    if "deploy" in tools:
        return tool_calls(("deploy", {"service": "billing"}))
    return text("ok")


async def test_shell_examples_run(env: WorkflowEnvironment, tmp_path: Path) -> None:
    """The shell examples as a user runs them: ``tnx`` and ``temporal`` on PATH, the address
    in ``TEMPORAL_ADDRESS``, no scope, the default task queue ``tnx``, and a worker serving
    ``agents:REGISTRY``; each script runs under ``bash -eu`` (a failed command fails it)."""
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    registry = _load_agents().REGISTRY
    llm = ScriptedLLM({"scripted": [_reply]}, repeat_last=True)
    store_path = tmp_path / "conversations.sqlite"
    async with (
        create_worker(
            env.client,
            registry=registry,
            llm=LlmConfig(base_url="http://scripted.invalid/v1", model="scripted"),
            task_queue="tnx",
            store=SqliteConversationStore(store_path),
            transport=llm.transport(),
        ) as worker,
        worker,
    ):
        await AgentRuntime(env.client).start()
        environ = {**_clean_env(env.client.service_client.config.target_host)}
        environ["TNX_STORE"] = str(store_path)
        for name in SHELL_EXAMPLES:
            proc = await asyncio.create_subprocess_exec(
                "bash",
                "-eu",
                str(EXAMPLES / name),
                cwd=tmp_path,
                env=environ,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(), 240)
            report = f"{name}\nstdout:\n{out.decode()}\nstderr:\n{err.decode()}"
            assert proc.returncode == 0, report
            assert "Traceback" not in err.decode(), report
        await _only_roots_run(env.client, None)


# ---------------------------------------------------------------- the site

HEADING_TAG = re.compile(
    r"<h(?P<level>[1-6])(?P<attrs>\s[^>]*)?>(?P<inner>.*?)</h(?P=level)>", re.S
)


def heading_problems(page: str) -> list[str]:
    """What is wrong with the outline of a built page (a new user's walk of the Python API
    page): a hand-written heading (no ``doc-heading`` class, so not an object of mkdocstrings)
    with no text before the next heading; an object heading right after a hand-written heading
    at the same or a higher level (the table of contents then nests it wrongly); a table of
    contents entry with no heading on the page (the ``show_root_toc_entry`` of a hidden module
    heading: the module listed twice, as the hand-written section and as itself)."""
    article = page[page.index("<article") : page.index("</article>")]
    found = [
        (
            int(m.group("level")),
            "doc-heading" in (m.group("attrs") or ""),
            " ".join(html.unescape(re.sub(r"<[^>]+>", "", m.group("inner"))).split()).strip("¶ "),
            m.start(),
            m.end(),
        )
        for m in HEADING_TAG.finditer(article)
    ]
    problems: list[str] = []
    for (level, obj, title, _, end), (level2, obj2, title2, start, _) in itertools.pairwise(found):
        if obj:
            continue
        if not re.sub(r"<[^>]+>", "", article[end:start]).strip():
            problems.append(f"h{level} {title!r}: no text before h{level2} {title2!r}")
        if obj2 and level2 <= level:
            problems.append(f"h{level} {title!r}: the object heading h{level2} {title2!r} next")
    ids = set(re.findall(r'<h[1-6][^>]*\sid="([^"]*)"', article))
    toc = page[page.index("md-nav--secondary") : page.index('class="md-content"')]
    problems += [
        f"contents entry #{anchor}: no heading on the page"
        for anchor in dict.fromkeys(re.findall(r'href="#([^"]*)"', toc))
        if anchor not in ids
    ]
    return problems


def test_site_builds_strict(tmp_path: Path) -> None:
    """``.venv/bin/mkdocs build --strict`` as the README words it, with the venv NOT on PATH
    (scripts/test.sh runs it too): a broken link, a missing page or a docstring mkdocstrings
    cannot read fails it. The pages render cleanly: no raw Sphinx role (``:class:``), one
    ``tnx`` heading on the CLI page, its usage lines blocks and every command in its table of
    contents, the client's verb table a table (issue 37 item 5)."""
    mkdocs = BIN / "mkdocs"
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed (the `docs` extra)")
    site = tmp_path / "site"
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != BIN
    )
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**env, "PATH": path or "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=timedelta(minutes=5).total_seconds(),
    )
    assert done.returncode == 0, done.stderr[-5000:]
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "replay-check" in cli and "tnx-worker" in cli and "--registry" in cli
    worker = cli[cli.rindex('id="tnx-worker"') :]  # its own section, not empty (walk 6)
    assert "--task-queue" in worker and "--metrics-port" in worker, worker[:2000]
    assert len(re.findall(r"<h1[ >]", cli)) == 1, re.findall(r"<h1[^>]*>.{0,40}", cli)
    # usage lines are blocks, not inline code starting with "console"; the page's table of
    # contents lists every command (the walk of issue 37 found only `tnx` there)
    assert "<p><code>console" not in cli and 'class="language-console"' in cli
    toc = cli[cli.index("md-nav--secondary") :]
    assert 'href="#tnx-ls"' in toc and 'href="#tnx-answer"' in toc, toc[:2000]
    api = (site / "reference" / "python" / "index.html").read_text()
    assert "AgentRuntime" in api and "create_worker" in api and "define_tool" in api
    # no "__all__ module-attribute" heading (nor its table-of-contents link): a `members: true`
    # option on a module's `:::` block selects every member without the `filters`, so the
    # modules' `__all__` lists were rendered as attributes
    all_headings = re.findall(r"<h[1-6][ >](?:(?!</h[1-6]>).)*?__all__", api, flags=re.S)
    assert not all_headings, all_headings[:2]
    assert not re.findall(r'href="#[^"]*__all__"', api), "an __all__ entry in the page's contents"
    assert "::</p>" not in api, "a reST literal-block marker (::) shown as text (walk 7)"
    for page in site.rglob("*.html"):
        if page.relative_to(site).parts[0] == "bench":
            continue  # records (a new user's transcript quotes the markup it looked for)
        raw = re.findall(r":(?:mod|class|func|meth|attr|data|exc|obj):[<`]", page.read_text())
        assert not raw, f"{page.relative_to(site)}: raw role markup {raw[:3]}"
    assert "<td>run_turn</td>" in api, "the client's verb table is not rendered as a table"
    # each module's heading once (the page's own; walk 5 saw mkdocstrings' second one), and
    # no code span left raw (``x`` split over a line break in a docstring's section)
    for module in ("client", "activities", "worker"):
        heading = rf'<h2 id="toolnexus_temporal[.]?{module}"'
        assert len(re.findall(heading, api)) == 1, re.findall(rf"<h\d id=\"[^\"]*{module}\"", api)
    text = re.sub(r"<pre.*?</pre>", "", api, flags=re.S)
    assert "``" not in re.sub(r"<[^>]+>", "", text), "raw double-backtick markup in the API page"
    # the outline reads as the table of contents shows it: no empty hand-written section, no
    # object heading at or above the section it follows, no module listed twice
    problems = heading_problems(api)
    assert not problems, "\n".join(problems)


def test_the_readme_leaves_tnx_and_temporal_on_path() -> None:
    """The README's first command activates the venv in the user's shell, so the lines the demo
    and the docs print (``tnx inspect ...``, ``temporal workflow describe ...``) run as printed
    (issue 37 item 3: with ``.venv/bin/tnx demo`` they said ``command not found``)."""
    assert ". .venv/bin/activate && pip install" in SETUP_COMMANDS[0]
    activate = BIN / "activate"
    if not activate.exists():
        pytest.skip("not running from a venv")
    bare = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != BIN
    )
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    done = subprocess.run(
        ["bash", "-c", f". {activate} && command -v tnx && command -v temporal && tnx --version"],
        env={**env, "PATH": bare or "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    tnx, temporal = done.stdout.splitlines()[:2]
    assert Path(tnx).parent == BIN and Path(temporal).parent == BIN, done.stdout
