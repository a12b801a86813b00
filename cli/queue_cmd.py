"""The approval queue from the shell: ``tnx pending`` lists what waits, ``tnx answer`` answers
it. Both work with no worker running (README "Operator's path"): ``pending`` then lists the
queue from visibility (each Request's id, kind, prompt and waiting time are search
attributes), ``answer`` reads the Request id from the handle's search attributes (or takes
``--request``) and sends the ``answer`` signal, which runs when a worker polls. Registered as
host verbs by :mod:`~toolnexus_temporal.cli.app`. This module holds their options (light:
``tnx --help`` imports it); what they do is in :mod:`~toolnexus_temporal.cli.queue`.
"""

from __future__ import annotations

from typing import Annotated, Final
from urllib.parse import quote

import typer

from toolnexus_temporal.cli.hostcmd import IdArg
from toolnexus_temporal.cli.options import Options

DEFAULT_UI: Final = "http://127.0.0.1:8233"
"""The dev server's web UI when no other is known (``--ui-url``, ``TNX_UI_URL``, or the
server ``tnx server start`` runs in this directory)."""


def approval_queue_url(ui: str, namespace: str, scope: str | None) -> str:
    """The web UI's workflow list filtered to the approval queue (the UI takes the query in
    its URL): ``{ui}/namespaces/{namespace}/workflows?query=...``."""
    from toolnexus_temporal.client.roots import approval_queue_query

    query = quote(approval_queue_query(scope), safe="")
    return f"{ui.rstrip('/')}/namespaces/{quote(namespace, safe='')}/workflows?query={query}"


def pending_command(
    opts: Options,
    ui: Annotated[
        bool,
        typer.Option(
            "--ui",
            help="Print the web UI link of the approval queue (no server call) and exit.",
        ),
    ] = False,
    ui_url: Annotated[
        str | None,
        typer.Option(
            "--ui-url",
            envvar="TNX_UI_URL",
            help="The web UI's base URL for --ui (default: the server tnx server start runs "
            "in this directory, else http://127.0.0.1:8233).",
        ),
    ] = None,
) -> None:
    """The approval queue: every suspended agent with its pending request (found through the
    approval queue's visibility query; the web UI's search box takes the same query). Works
    with no worker running: then from the search attributes alone, with a hint. --ui prints
    the web UI link of the same list."""
    from toolnexus_temporal.cli import queue

    queue.pending(opts, ui, ui_url)


def answer_command(
    opts: Options,
    handle_id: IdArg,
    approve: Annotated[bool, typer.Option("--approve", help="Answer ok.")] = False,
    decline: Annotated[
        bool, typer.Option("--decline", "--reject", help="Answer not ok (declined).")
    ] = False,
    data: Annotated[
        str | None, typer.Option("--data", help="JSON object for the tool, e.g. '{\"otp\": 1}'")
    ] = None,
    edit: Annotated[
        str | None,
        typer.Option(
            "--edit",
            metavar="JSON",
            help="Approve with these arguments instead of the model's (a JSON object that "
            "replaces them whole, checked against the tool's schema; implies --approve).",
        ),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option(
            "--message",
            metavar="TEXT",
            help="Words for the model: with --decline/--reject they are the tool's result, "
            "with --approve/--edit a note before it.",
        ),
    ] = None,
    request: Annotated[
        str | None,
        typer.Option(
            "--request",
            metavar="REQUEST",
            help="The Request id (default: the agent's pending Request, read from it, or from "
            "its search attributes when no worker runs).",
        ),
    ] = None,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            metavar="WHO",
            help="Who answers, as recorded in the audit and checked against the agent's "
            "approvers (default: user@host; stated, not verified by the server).",
        ),
    ] = None,
) -> None:
    """Answer the pending request of ID (or of the deepest agent below it waiting on the same
    request); the parked turn continues where it stopped. --edit approves with other
    arguments (a bad edit is refused, the request stays pending); --message gives the model
    the reviewer's words. With no worker running, the
    Request id comes from ID's search attributes (or --request): the answer is sent as a
    signal and runs when a worker polls. ID may be a Request id as tnx prints it
    (root/ops.1#2): that Request of its agent is answered."""
    from toolnexus_temporal.cli import queue

    queue.answer(opts, handle_id, queue.Verdict(approve, decline, data, edit, message), request, by)


def audit_command(
    opts: Options,
    handle_id: IdArg,
    subtree: Annotated[
        bool, typer.Option("--subtree", help="The handle's whole subtree, not only its own.")
    ] = False,
) -> None:
    """Every answered request of ID (of its subtree with --subtree): when, who (the identity
    Temporal recorded on the signal or update, the server's principal where it stamps one,
    the stated --by), through which path (signal, update, interpreter, expiry, escalation),
    the decision and its data; across every run, after close too."""
    from toolnexus_temporal.cli import queue

    queue.audit(opts, handle_id, subtree)
