"""The durable names: everything a running workflow, a history or an operator refers to by name.

Every workflow, signal, update, query and activity name, every search attribute, and every
``workflow.patched`` id lives here, and only here. Renaming any of them breaks running agents
and recorded histories (tests/histories replays them): add, never rename. Activities and the
host library import their names from this module, never from workflow code.

Deterministic and I/O free (the workflow sandbox imports it).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from temporalio.common import SearchAttributeKey

# ---- ids ----

ROOT_ID: Final = "root"
"""The root handle's id (depth 0; never runs an LLM)."""

TASK_TOOL: Final = "task"
"""The delegation tool's name (CONTRACT §4): ``{"agent": ..., "prompt": ...}``, and
``"background": true`` to start the child without waiting for it."""

BACKGROUND_LIST_TOOL: Final = "background_list"
"""The tool that lists a handle's background children (no arguments)."""
BACKGROUND_WAIT_TOOL: Final = "background_wait"
"""The tool that waits for one background child's result: ``{"id": ..., "timeout_s": ...}``."""
BACKGROUND_WAIT_DEFAULT_S: Final = 300
"""``background_wait``'s timeout when the model gives none, in seconds."""
BACKGROUND_WAIT_MAX_S: Final = 3_600
"""The longest ``background_wait`` timeout, in seconds (longer ones are cut to it)."""
BACKGROUND_POST_TOOL: Final = "background_post"
"""The tool that posts to one idle background child and wakes it: ``{"id": ..., "text": ...}``."""
BACKGROUND_CLOSE_TOOL: Final = "background_close"
"""The tool that closes one background child: ``{"id": ...}``."""
BACKGROUND_TOOLS: Final = (
    BACKGROUND_LIST_TOOL,
    BACKGROUND_WAIT_TOOL,
    BACKGROUND_POST_TOOL,
    BACKGROUND_CLOSE_TOOL,
)
"""The built-in tools for background children, offered (with ``task``) to every agent with
a team."""
CHILD_CHANNEL: Final = "child"
"""The inbox channel of a background child's settled result (``[from=<child id>
channel=child] [status] text``)."""


def workflow_id_for(scope: str | None, handle_id: str) -> str:
    """The workflow id of a handle: its handle id, prefixed by ``{scope}/`` when scoped."""
    return f"{scope}/{handle_id}" if scope else handle_id


def id_in_scope(scope: str | None, given: str) -> str:
    """A handle or Request id as a workflow of ``scope`` names it: ``given`` without the
    ``{scope}/`` its workflow id carries (``demo/root/a.1#2`` -> ``root/a.1#2``), so an id
    printed by ``tnx`` (which prints every id with the scope, issue 37 item 1) pastes into a
    raw ``temporal workflow signal`` as printed; any other ``given`` unchanged."""
    if not scope or not given.startswith(f"{scope}/"):
        return given
    rest = given[len(scope) + 1 :]
    return rest if rest.partition("/")[0].partition("#")[0] == ROOT_ID else given


# ---- the workflow ----

WORKFLOW_TYPE: Final = "AgentWorkflow"
"""The workflow type of every handle, the root included."""

# Signals a host or an operator may send (``temporal workflow signal --name ...``).
SIGNAL_WAKE: Final = "wake"
SIGNAL_POST: Final = "post"
SIGNAL_INTERRUPT: Final = "interrupt"
SIGNAL_CLOSE: Final = "close"
SIGNAL_ANSWER: Final = "answer"
SIGNAL_PAUSE: Final = "pause"
SIGNAL_UNPAUSE: Final = "unpause"
PUBLIC_SIGNALS: Final = (
    SIGNAL_WAKE,
    SIGNAL_POST,
    SIGNAL_INTERRUPT,
    SIGNAL_CLOSE,
    SIGNAL_ANSWER,
    SIGNAL_PAUSE,
    SIGNAL_UNPAUSE,
)
"""The signals of the host verbs, in the order the rejection message lists them."""

# Signals between handle workflows (runtime-internal: not for hosts).
SIGNAL_CHILD_REPORT: Final = "child_report"
SIGNAL_SLOT_REQUEST: Final = "slot_request"
SIGNAL_BUDGET_ASK: Final = "budget_ask"
SIGNAL_BUDGET_REPLY: Final = "budget_reply"
SIGNAL_POOL_FLOOR: Final = "pool_floor"
SIGNAL_SLOT_RELEASE: Final = "slot_release"
SIGNAL_SLOT_RECALL: Final = "slot_recall"

