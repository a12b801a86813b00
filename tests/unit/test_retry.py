"""Which failed RPCs the host library rides out, falls back from, or raises (issue 12 items
12 and 15), and the view rule the polling ``wait`` uses; no server."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.client import retry
from toolnexus_temporal.client.errors import WorkflowTaskFailingError
from toolnexus_temporal.client.fallback import settled
from toolnexus_temporal.client.retry import (
    is_connection_error,
    is_update_limit,
    riding_busy_queries,
    riding_outage,
)
from toolnexus_temporal.client.rpc import rpc_error
from toolnexus_temporal.workflows.contract.models import HandleView, Request, TaskResult

IN_FLIGHT = (
    "limit on number of concurrent in-flight updates has been reached (10)",
    RPCStatusCode.RESOURCE_EXHAUSTED,
)
TOTAL = (
    "The limit on the total number of distinct updates in this workflow has been reached "
    "(2000). Make sure any duplicate updates share an Update ID",
    RPCStatusCode.FAILED_PRECONDITION,
)


def err(message: str, status: RPCStatusCode) -> RPCError:
    return RPCError(message, status, b"")


def test_update_limits_are_recognised_by_their_text() -> None:
    assert is_update_limit(err(*IN_FLIGHT)) and is_update_limit(err(*TOTAL))
    assert not is_update_limit(
        err("namespace rate limit exceeded", RPCStatusCode.RESOURCE_EXHAUSTED)
    )
    assert not is_connection_error(err(*IN_FLIGHT)) and not is_connection_error(err(*TOTAL))


def test_a_failing_workflow_task_is_a_typed_error_never_the_raw_rpc_error() -> None:
    """What the server answers an update or a query while a worker fails the workflow's
    tasks (issue 23 item 4: ``wake`` raised it raw)."""
    update = err(
        "Unable to perform workflow execution update due to Workflow Task in failed state.",
        RPCStatusCode.FAILED_PRECONDITION,
    )
    query = err(
        "Unable to query workflow due to Workflow Task in failed state.",
        RPCStatusCode.FAILED_PRECONDITION,
    )
    for refused in (update, query):
        assert retry.is_failing_workflow_task(refused)
        assert not is_connection_error(refused)
        typed = rpc_error("root/a.1", refused)
        assert isinstance(typed, WorkflowTaskFailingError)
        assert typed.handle_id == "root/a.1" and "fails this agent's workflow tasks" in str(typed)
    assert not retry.is_failing_workflow_task(err(*TOTAL))


def test_connection_failures_are_told_from_refusals() -> None:
    assert is_connection_error(err("tcp connect error", RPCStatusCode.UNAVAILABLE))
    assert is_connection_error(err("transport error", RPCStatusCode.UNKNOWN))
    # a query of 20 hosts on one connection got this in CI, and the wait raised it
    assert is_connection_error(err("h2 protocol error: http2 error", RPCStatusCode.UNKNOWN))
    assert not is_connection_error(err("workflow update was aborted", RPCStatusCode.UNAVAILABLE))
    assert not is_connection_error(err("workflow not found", RPCStatusCode.NOT_FOUND))


async def test_riding_outage_retries_only_connection_failures(monkeypatch) -> None:
    calls: list[int] = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 4:
            raise err("tcp connect error", RPCStatusCode.UNAVAILABLE)
        return "answer"

    assert await riding_outage(flaky) == "answer" and len(calls) == 4

    async def refused() -> str:
        raise err("workflow not found", RPCStatusCode.NOT_FOUND)

    with pytest.raises(RPCError):
        await riding_outage(refused)

    monkeypatch.setattr(retry, "OUTAGE_RETRY_S", 0.2)
    calls.clear()

    async def down() -> str:
        calls.append(1)
        raise err("tcp connect error", RPCStatusCode.UNAVAILABLE)

    with pytest.raises(RPCError):  # an outage longer than the bound is raised
        await riding_outage(down)
    assert 1 < len(calls) < 6


async def test_riding_busy_queries_asks_again_after_a_timeout_only(monkeypatch) -> None:
    """A query the client timed out (tonic's CANCELLED "Timeout expired", seen in CI under
    load) or the server did (DEADLINE_EXCEEDED), or a full query buffer, is asked again;
    a refusal is raised at once."""
    monkeypatch.setattr(asyncio, "sleep", _no_sleep)
    for busy in (
        err("Timeout expired", RPCStatusCode.CANCELLED),
        err("deadline exceeded", RPCStatusCode.DEADLINE_EXCEEDED),
        err(
            "consistent query buffer is full, cannot accept new queries", RPCStatusCode.UNAVAILABLE
        ),
    ):
        calls: list[int] = []

        async def slow(busy: RPCError = busy, calls: list[int] = calls) -> str:
            calls.append(1)
            if len(calls) < 3:
                raise busy
            return "view"

        assert await riding_busy_queries(slow) == "view" and len(calls) == 3, busy
    for refused in (
        err("workflow not found", RPCStatusCode.NOT_FOUND),
        err("cancelled by the caller", RPCStatusCode.CANCELLED),
    ):
        tries: list[int] = []

        async def refuse(refused: RPCError = refused, tries: list[int] = tries) -> str:
            tries.append(1)
            raise refused

        with pytest.raises(RPCError):
            await riding_busy_queries(refuse)
        assert len(tries) == 1


async def _no_sleep(_: float) -> None:
    return None


def view(**fields: object) -> HandleView:
    base: dict[str, object] = dict(
        id="root/w.1",
        name="w",
        parent="root",
        depth=1,
        state="idle",
        inbox_count=0,
        children=[],
        usage_total=0,
        turns_total=0,
        tool_calls_total=0,
        pool_tokens=None,
        pool_tool_calls=None,
        wall_deadline_ms=None,
        pending_req=None,
        last_result=None,
        result_seq=0,
        conv_id="root/w.1",
        transcript_len=0,
        last_error=None,
        defn=None,
    )
    base.update(fields)
    return HandleView.model_validate(base)


def test_settled_matches_the_workflow_rule() -> None:
    req = Request(id="root/w.1#1", kind="approval", prompt="ok?")
    parked = TaskResult(status="pending", is_error=False, text="", pending=req)
    assert settled(view(state="idle")) and settled(view(state="closed"))
    assert not settled(view(state="running"))
    assert not settled(view(state="idle", queued=True))  # a wake waits for a slot
    assert settled(view(state="suspended", pending_req=req, last_result=parked))
    # parked on a Request the view's last result does not show yet: not settled
    assert not settled(view(state="suspended", pending_req=req, last_result=None))
