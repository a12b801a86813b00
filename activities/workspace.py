"""The worker side of workspace tools (issue 27, item 5; the rule is
``workflows/turn/workspace.py``): a worker that runs workspace tools also polls a task queue
of its own, answers ``tnx.workspace_claim`` on the shared queue with that queue, and gives
each handle a directory under its workspace root.

Temporal's worker-specific task queue pattern (samples-python
``worker_specific_task_queues``). The second poller is a Temporal ``Worker`` on the worker's
own queue, started and stopped with the main worker by a worker ``Plugin``
(``temporalio.worker.Plugin.run_worker``): it exists exactly while the main worker runs, so
a worker that stops (or dies) stops polling its queue, and the next workspace call's
schedule-to-start timeout says so.

Directories: ``{root}/{workspace_dir_name(workflow id)}``, one per handle (its workflow id, so two
runtimes' handles never share one). A claim starts the directory empty (whatever an earlier
life of this worker left there is removed: the handle was told its workspace was lost). A
handle's directory is kept while its workflow runs (continue-as-new keeps it), and removed
by the worker within :data:`WORKSPACE_SWEEP_S` once the handle is closed (its workflow
completed: a closed handle never runs again); a terminated or failed workflow's directory is
kept (``tnx recover`` may start it again). With no root given the worker makes a fresh
temporary root when it starts and removes it, with every workspace in it, when it stops; a
root given (``create_worker(workspace_root=...)``, ``tnx-worker --workspace-root``) is kept,
with the directories its last life had not removed, for inspection.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from pathlib import Path

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.worker import (
    Plugin,
    Replayer,
    ReplayerConfig,
    Worker,
    WorkerConfig,
    WorkflowReplayResult,
)

from toolnexus_temporal.activities.tools import ToolActivities
from toolnexus_temporal.client.queries import quoted
from toolnexus_temporal.workflows.contract.names import WORKSPACE_CLAIM_ACTIVITY
from toolnexus_temporal.workflows.contract.workspace import WorkspaceClaim, WorkspaceClaimInput

log = logging.getLogger(__name__)

WORKSPACE_SLOTS = 100
"""Activity slots of a worker's own queue (workspace tool calls at once). A call that waits
for a slot longer than ``RuntimeOptions.workspace_lost_ms`` counts as lost."""


WORKSPACE_SWEEP_S = 60.0
"""Seconds between two sweeps of a worker's workspaces: one visibility read per 100 of its
handles, removing the directories of those whose workflow completed (the handle closed)."""

SWEEP_BATCH = 100
"""Workflow ids per visibility query of a sweep."""


def workspace_dir_name(workflow_id: str) -> str:
    """The directory name of a handle's workspace: its workflow id with every character
    but letters, digits, ``.``, ``_`` and ``-`` made ``_`` (at most 80 of them), then 12 hex
    digits of its SHA-256 (two ids made alike stay apart)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", workflow_id)[:80]
    return f"{safe}-{hashlib.sha256(workflow_id.encode()).hexdigest()[:12]}"