# Updates (the host library's synchronous path).
UPDATE_SPAWN: Final = "spawn"
UPDATE_TURN: Final = "turn"
UPDATE_POST: Final = "admit_post"
UPDATE_INTERRUPT: Final = "admit_interrupt"
UPDATE_CLOSE: Final = "admit_close"
UPDATE_ANSWER: Final = "admit_answer"
UPDATE_WAIT: Final = "wait"
UPDATE_SCHEDULE: Final = "schedule"
UPDATE_PAUSE: Final = "admit_pause"

# Queries.
QUERY_VIEW: Final = "view"
QUERY_STATE: Final = "state"
QUERY_TRACE: Final = "trace"
QUERY_INBOX: Final = "inbox"
QUERY_RECOVERY: Final = "recovery"
QUERY_MESSAGE: Final = "message"

# Error types a validator refuses an update with (the host library reads them).
HISTORY_FULL: Final = "HistoryFull"
"""The ``ApplicationError`` type of a post refused because its run's history is full
(``inbox.POST_HISTORY_BYTES``): the client retries it until the run continued as new."""
POST_REFUSED: Final = "PostRefused"
"""The ``ApplicationError`` type of a post the ``admit_post`` validator refuses by the inbox
rules (``contract.posts.post_error``: ``inbox full``, ``inbox closed``, the root): nothing reaches
history; the client returns it as ``PostResult(ok=False)``."""
POST_REFUSALS: Final = ("inbox ", "the root has no inbox", "history full")
"""How the reasons of a refused post begin (``contract.posts.post_error``,
``inbox.post_history_error``): the client returns a ``VerbRejectedError`` of ``admit_post``
with one of these as ``PostResult(ok=False, error=reason)``."""
WAITERS_FULL: Final = "WaitersFull"
"""The ``ApplicationError`` type of a ``wait`` or ``turn`` refused because the handle holds
``lifecycle.WAITERS_MAX`` already: the client polls the ``view`` query instead."""

# ---- activities ----

LLM_CALL_ACTIVITY: Final = "tnx.llm_call"
"""One LLM round trip."""

LLM_SUMMARIZE_ACTIVITY: Final = "tnx.llm_summarize"
"""One summarizer call: folds a transcript's older turns into its summary (context policy)."""

TOOL_CALL_ACTIVITY: Final = "tnx.tool_call"
"""One tool call."""

INTERPRET_ACTIVITY: Final = "tnx.interpret"
"""One interpreter (``wait_for``) call."""

ANSWER_PRINCIPAL_ACTIVITY: Final = "tnx.answer_principal"
"""Reads the current run's history for the server-stamped principal of the event that
delivered an Answer (``HistoryEvent.principal``): run only for a Request whose approvers are
set (``activities/principal.py``)."""

CHECK_EDIT_ACTIVITY: Final = "tnx.check_edit"
"""Checks an Answer's ``edited_args`` against the parameters schema of the tool that
suspended (the registry's tool, or an MCP server's ``inputSchema``): run only for an Answer
that edits (``activities/tools.py``)."""

RESOLVE_AGENT_ACTIVITY: Final = "tnx.resolve_agent"
"""Looks an agent name up in the worker's registry."""

RUN_HOOK_ACTIVITY: Final = "tnx.run_hook"
"""Runs a registered ``on_spawn`` / ``on_close`` hook."""

FORK_TRANSCRIPT_ACTIVITY: Final = "tnx.fork_transcript"
"""Copies the first turns of a handle's conversation under a fork's new store key, for a
parent spawning the fork (``rt.fork``; ``activities/fork.py``)."""

WATCH_CHILDREN_ACTIVITY: Final = "tnx.watch_children"
"""Waits (heartbeating) until one of a parent's children started by an earlier run ends
(protocol 3): a child workflow handle belongs to the run that started it."""

WORKSPACE_CLAIM_ACTIVITY: Final = "tnx.workspace_claim"
"""Taken on the shared task queue by a worker that runs workspace tools: it starts the
handle's workspace and answers its own task queue (``activities/workspace.py``)."""

WORKSPACE_LOST_MS: Final = 10_000
"""The default ``RuntimeOptions.workspace_lost_ms``: a workspace tool call not started by
the holding worker within 10 s means that worker is gone (a live worker starts its tasks in
milliseconds unless all its activity slots are busy that long)."""

LLM_NON_RETRYABLE: Final = (
    "LlmRequestRejected",
    "MalformedLlmResponse",
    "StoreError",
    "LlmWallDeadline",
    "LlmReplyTooLarge",
)
"""``ApplicationError`` types of ``tnx.llm_call`` that no retry can fix."""

WALL_GRACE_MS: Final = 1_000
"""After the wall deadline, how long a turn waits for its LLM call to report (protocol 3):
the activity stops itself at the deadline, so a live worker reports within this; a dead one
never does (its heartbeat timeout would add seconds)."""

