"""The approval queue from the shell: ``tnx pending`` lists what waits, ``tnx answer`` answers
it. Both work with no worker running (README "Operator's path"): ``pending`` then lists the
queue from visibility (each Request's id, kind, prompt and waiting time are search
attributes), ``answer`` reads the Request id from the handle's search attributes (or takes
``--request``) and sends the ``answer`` signal, which runs when a worker polls. Registered as
host verbs by :mod:`~toolnexus_temporal.cli.app`.
"""

from __future__ import annotations

import json
from typing import Annotated, Final
from urllib.parse import quote

import typer
from rich.markup import escape

from toolnexus_temporal.cli import args, ops, render
from toolnexus_temporal.cli.devserver import local_ui_url
from toolnexus_temporal.cli.hostcmd import (
    IdArg,
    emit,
    err_console,
    fail_line,
    list_width,
    out,
    show,
)
from toolnexus_temporal.cli.ops import Options
from toolnexus_temporal.cli.workercheck import signal_answer, worker_read
from toolnexus_temporal.client.audit import AuditRecord
from toolnexus_temporal.client.cluster import default_answerer
from toolnexus_temporal.client.errors import NoWorkerError
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.roots import QueueRow, approval_queue_query
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.contract.messages import AnswerResult
from toolnexus_temporal.workflows.contract.models import Answer

DEFAULT_UI: Final = "http://127.0.0.1:8233"
"""The dev server's web UI when no other is known (``--ui-url``, ``TNX_UI_URL``, or the
server ``tnx server start`` runs in this directory)."""


def approval_queue_url(ui: str, namespace: str, scope: str | None) -> str:
    """The web UI's workflow list filtered to the approval queue (the UI takes the query in
    its URL): ``{ui}/namespaces/{namespace}/workflows?query=...``."""
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
    if ui:
        base = ui_url or local_ui_url() or DEFAULT_UI
        out.print(approval_queue_url(base, opts.namespace, opts.scope), soft_wrap=True)
        err_console.print(
            "columns to add in the UI (Configure Columns; kept by the browser): "
            "AgentRequestKind, AgentRequestPrompt, AgentWaitingSince, AgentRequestId",
            style="dim",
        )
        return

    async def verb(rt: AgentRuntime) -> tuple[list[Handle], list[QueueRow], NoWorkerError | None]:
        found = await worker_read(rt, rt.pending)
        if isinstance(found, NoWorkerError):
            return [], await rt.queue(), found
        return found, [], None

    handles, rows, missing = ops.run(opts, verb, worker="optional")
    if opts.json:
        emit(
            [
                {
                    "id": h.id,
                    "request": args.dump(h.pending_req) if h.pending_req else None,
                    "since_ms": h.pending_since_ms,
                }
                for h in handles
            ]
            + [
                {
                    "id": row.id,
                    "request": (
                        {"id": row.request_id, "kind": row.kind, "prompt": row.prompt}
                        if row.request_id
                        else None
                    ),
                    "since_ms": (
                        int(row.waiting_since.timestamp() * 1000) if row.waiting_since else None
                    ),
                    "source": "visibility",
                }
                for row in rows
            ]
        )
        return
    if missing is not None:
        if rows:
            show(render.queue_table(rows, width=list_width()))
        else:
            out.print("no suspended agents")
        err_console.print(
            "[yellow]note[/yellow]: "
            + escape(ops.no_worker_note(missing, opts))
            + "; read from visibility (the full prompt and the turn continue when one runs; "
            "an answer is kept until then: tnx answer ID --approve)",
            style="dim",
        )
        return
    if not handles:
        out.print("no suspended agents", soft_wrap=True)
        return
    show(render.pending_table(handles, width=list_width()))
    out.print(
        "answer with: tnx answer ID --approve | --decline [--data JSON]   "
        '(web UI / temporal CLI: signal \'answer\' with {"id": REQUEST, "ok": true})',
        soft_wrap=True,
        style="dim",
    )


def answer_command(
    opts: Options,
    handle_id: IdArg,
    approve: Annotated[bool, typer.Option("--approve", help="Answer ok.")] = False,
    decline: Annotated[bool, typer.Option("--decline", help="Answer not ok (declined).")] = False,
    data: Annotated[
        str | None, typer.Option("--data", help="JSON object for the tool, e.g. '{\"otp\": 1}'")
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
    request); the parked turn continues where it stopped. With no worker running, the
    Request id comes from ID's search attributes (or --request): the answer is sent as a
    signal and runs when a worker polls."""
    if approve == decline:
        raise fail_line("give exactly one of --approve or --decline", ops.EXIT_ENV)
    payload = args.parse_json_object(data, "--data")
    target = args.ref(opts, handle_id)
    who = by if by is not None else default_answerer()
    if not who.strip() or len(who) > 200:
        raise fail_line("--by must be 1 to 200 characters", ops.EXIT_ENV)

    def answer_to(request_id: str) -> Answer:
        return Answer(
            id=request_id,
            ok=approve,
            data=payload,
            reason=None if approve else "declined",
            by=who,
        )

    async def deliver(rt: AgentRuntime) -> AnswerResult | tuple[NoWorkerError, str]:
        h = await worker_read(rt, lambda: rt.inspect(target))
        if isinstance(h, NoWorkerError):
            request_id = request
            if request_id is None:
                row = await rt.queue_row(target)
                if row is None or row.request_id is None:
                    raise ops.CliError(
                        f"{target} has no pending request in its search attributes "
                        f"(not suspended); {ops.no_worker_note(h, opts)}",
                        ops.EXIT_ENV,
                    )
                request_id = row.request_id
            await signal_answer(rt, target, answer_to(request_id))
            return h, request_id
        if request is not None:  # the workflow says why it is refused (expired, answered...)
            return await rt.answer(target, answer_to(request))
        if h.pending_req is None:
            raise ops.CliError(f"{h.id} has no pending request (state {h.state})")
        return await rt.answer(target, answer_to(h.pending_req.id))

    result = ops.run(opts, deliver, worker="optional")
    verdict = "approved" if approve else "declined"
    if isinstance(result, tuple):
        missing, request_id = result
        if opts.json:
            emit({"ok": True, "delivered": "signal", "answered": None, "request": request_id})
        else:
            out.print(
                f"answer {escape(request_id)} ({verdict}) delivered to {escape(target)} as a "
                f"signal: it runs when a worker polls task queue {escape(missing.task_queue)} "
                "(none does now)",
                soft_wrap=True,
            )
        return
    if opts.json:
        emit(args.dump(result))
    else:
        out.print(
            f"answered → delivered to {escape(result.answered or '?')} ({verdict})",
            soft_wrap=True,
        )


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
    target = args.ref(opts, handle_id)

    async def read(rt: AgentRuntime) -> list[AuditRecord]:
        return await rt.audit(target, subtree=subtree)

    records = ops.run(opts, read)
    if opts.json:
        emit(args.dump(records))
        return
    if not records:
        out.print(f"{escape(target)}: no answered requests", soft_wrap=True)
        return
    for r in records:
        verdict = "ok" if r.ok else (r.reason or "declined")
        who = r.principal or r.identity or "-"
        checked = "verified" if r.verified else "unverified"
        out.print(
            f"{escape(r.answered_at or '?')}  {escape(r.request_id)}  {verdict}  via {r.path}"
            f"  by {escape(r.by or '-')} ({checked}; identity {escape(who)})"
            + (f"  escalated to {escape(r.escalated_to)}" if r.escalated_to else "")
            + (f"  data {escape(json.dumps(r.data, sort_keys=True))}" if r.data else ""),
            soft_wrap=True,
        )
