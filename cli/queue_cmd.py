"""The approval queue from the shell: ``tnx pending`` lists what waits, ``tnx answer`` answers
it. Both work with no worker running (README "Operator's path"): ``pending`` then lists the
suspended ids from visibility, ``answer --request`` sends the ``answer`` signal, which runs
when a worker polls. Registered as host verbs by :mod:`~toolnexus_temporal.cli.app`.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from toolnexus_temporal.cli import args, ops, render
from toolnexus_temporal.cli.hostcmd import IdArg, emit, err_console, fail_line, out
from toolnexus_temporal.cli.ops import Options
from toolnexus_temporal.cli.workercheck import signal_answer, worker_read
from toolnexus_temporal.client.errors import NoWorkerError
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.contract.messages import AnswerResult
from toolnexus_temporal.workflows.contract.models import Answer


def pending_command(opts: Options) -> None:
    """The approval queue: every suspended agent with its pending request (found through the
    AgentState search attribute; the web UI's search box takes the same query). Works with no
    worker running: then only the ids (visibility), with a hint."""

    async def verb(rt: AgentRuntime) -> tuple[list[Handle], list[str], NoWorkerError | None]:
        found = await worker_read(rt, rt.pending)
        if isinstance(found, NoWorkerError):
            return [], await rt.suspended_ids(), found
        return found, [], None

    handles, bare_ids, missing = ops.run(opts, verb, worker="optional")
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
            + [{"id": hid, "request": None, "since_ms": None} for hid in bare_ids]
        )
        return
    if missing is not None:
        out.print(render.bare_pending_table(bare_ids) if bare_ids else "no suspended agents")
        err_console.print(
            "[yellow]note[/yellow]: "
            + escape(ops.no_worker_note(missing, opts))
            + "; the requests' details need one (answer without one: tnx answer ID "
            "--request REQUEST --approve)",
            style="dim",
        )
        return
    if not handles:
        out.print("no suspended agents", soft_wrap=True)
        return
    out.print(render.pending_table(handles))
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
            help="The Request id (default: read from the agent, which needs a worker).",
        ),
    ] = None,
) -> None:
    """Answer the pending request of ID (or of the deepest agent below it waiting on the same
    request); the parked turn continues where it stopped. With no worker running, give
    --request: the answer is sent as a signal and runs when a worker polls."""
    if approve == decline:
        raise fail_line("give exactly one of --approve or --decline", ops.EXIT_ENV)
    payload = args.parse_json_object(data, "--data")
    target = args.ref(opts, handle_id)

    def answer_to(request_id: str) -> Answer:
        return Answer(
            id=request_id, ok=approve, data=payload, reason=None if approve else "declined"
        )

    async def deliver(rt: AgentRuntime) -> AnswerResult | NoWorkerError:
        h = await worker_read(rt, lambda: rt.inspect(target))
        if isinstance(h, NoWorkerError):
            if request is None:
                raise ops.CliError(
                    f"{ops.no_worker_note(h, opts)}; the pending request's id needs one "
                    "to be read: pass --request REQUEST to answer without a worker",
                    ops.EXIT_ENV,
                )
            await signal_answer(rt, target, answer_to(request))
            return h
        if h.pending_req is None:
            raise ops.CliError(f"{h.id} has no pending request (state {h.state})")
        return await rt.answer(target, answer_to(request or h.pending_req.id))

    result = ops.run(opts, deliver, worker="optional")
    verdict = "approved" if approve else "declined"
    if isinstance(result, NoWorkerError):
        if opts.json:
            emit({"ok": True, "delivered": "signal", "answered": None, "request": request})
        else:
            out.print(
                f"answer {escape(request or '?')} ({verdict}) delivered to {escape(target)} as a "
                f"signal: it runs when a worker polls task queue {escape(result.task_queue)} "
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