TOOL_NON_RETRYABLE: Final = ("UnknownTool", "ToolArgumentsInvalid")
"""``ApplicationError`` types of ``tnx.tool_call`` that no retry can fix."""

INTERPRET_NON_RETRYABLE: Final = ("UnknownInterpreter", "WrongAnswerId")
"""``ApplicationError`` types of ``tnx.interpret`` that no retry can fix."""

# ---- the turn span's extern functions (tracing on) ----
# The workflow's turn observer (``workflows/turn/observe.py``) calls these through the
# outbound interceptor that ``observability/otel.py`` installs, which opens and ends the span.
TURN_SPAN_START: Final = "__tnx_turn_span_start"
"""Extern function: open the turn span of ``(workflow_id, run_id)``."""
TURN_SPAN_END: Final = "__tnx_turn_span_end"
"""Extern function: end the open turn span of ``(workflow_id, run_id)``."""


# ---- ApplicationError types the workflow raises ----
# Each is the ``type`` of an ``ApplicationError`` raised by workflow code (a failed run, or an
# update refused by its validator: nothing reaches history). Named once here: the workflow
# raises them and a client or test that tells one from another matches these names.

WAKE_REJECTED: Final = "WakeRejected"
"""A ``wake`` update refused by its validator (the reason is the message)."""

AGENT_BUSY: Final = "AgentBusy"
"""A ``turn`` update refused by its validator under the ``reject`` double-texting policy: the
handle is busy (``contract/policy.py``); nothing changed. The client raises
``client.errors.AgentBusy``."""

SCHEDULE_REJECTED: Final = "ScheduleRejected"
"""A ``schedule`` update refused by its validator: a bad payload, the root, a closed handle."""

PAUSE_REJECTED: Final = "PauseRejected"
"""A ``pause``/``unpause`` update refused by its validator: a bad payload, the root, a
closed handle."""

NO_AGENT_DEFINITION: Final = "NoAgentDefinition"
"""A handle asked to run a turn without its ``AgentDef`` (non-retryable: the run fails
rather than retrying its workflow task forever)."""

NOT_AN_AGENT_START: Final = "NotAnAgentStart"
"""A workflow started with input that is not an ``AgentInput`` (``temporal workflow start``,
a schedule created by hand): the run fails at once."""

UNSUPPORTED_PROTOCOL: Final = "UnsupportedProtocol"
"""A handle whose protocol generation this build does not run (``versions.py``)."""

# ---- search attributes (CONTRACT §8) ----
# Registered on the namespace before a worker runs (``tnx server start`` and the test
# fixture do it; ``ensure_search_attributes`` in the CLI's dev-server module does it for any
# server). Example: ``temporal workflow list --query 'AgentState="idle" AND
# ExecutionStatus="Running"'`` (a run that continued as new keeps the attributes it closed
# with: without the ``ExecutionStatus`` clause a list shows a handle once per run); the
# approval queue is :data:`APPROVAL_QUEUE`.

AGENT_STATE = SearchAttributeKey.for_keyword("AgentState")
"""The Handle's durable state: ``idle``, ``suspended`` or ``closed``
(``models.DurableStateName``). Never ``running``: a turn is transient and writes no search
attribute unless it parks (``suspended``) or closes, so a running handle shows ``idle`` here;
the live state is the ``state`` query (``tnx inspect``, ``tnx ls``), the workflow's current
details and the worker's ``tnx_turns_in_flight`` gauge (issue 35 item 2)."""

AGENT_NAME = SearchAttributeKey.for_keyword("AgentName")
"""The agent definition's name (``root`` for the root)."""

AGENT_PARENT = SearchAttributeKey.for_keyword("AgentParent")
"""The parent's handle id (absent on the root)."""

AGENT_DEPTH = SearchAttributeKey.for_int("AgentDepth")
"""0 for the root, +1 per spawn level."""

# The pending Request of a suspended handle (protocol 4): set when it parks (or surfaces
# another Request), unset when it resumes, goes idle or closes. The approval queue of the web
# UI: :data:`APPROVAL_QUEUE`, with these as columns ("waits for what, since when").

AGENT_REQUEST_ID = SearchAttributeKey.for_keyword("AgentRequestId")
"""The pending Request's id (``{owner handle id}#{n}``): the ``id`` of the Answer."""

AGENT_REQUEST_KIND = SearchAttributeKey.for_keyword("AgentRequestKind")
"""The pending Request's kind (``approval``, ``input``, ...)."""

AGENT_REQUEST_PROMPT = SearchAttributeKey.for_text("AgentRequestPrompt")
"""The pending Request's prompt, cut to :data:`REQUEST_PROMPT_CHARS` characters."""

