"""The workspace pin (issue 27, item 5): which worker holds a handle's workspace, and the
input and result of the claim that finds it. Carried in ``HandleState.workspace`` across
continue-as-new. Deterministic and I/O free (the rule is ``workflows/turn/workspace.py``;
the worker side is ``activities/workspace.py``).
"""

from __future__ import annotations

from pydantic import Field

from toolnexus_temporal.workflows.contract.models import WireModel


class WorkspaceClaimInput(WireModel):
    """Input of the ``tnx.workspace_claim`` activity.

    Attributes:
        handle_id: the handle whose workspace the worker that takes the claim starts.
    """

    handle_id: str


class WorkspaceClaim(WireModel):
    """The worker that took a ``tnx.workspace_claim``: it now holds the handle's workspace.

    Attributes:
        task_queue: the worker's own task queue (``{task queue}.ws.{unique}``); the handle's
            workspace tools run there from now on.
        worker: the worker's identity (Temporal's ``identity``), for the trace and the model.
        path: the workspace directory on that worker's machine.
    """

    task_queue: str
    worker: str
    path: str


class WorkspaceState(WireModel):
    """Where a handle's workspace is (``Workspaces`` in ``workflows/turn/workspace.py``).

    Attributes:
        task_queue: the holding worker's own task queue; None until the first workspace
            tool call claims one.
        worker: the holding worker's identity.
        path: the workspace directory on it.
        claims: workspaces started so far (1 after the first claim).
        lost: workspaces lost because their worker was gone.
    """

    task_queue: str | None = None
    worker: str | None = None
    path: str | None = None
    claims: int = Field(default=0, ge=0)
    lost: int = Field(default=0, ge=0)