class WorkspaceHost:
    """One worker's workspaces: its own task queue, its workspace root and the claim.

    Args:
        task_queue: the shared task queue; the worker's own queue is
            ``{task_queue}.ws.{12 random hex digits}``.
        tools: the worker's tool activities (its registry's tools and secrets); the worker's
            own queue runs a copy that gives each call its handle's directory.
        root: the workspace root (kept when the worker stops); None: a temporary root
            made when the worker starts and removed when it stops.
    """

    def __init__(self, task_queue: str, tools: ToolActivities, root: Path | None = None) -> None:
        self.task_queue = f"{task_queue}.ws.{uuid.uuid4().hex[:12]}"
        self.tools = ToolActivities(
            tools.tools, tools.interpreters, tools.secrets, mcp=tools.mcp, workspace=self.directory
        )
        self.given_root = root
        self.root: Path | None = None
        self.identity = ""
        self._held: dict[str, Path] = {}  # workflow id -> its directory, while it may run

    def directory(self, workflow_id: str) -> Path:
        """The workspace directory of the handle of ``workflow_id`` (made if missing).

        Raises:
            ApplicationError: the worker is not running (non-retryable).
        """
        if self.root is None:
            raise ApplicationError(
                "this worker's workspaces are not running", type="NoWorkspace", non_retryable=True
            )
        path = self.root / workspace_dir_name(workflow_id)
        path.mkdir(parents=True, exist_ok=True)
        self._held[workflow_id] = path
        return path

    async def sweep(self, client: Client) -> list[str]:
        """Remove the directories of this worker's handles that are closed (their workflow
        completed), read from visibility in batches of :data:`SWEEP_BATCH`.

        Returns:
            The workflow ids whose directories were removed.

        Raises:
            RPCError: visibility could not be read (the directories are kept until the next
                sweep).
        """
        done: list[str] = []
        ids = list(self._held)
        for at in range(0, len(ids), SWEEP_BATCH):
            batch = [i for i in ids[at : at + SWEEP_BATCH] if _quotable(i)]
            if not batch:
                continue
            query = (
                'ExecutionStatus="Completed" AND WorkflowId IN ('
                + ", ".join(quoted(i) for i in batch)
                + ")"
            )
            closed = {wf.id async for wf in client.list_workflows(query)}
            for workflow_id in batch:
                # a later run of the same id may have started since: it is "Running" too
                if workflow_id in closed and not await _running(client, workflow_id):
                    path = self._held.pop(workflow_id)
                    await asyncio.to_thread(shutil.rmtree, path, True)
                    done.append(workflow_id)
        return done

    async def _sweeping(self, client: Client) -> None:
        """:meth:`sweep` every :data:`WORKSPACE_SWEEP_S` while the worker runs."""
        while True:
            await asyncio.sleep(WORKSPACE_SWEEP_S)
            try:
                removed = await self.sweep(client)
            except RPCError as err:
                log.warning("workspace sweep: visibility could not be read: %s", err)
                continue
            if removed:
                log.info("workspaces of %d closed handles removed", len(removed))

    @activity.defn(name=WORKSPACE_CLAIM_ACTIVITY)
    async def claim(self, inp: WorkspaceClaimInput) -> WorkspaceClaim:
        """Start the workspace of the calling handle on this worker: an empty directory,
        and this worker's own task queue for its workspace calls.

        Raises:
            ApplicationError: the worker is not running (non-retryable).
        """
        path = await asyncio.to_thread(self._start, activity.info().workflow_id or inp.handle_id)
        return WorkspaceClaim(task_queue=self.task_queue, worker=self.identity, path=str(path))

    def _start(self, workflow_id: str) -> Path:
        """The handle's directory, emptied."""
        path = self.directory(workflow_id)
        _empty(path)
        return path

    async def serve(self, worker: Worker, run: Callable[[Worker], Awaitable[None]]) -> None:
        """Run ``worker`` (``run``) with this worker's own queue polled beside it (same
        client, identity, graceful shutdown and heartbeat throttling), its root made first
        and, when it was not given, removed after."""
        config = worker.config()
        self.identity = config.get("identity") or worker.client.identity
        root = self.given_root
        if root is None:
            root = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="tnx-ws-"))
        else:
            await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
        self.root = root
        own = Worker(
            worker.client,
            task_queue=self.task_queue,
            activities=[self.tools.tool_call],
            # the main worker's own interceptors (the activity interceptor's spans and
            # metrics, observability/activity.py; tracing when given to the worker only)
            interceptors=config.get("interceptors", ()),
            identity=self.identity,
            max_concurrent_activities=WORKSPACE_SLOTS,
            graceful_shutdown_timeout=config.get("graceful_shutdown_timeout") or timedelta(),
            max_heartbeat_throttle_interval=config.get(
                "max_heartbeat_throttle_interval", timedelta(seconds=60)
            ),
            default_heartbeat_throttle_interval=config.get(
                "default_heartbeat_throttle_interval", timedelta(seconds=30)
            ),
        )
        sweeping = asyncio.create_task(self._sweeping(worker.client), name="workspace sweep")
        try:
            async with own:
                await run(worker)
        finally:
            sweeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeping
            self.root = None
            if self.given_root is None:
                await asyncio.to_thread(shutil.rmtree, root, True)


class WorkspacePlugin(Plugin):
    """A worker plugin that runs :meth:`WorkspaceHost.serve` around the worker's run, so
    the worker's own queue is polled exactly while the worker runs (``Worker.run``, or
    ``async with worker``)."""

    def __init__(self, host: WorkspaceHost) -> None:
        self.host = host

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """Unchanged."""
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Run the worker with its own queue beside it."""
        await self.host.serve(worker, next)

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        """Unchanged."""
        return config

    def run_replayer(
        self,
        replayer: Replayer,
        histories: AsyncIterator[WorkflowHistory],
        next: Callable[
            [Replayer, AsyncIterator[WorkflowHistory]],
            AbstractAsyncContextManager[AsyncIterator[WorkflowReplayResult]],
        ],
    ) -> AbstractAsyncContextManager[AsyncIterator[WorkflowReplayResult]]:
        """Unchanged."""
        return next(replayer, histories)


def _empty(path: Path) -> None:
    """Remove everything inside ``path``."""
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _quotable(workflow_id: str) -> bool:
    try:
        quoted(workflow_id)
    except ValueError:
        return False
    return True


async def _running(client: Client, workflow_id: str) -> bool:
    """Whether the latest run of ``workflow_id`` is running (visibility can lag a new run)."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return True  # unknown: keep the directory
    return described.status == WorkflowExecutionStatus.RUNNING