AGENT_WAITING_SINCE = SearchAttributeKey.for_datetime("AgentWaitingSince")
"""When the handle parked on its pending Request (workflow time, UTC); kept while it surfaces
another Request without resuming."""

AGENT_PAUSED = SearchAttributeKey.for_bool("AgentPaused")
"""True while the handle is paused (``pause.py``); unset (or False) otherwise:
``temporal workflow list --query 'AgentPaused=true AND ExecutionStatus="Running"'``."""

AGENT_NEXT_TICK = SearchAttributeKey.for_datetime("AgentNextTick")
"""When the handle's next tick fires (workflow time, UTC; ``ticks.py``); unset without a tick
schedule."""

AGENT_ESCALATED_TO = SearchAttributeKey.for_keyword("AgentEscalatedTo")
"""The operator queue the pending Request escalated to (``AgentDef.approval.escalate.queue``;
``workflows/approvals/audit.py``); unset once it is answered:
``temporal workflow list --query 'AgentEscalatedTo="ops" AND ExecutionStatus="Running"'``,
the web UI's search box."""

REQUEST_PROMPT_CHARS: Final = 160
"""How much of a pending prompt ``AgentRequestPrompt`` keeps (the full prompt: the ``view``
query, the current details)."""

APPROVAL_QUEUE: Final = 'AgentState="suspended" AND ExecutionStatus="Running"'
"""The visibility query of the approval queue: one row per live suspended handle. A run that
continued as new keeps the search attributes it had (``suspended`` when it was parked), so
the ``ExecutionStatus`` clause is what leaves the closed runs out. ``tnx pending``,
``AgentRuntime.pending``, the web UI's search box and the docs all use this one query."""

AGENT_REQUEST_EXPIRES = SearchAttributeKey.for_datetime("AgentRequestExpires")
"""When the pending Request expires (``Request.expires_at``, UTC), set with the other
``AgentRequest*`` attributes in the same upsert (no action of its own); unset when the
Request has no deadline. The approval queue's "expires" column (issue 37 item 9)."""

REQUEST_SEARCH_ATTRIBUTES = (
    AGENT_REQUEST_ID,
    AGENT_REQUEST_KIND,
    AGENT_REQUEST_PROMPT,
    AGENT_WAITING_SINCE,
    AGENT_REQUEST_EXPIRES,
)
"""The search attributes of the pending Request (protocol 4)."""

ALL_SEARCH_ATTRIBUTES = (
    AGENT_STATE,
    AGENT_NAME,
    AGENT_PARENT,
    AGENT_DEPTH,
    *REQUEST_SEARCH_ATTRIBUTES,
    AGENT_PAUSED,
    AGENT_NEXT_TICK,
    AGENT_ESCALATED_TO,
)
"""Every custom search attribute, for registration."""

# ---- the wire protocol ----
# A handle's protocol generation is part of its state (``HandleState.protocol``), set by whoever
# creates it: the client for a new root, the parent for a child (children inherit it). It never
# changes within a tree, so a history replays the protocol it ran, with no marker event. The
# rules for changing it are in ``versions.py``.

PROTOCOL: Final = 4
"""The one wire protocol of this build, the baseline of the first release (2026-12-01):
leases for ``max_concurrent``, coalesced reports, cached agent definitions, nonces on every
internal message, parked runs that continue as new, the pending Request's search attributes
and static details on child starts. Generations 1 to 3 were pre-release and are gone
(:data:`RETIRED_PROTOCOLS`)."""

PROTOCOLS: Final = frozenset({PROTOCOL})
"""The generations this build's workflow code runs. From 1.0 on, a change of workflow
commands adds a generation here (or a patch id to :data:`PATCHES`); one leaves only under the
retirement rule of ``versions.py``."""

RETIRED_PROTOCOLS: Final[Mapping[int, str]] = MappingProxyType(
    {
        1: "pre-release (until 2026-11-30): a slot per wake, a report per settle",
        2: "pre-release (2026-11-30): leases, coalesced reports, no nonces",
        3: "pre-release (2026-12-01): protocol 2 hardened, no approval-queue search attributes",
    }
)
"""Generations this build no longer has, and what they were: an agent on one of them cannot
run on this build (``tnx replay-check`` names it; drain or terminate it before the deploy)."""

# ---- workflow.patched ids ----

PATCHES: Final[Mapping[str, str]] = MappingProxyType({})
"""The ``workflow.patched`` ids in force: id → what it changed, when, and when it may be
removed (``versions.patched`` refuses an id not listed here). None until 1.0."""

RETIRED_PATCHES: Final = (
    "resolve-agent-by-activity",
    "llm-on-own-queue",
    "settle-reports-only",
    "lease-returned",
)
"""Pre-release patch ids, folded into :data:`PROTOCOL` (never to be used again)."""
