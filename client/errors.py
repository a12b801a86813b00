"""Typed errors and error values of the client (CONTRACT §3)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class TnxError(Exception):
    """Base class of every error the client raises."""


class HandleNotFoundError(TnxError):
    """No workflow exists for this handle id (in this runtime's scope and namespace).

    Attributes:
        handle_id: the id that was looked up.
    """

    def __init__(self, handle_id: str) -> None:
        super().__init__(f"no handle {handle_id!r}: no agent workflow with that id exists")
        self.handle_id = handle_id


class VerbRejectedError(TnxError):
    """The handle's workflow refused a verb (``inbox full``, ``handle closed``, ...); nothing
    changed.

    Attributes:
        handle_id: the handle.
        verb: the update the workflow refused (``turn``, ``admit_post``, ``wait``, ...), or
            ``wake`` when the parent refused the slot or the handle is the root.
        reason: the workflow's reason, as the contract words it.
    """

    def __init__(self, handle_id: str, verb: str, reason: str) -> None:
        super().__init__(f"{verb} on {handle_id!r} rejected: {reason}")
        self.handle_id = handle_id
        self.verb = verb
        self.reason = reason


class AgentBusy(VerbRejectedError):
    """The handle is busy and the wake's double-texting policy is ``reject``
    (``workflows/contract/policy.py``): the message was refused, nothing changed (the
    workflow's ``ApplicationError`` type ``AgentBusy``, ``names.AGENT_BUSY``).

    Attributes: those of :class:`VerbRejectedError` (``verb`` is ``turn``).
    """


class MessageOutcomeLostError(TnxError):
    """The handle no longer records what became of a message the ``wake`` signal carried
    (the client's signal fallback, ``client/fallback.py``): its record was evicted, the
    oldest first, past ``RECORDS_MAX`` (256) later named messages or ``RECORD_BYTES`` (128
    KiB) of later answering results, before the sender read it. The message was kept and a
    turn held it (or holds it); which result answered it is no longer known, so none is
    guessed: read the transcript (``rt.transcript``) or the trace.

    Attributes:
        handle_id: the handle.
        message_id: the message's id.
    """

    def __init__(self, handle_id: str, message_id: str) -> None:
        super().__init__(
            f"the outcome of message {message_id!r} on {handle_id!r} is no longer recorded"
            " (evicted by later messages): read the transcript"
        )
        self.handle_id = handle_id
        self.message_id = message_id


class InvalidPolicyError(TnxError, ValueError):
    """A double-texting policy that is not ``enqueue``, ``interrupt``, ``reject`` or
    ``debounce:MS``; refused before anything is sent.

    Attributes:
        policy: the refused text.
        reason: the one-line reason.
    """

    def __init__(self, policy: object, reason: str) -> None:
        super().__init__(reason)
        self.policy = policy
        self.reason = reason


class AnswerRejectedError(TnxError):
    """An Answer whose id matches no pending Request (CONTRACT §9.2); nothing changed.

    Attributes:
        answer_id: the Answer's id.
        reason: why it was rejected.
    """

    def __init__(self, answer_id: str, reason: str) -> None:
        # the workflow's reasons often start with the same words (walk 7: "answer 'x#2'
        # rejected: answer 'x#2': its edit ..."): said once
        said = reason.removeprefix(f"answer {answer_id!r}: ")
        super().__init__(f"answer {answer_id!r} rejected: {said}")
        self.answer_id = answer_id
        self.reason = reason


class RecoverRefusedError(TnxError):
    """``recover`` refused to start a handle again (``client/recover.py``): its latest run
    was not terminated (it runs, or it is closed), its last state had a turn in flight, or
    another recover started it first. Nothing was started.

    Attributes:
        handle_id: the handle.
        reason: why.
    """

    def __init__(self, handle_id: str, reason: str) -> None:
        super().__init__(f"recover {handle_id!r} refused: {reason}")
        self.handle_id = handle_id
        self.reason = reason


class ForkRefusedError(TnxError):
    """``fork`` refused to make a fork (``client/fork.py``): a turn below 1 or past the
    original's last complete turn, the root (it has no conversation), an original whose
    parent is closed (the fork would live there), or a spawn the parent refused (its
    ``max_children``, an exhausted pool, ...). Nothing was spawned and nothing changed.

    Attributes:
        handle_id: the original's handle id.
        turn: the turn asked for.
        reason: why.
    """

    def __init__(self, handle_id: str, turn: int, reason: str) -> None:
        super().__init__(f"fork of {handle_id!r} at turn {turn} refused: {reason}")
        self.handle_id = handle_id
        self.turn = turn
        self.reason = reason


class NoWorkerError(TnxError):
    """No worker polls the task queue the handle workflows run on, so a query (or a verb
    that needs the workflow to act) would wait until a deadline instead of answering
    (:mod:`toolnexus_temporal.client.reachability`). Nothing was changed.

    Attributes:
        task_queue: the workflow task queue checked.
        namespace: its namespace.
        last_seen_s: seconds since a worker last polled it (None: none is known to have).
    """

    def __init__(self, task_queue: str, namespace: str, last_seen_s: float | None) -> None:
        self.task_queue = task_queue
        self.namespace = namespace
        self.last_seen_s = last_seen_s
        super().__init__(
            f"no worker polls task queue {task_queue!r} in namespace {namespace!r} "
            f"({self.seen}); "
            f"start one: tnx-worker --task-queue {task_queue} --registry MODULE:REGISTRY"
        )

    @property
    def seen(self) -> str:
        """When a worker last polled the task queue, as the server knows it: it lists a
        poller for 5 minutes after its last poll (Temporal's matching service), so "none in
        the last 5 minutes" is all it can say past that. (A server restarted moments ago
        lists none while its workers reconnect, 5-8 s: ``AgentRuntime.start`` and ``tnx``
        wait that out before they raise this; walk 7 read the old "or the server restarted
        moments ago" clause 12 minutes into a server's life.)"""
        if self.last_seen_s is None:
            # a restarted server lists no poller from before it started (walk 8 read "in
            # the last 5 minutes" 18 s after its worker stopped, the server restarted)
            return (
                f"none has polled it in the last {POLLERS_KEPT_S // 60} minutes or since the "
                "server started"
            )
        # a poll is held up to 60 s: the time a poll began, not when its worker went away
        # (walk 5 read "polled 47s ago" 3 s after stopping its worker)
        ago = round(self.last_seen_s)
        said = f"{ago // 60}m {ago % 60}s" if ago >= 60 else f"{ago}s"  # as tnx says ages
        return f"its last worker began its last poll {said} ago"


POLLERS_KEPT_S = 300
"""How long the server lists a poller after its last poll, s (Temporal's matching service
keeps the poller history 5 minutes)."""


class WorkflowTaskFailingError(TnxError):
    """The handle's workflow fails its workflow tasks, so Temporal refuses updates and queries
    to it ("Workflow Task in failed state") until a worker completes one; nothing was changed.
    Temporal retries the task by itself: once the worker at fault is fixed or stopped the
    handle goes on where it was. The usual cause is a worker that cannot decode the agent's
    payloads (codec keys; such a worker stops itself, :mod:`.keycheck`).

    Attributes:
        handle_id: the handle.
        verb: the update or query refused.
        reason: the last workflow task failure as recorded (decoded with this client's codec
            when it can be), or ``""`` when it could not be read.
    """

    def __init__(self, handle_id: str, verb: str, reason: str = "") -> None:
        why = f": {reason}" if reason else ""
        super().__init__(
            f"{verb} on {handle_id!r} refused: a worker fails this agent's workflow tasks"
            f"{why}. Nothing was changed and Temporal retries the task; fix that worker (a "
            "worker without the codec keys stops itself: give every worker the fleet's keys) "
            "and try again"
        )
        self.handle_id = handle_id
        self.verb = verb
        self.reason = reason


class SpawnError(BaseModel):
    """A refused spawn: returned by ``AgentRuntime.spawn``, never raised (CONTRACT §3).

    Attributes:
        parent: the parent handle id.
        name: the agent name asked for.
        error: the contract's text, e.g. ``unknown agent "x" (known: a, b)``.
    """

    model_config = ConfigDict(frozen=True)

    parent: str
    name: str
    error: str

    def __str__(self) -> str:
        return f"spawn {self.name!r} under {self.parent!r} refused: {self.error}"


class UpdateLimitError(TnxError):
    """An update was refused for a limit, not for its content: Temporal's 10 updates in flight
    per workflow or 2,000 per run, or the handle's cap on held waits. Every public verb with
    a signal form falls back to it instead (README "Errors"); this reaches the caller only
    from verbs without one (``spawn``) once its retries are spent.

    Attributes:
        handle_id: the handle.
        verb: the update refused.
        reason: the server's or the workflow's text.
    """

    def __init__(self, handle_id: str, verb: str, reason: str) -> None:
        super().__init__(f"{verb} on {handle_id!r} refused for a limit: {reason}")
        self.handle_id = handle_id
        self.verb = verb
        self.reason = reason


class InvalidCursorError(TnxError, ValueError):
    """A live-output cursor (``rt.stream(h, after=SEQ)``, ``tnx wait --follow --after SEQ``)
    that is not one ``stream`` gave, or names a run that is not of this handle's workflow.

    Attributes:
        cursor: the cursor as given.
        reason: what is wrong with it.
    """

    def __init__(self, cursor: str, reason: str) -> None:
        super().__init__(f"live-output cursor {cursor!r} is not usable: {reason}")
        self.cursor = cursor
        self.reason = reason


class OrphanedHandlesError(TnxError):
    """A new runtime would start a new root run while handles of the old root's tree are
    still running (the old root was terminated): they would
    be orphaned, out of every ``ls`` and budget. Nothing was started.

    Args:
        scope: the runtime's scope (None for bare ids).
        running: workflow ids of the running handles found (at most 20).
        terminated: the old root was terminated (the message then names ``tnx recover``).

    Attributes:
        scope: the runtime's scope (None for bare ids).
        running: workflow ids of the running handles found (at most 20).
    """

    def __init__(self, scope: str | None, running: list[str], terminated: bool = False) -> None:
        shown = ", ".join(running[:5]) + (" ..." if len(running) > 5 else "")
        where = f"scope {scope!r}" if scope else "this namespace"
        query = f'WorkflowId STARTS_WITH "{scope + "/" if scope else ""}root/"'  # scope checked
        super().__init__(
            f"the root of {where} has ended but {len(running)} of its handles still run "
            f"({shown}); close them first (`temporal workflow cancel --query "
            f"'{query} AND ExecutionStatus=\"Running\"'` closes each gracefully), "
            "or use another scope"
            + (
                "; or `tnx recover root` (AgentRuntime.recover) starts the terminated root"
                " again from its last state, with these handles in its books"
                if terminated
                else ""
            )
        )
        self.scope = scope
        self.running = running


class ClusterConfigError(TnxError, ValueError):
    """A setting of the connection to Temporal is invalid (:mod:`.cluster`); nothing was
    connected. The message is one line naming the setting and where it came from.

    Attributes:
        setting: the setting (``address``, ``TLS CA``, ``profile 'prod'``, ...).
        source: where it came from: a flag (``--tls-ca-path``), an argument, a variable
            (``env TEMPORAL_TLS_SERVER_CA_CERT_PATH``), a profile
            (``profile 'prod' in /path/temporal.toml (tls.server_ca_cert_path)``), ``default``.
        problem: what is wrong with it.
    """

    def __init__(self, setting: str, source: str, problem: str) -> None:
        super().__init__(f"{setting} (from {source}) {problem}")
        self.setting = setting
        self.source = source
        self.problem = problem


class ClusterConnectError(TnxError, RuntimeError):
    """The Temporal server could not be reached or refused the connection (what
    ``Client.connect`` raises as a ``RuntimeError``), in one line with the settings in use.

    Attributes:
        target: the connection, as :meth:`ClusterConfig.describe` words it.
        reason: the SDK's reason, on one line (a TLS failure gets a hint first).
    """

    def __init__(
        self, target: str, reason: str, *, tls: bool = False, client_cert: bool = False
    ) -> None:
        self.target = target
        self.reason = connect_reason(reason, tls=tls, client_cert=client_cert)
        super().__init__(f"cannot connect to Temporal at {target}: {self.reason}")


def connect_reason(raw: str, *, tls: bool = False, client_cert: bool = False) -> str:
    """The SDK's connection error on one line, a known TLS failure explained first.

    Args:
        raw: the SDK's message.
        tls: TLS was on (a server that hangs up on the first call after the handshake then
            refuses the client's certificate, or the lack of one: it shows as a missing
            ``close_notify``, a broken pipe, a reset or a closed connection, depending on
            timing).
        client_cert: a client certificate was sent.
    """
    text = " ".join(raw.split())
    hung_up = "the server closed the TLS connection " + (
        "(does it accept this client certificate: is it signed by a CA the server trusts?)"
        if client_cert
        else "(does it require a client certificate: --tls-cert-path and --tls-key-path?)"
    )
    hints: tuple[tuple[str, str], ...] = (
        ("UnknownIssuer", "the server's certificate is not signed by the CA given"),
        ("NotValidForName", "the server's certificate is not valid for that name"),
        ("CertificateRequired", "the server requires a client certificate"),
        ("InvalidContentType", "the server does not speak TLS (turn TLS off?)"),
        ("CorruptMessage", "the server does not speak TLS (turn TLS off?)"),
    )
    hung_up_signs = (
        "close_notify",
        "broken pipe",
        "brokenpipe",
        "connection reset",
        "connectionreset",
        "connection closed",
        "unexpectedeof",
        "decrypterror",
        "badcertificate",
        "unknownca",
        "alertreceived",
    )
    if tls:
        hints += tuple((sign, hung_up) for sign in hung_up_signs)
    for needle, hint in hints:
        if needle.lower() in text.lower():
            text = f"{hint} ({text})"
            break
    return text if len(text) <= 400 else text[:399] + "…"


class SearchAttributesMissingError(TnxError):
    """The namespace lacks custom search attributes the agent workflows upsert (a namespace
    set up by an older build may lack ``AgentRequest*``): a parked agent's upsert would fail
    its workflow task over and over, so the runtime does not start. Nothing was started.

    Attributes:
        namespace: the namespace.
        missing: the missing attribute names, sorted.
    """

    def __init__(self, namespace: str, missing: list[str], types: dict[str, str]) -> None:
        lines = " && ".join(
            f"temporal operator search-attribute create --namespace {namespace}"
            f" --name {name} --type {types[name]}"
            for name in missing
        )
        super().__init__(
            f"namespace {namespace!r} lacks the search attributes {', '.join(missing)}; "
            f"register them (`tnx server start` does it for its dev server; elsewhere: "
            f"{lines})"
        )
        self.namespace = namespace
        self.missing = missing
