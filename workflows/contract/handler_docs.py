"""The descriptions of ``AgentWorkflow``'s signals, updates and queries (issue 14).

Temporal serves them with the workflow's metadata (``__temporal_workflow_metadata``): the web
UI's Signal dialog and ``temporal workflow metadata`` show them next to each name. The public
ones say what input they take (the exact JSON shape); the runtime-internal ones (messages
between handle workflows and the host library's update path) start with :data:`INTERNAL`.

Descriptions are not part of history: changing them changes no workflow command. Also here:
:func:`no_worker_hint`, the line of the static details (a child's and a root's) that says what
a blank Current Details panel means; the host library uses it too.
"""

from __future__ import annotations

from typing import Final

INTERNAL: Final = "INTERNAL: runtime use only, do not send."
"""The first words of every runtime-internal handler's description."""

_HOST = f"{INTERNAL} The host library's synchronous path (AgentRuntime); operators use the"

# ---- public signals (operators: ``temporal workflow signal`` or the web UI)

ANSWER: Final = (
    "Answer this agent's pending Request (CONTRACT §5). Input: "
    '{"id": "<request id>", "ok": true} to approve (optional "data": {...}), or '
    '{"id": "<request id>", "ok": false, "reason": "declined"} (reason: declined | cancelled'
    ' | expired); optional "by": "<who>" names the answerer for the audit and the'
    ' agent\'s approvers (stated, not verified); optional "edited_args": {...} (with ok true)'
    " runs the tool with these arguments instead, checked against its schema first;"
    ' optional "message": "<words>" for the model (with ok false: the tool\'s result).'
    " The id and the exact JSON are at the top of Current Details. A wrong id, an expired"
    " Request, a refused approver or a bad edit is rejected:"
    " Current Details and the trace then say 'answer rejected: <reason>'."
)
WAKE: Final = (
    'Wake the agent for one turn. Input: a prompt string, null, or {"prompt": "...",'
    ' "policy": "enqueue"}. While it runs, waits or is paused the prompt is kept for the next'
    " turn; policy (else the agent's): enqueue, interrupt (stop the turn in flight), reject"
    " (refused, trace line) or debounce:MS. Refused (trace line) when closed or on the root."
)
POST: Final = (
    "Append an item to the agent's inbox (read at its next wake; never wakes it). Input: a"
    ' string, or {"from": "external", "channel": "external", "text": "..."}.'
)
INTERRUPT: Final = (
    "Abort the running turn (or cancel the pending Request); the agent becomes idle. No input."
)
CLOSE: Final = (
    'Close the agent and its subtree. Input: null or {"force": false, "reason": "..."}'
    " (force: abort a running turn first)."
)
PAUSE: Final = (
    "Pause the agent: it keeps taking posts and ticks into its inbox but starts no turn; the"
    " latest wake sent meanwhile is kept and runs on `unpause`. A running turn finishes."
    ' Input: null, or {"now": true} to interrupt the running turn at once.'
)
UNPAUSE: Final = "Unpause the agent: a wake held while paused runs now. Input: null."

# ---- public updates (return a result to the sender)

ADMIT_ANSWER: Final = (
    "Answer the pending Request and get the verdict back (the Signal `answer` returns"
    ' nothing). Input: {"id": "<request id>", "ok": true}. Returns {"ok": false, "error":'
    ' "<reason>"} when the id matches no pending Request; nothing changes then.'
)
ADMIT_POST: Final = (
    'Like the signal `post`, with the verdict. Input: {"from": "external", "channel":'
    ' "external", "text": "..."}; returns {"ok": false, "error": ...} on a full or closed inbox.'
)
ADMIT_INTERRUPT: Final = "Like the signal `interrupt`, returning once idle. Input: {}."
ADMIT_PAUSE: Final = (
    'Like the signals `pause` / `unpause`, with the status. Input: {"paused": true, "now":'
    " false} (paused false: unpause)."
)
SCHEDULE: Final = (
    'Put a tick schedule in force (replacing any), or remove it. Input: {"tick":'
    ' {"every_ms": 60000, "prompt": "...", "wake": true}} or {"tick": {"cron": "0 * * * *"}};'
    " {} removes it. Returns the view (next_tick_ms)."
)
ADMIT_CLOSE: Final = (
    'Like the signal `close`, returning once closed. Input: {"force": false, "reason": "..."}.'
)
TURN: Final = f"{_HOST} signal `wake`."
WAIT: Final = (
    'Wait for the next result (or the last one when settled). Input: {"timeout_ms": 30000}.'
    ' A reply with "again_after_seq": N (an idle agent continuing as new) has no result yet:'
    ' send wait again with {"after_seq": N}.'
)
SPAWN: Final = f"{_HOST} host verb spawn (tnx spawn)."

# ---- runtime-internal (between handle workflows)

SLOT_REQUEST: Final = f"{INTERNAL} A child asks its parent for a slot."
SLOT_RELEASE: Final = f"{INTERNAL} A child gives its slot back."
SLOT_RECALL: Final = f"{INTERNAL} The parent recalls a child's slot."
CHILD_REPORT: Final = f"{INTERNAL} A child's state snapshot to its parent."
BUDGET_ASK: Final = f"{INTERNAL} A child asks its parent for the live pool remainder."
BUDGET_REPLY: Final = f"{INTERNAL} The parent's reply to budget_ask."
POOL_FLOOR: Final = f"{INTERNAL} The parent's live pool remainder."

# ---- queries

VIEW: Final = "The agent's public view (state, pending request, last result, counters)."
STATE: Final = "The whole handle state (debugging; its secrets masked)."
TRACE: Final = (
    "The agent's trace lines, oldest first (state changes, rejections): seq, at (ISO 8601 UTC),"
    " at_ms (ms since the epoch) and line."
)
INBOX: Final = "Items waiting for the next wake, oldest first."
RECOVERY: Final = (
    "What `tnx recover` starts again from this run (its state, a parked turn; secrets masked)."
)
MESSAGE: Final = (
    "What became of the wake sent with this message id (`wake` signal's `message_id`):"
    " waiting, taken, answered (with the result of the turn that held it), busy, refused,"
    " closed or unknown."
)


# ---- static details (the web UI shows them without a worker)


def no_worker_hint(task_queue: str) -> str:
    """What a blank Current Details panel ("No Current Details") means, for the static
    details of a child's workflow (``visibility/operator.py``) and of a root's (the host
    library's ``client/roots.py``): no worker serves the task queue, and the command that
    starts one."""
    return (
        'Current Details blank ("No Current Details")? No tnx worker serves task queue'
        f" `{task_queue}`: start one with `tnx-worker --task-queue {task_queue} --registry"
        " MODULE:REGISTRY`. An answer sent meanwhile (Signal `answer`) is kept until it runs."
    )
