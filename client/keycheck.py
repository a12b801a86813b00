"""The key check of a worker: a worker whose codec keys cannot read its task queue's payloads
takes no work.

A worker that cannot decode a payload fails what it took: a workflow task (retried, but
updates are refused meanwhile), an LLM call's attempt (the retries it takes are spent: a turn
can end ``error``), and a worker with *another* key writes that failure encrypted with its
key, which the right workers then cannot read either (every later workflow task of that agent
failed). So a worker checks its keys before it polls, and again when a payload does not
decode.

**The key canary.** Each task queue served with a codec has one small durable record of the
key its payloads are written with: a workflow execution ``_tnx-key-canary:{task_queue}``
(type :data:`CANARY_TYPE`) on a task queue nobody polls (:data:`CANARY_QUEUE_SUFFIX`), so it
never runs and stays until someone terminates it. Its memo :data:`CANARY_MEMO` holds a fixed
plaintext encrypted with the fleet's current key (memo payloads go to the server as given;
``DescribeWorkflowExecution`` returns them untouched). Temporal gives this for free: a
workflow id is unique per namespace, so when two workers race to create it one wins and the
other reads the winner's.

At start (:func:`check_worker_keys`, called by ``create_worker``):

* no canary, worker with a codec: it creates one with its current key;
* no canary, worker without one: a plain task queue, it starts;
* canary, worker without a codec: refused (:class:`KeyMismatchError`);
* canary the worker's keys do not decode (unknown key id, or the same id with another key:
  the GCM tag fails): refused;
* canary under an older key this worker also holds, its current key another (a rotation):
  the worker re-writes the canary with its current key, so from then on only workers that
  read the new key start. Rotation: deploy ``new,old`` everywhere, later drop ``old``.

At run time (:class:`KeyWatch`): a payload the worker's codec cannot decode makes it read
the canary again (at most every :data:`RECHECK_EVERY_S`); if the canary is now one its keys
cannot read (a worker started before the canary existed, or one left behind by a rotation),
the worker stops polling (``Worker.shutdown``) and says why. A stray payload under an unknown
key, with the canary still readable, fails only its own task, as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Final

from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.client.codec import (
    ENCODING,
    ENV_KEYS,
    KEY_ID_META,
    CodecError,
    data_converter,
)

logger = logging.getLogger(__name__)

CANARY_TYPE: Final = "tnx.KeyCanary"
"""The workflow type of the key canary (no worker registers it: it never runs)."""

CANARY_QUEUE_SUFFIX: Final = ".tnx-key-canary"
"""Appended to the task queue for the canary's own task queue, which nobody polls."""

CANARY_MEMO: Final = "tnx-key-canary"
"""The memo field holding the encrypted canary payload."""

CANARY_TEXT: Final = b'"toolnexus-temporal key canary v1"'
"""The canary's plaintext (a JSON string), checked after decryption."""

RECHECK_EVERY_S: Final = 10.0
"""How often, at most, a worker reads the canary again after payloads that did not decode
(s): a stream of bad payloads costs one ``DescribeWorkflowExecution`` per interval."""

_RPC_TIMEOUT: Final = timedelta(seconds=10)


def canary_workflow_id(task_queue: str) -> str:
    """The workflow id of ``task_queue``'s key canary (no scope starts with ``_``)."""
    return f"_tnx-key-canary:{task_queue}"


class KeyMismatchError(CodecError):
    """This worker's codec keys cannot read the payloads of its task queue, so it takes no
    work: the message names the key id and what to do.

    Attributes:
        task_queue: the task queue checked.
        key_id: the id of the key the task queue's payloads are written with (None when the
            canary names none).
        worker_key_ids: the key ids this worker has (empty: no codec).
    """

    def __init__(
        self,
        task_queue: str,
        key_id: str | None,
        worker_key_ids: Sequence[str],
        why: str,
    ) -> None:
        named = f"key id {key_id!r}" if key_id else "a payload codec"
        have = (
            f"this worker has keys {', '.join(worker_key_ids)}"
            if worker_key_ids
            else "this worker has no codec keys"
        )
        super().__init__(
            f"this worker cannot read the payloads of task queue {task_queue!r}: they are "
            f"encrypted with {named} and {have} ({why}); give it the fleet's keys "
            f"({ENV_KEYS} / --codec-keys, the current key first) and start it again"
        )
        self.task_queue = task_queue
        self.key_id = key_id
        self.worker_key_ids = tuple(worker_key_ids)


@dataclasses.dataclass(frozen=True)
class CanaryState:
    """The canary as read: its payload (None: no canary) and run id."""

    payload: Payload | None
    run_id: str | None

    @property
    def key_id(self) -> str | None:
        """The key id the canary names, None without one."""
        if self.payload is None:
            return None
        raw = self.payload.metadata.get(KEY_ID_META)
        return raw.decode("utf-8", "replace") if raw else None


def codec_key_ids(codec: PayloadCodec | None) -> tuple[str, ...]:
    """The key ids of ``codec`` (``AesGcmCodec.key_ids``), ``("?",)`` for another codec
    type, ``()`` for none."""
    if codec is None:
        return ()
    return tuple(getattr(codec, "key_ids", ("?",)))


async def read_canary(client: Client, task_queue: str) -> CanaryState:
    """The task queue's canary (a running canary workflow's memo field); ``payload`` None
    when there is none (never created, or terminated).

    Raises:
        RPCError: the describe failed for a reason other than NOT_FOUND.
    """
    wf: WorkflowHandle[object, object] = client.get_workflow_handle(canary_workflow_id(task_queue))
    try:
        desc = await wf.describe(rpc_timeout=_RPC_TIMEOUT)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return CanaryState(None, None)
        raise
    if desc.status != WorkflowExecutionStatus.RUNNING:
        return CanaryState(None, None)
    field = desc.raw_info.memo.fields.get(CANARY_MEMO)
    return CanaryState(field if field is not None else None, desc.run_id)


async def write_canary(
    client: Client, task_queue: str, codec: PayloadCodec, *, replace: bool
) -> bool:
    """Write the canary with ``codec``'s current key: create it (``replace`` False: True when
    this call created it, False when another worker's was there first), or replace the one
    there (``replace`` True: a rotation; returns True).

    Raises:
        RPCError: the server refused the start for another reason.
    """
    [sealed] = await codec.encode([Payload(metadata={"encoding": b"json/plain"}, data=CANARY_TEXT)])
    try:
        await client.start_workflow(
            CANARY_TYPE,
            id=canary_workflow_id(task_queue),
            task_queue=task_queue + CANARY_QUEUE_SUFFIX,
            memo={CANARY_MEMO: sealed},
            id_conflict_policy=(
                WorkflowIDConflictPolicy.TERMINATE_EXISTING
                if replace
                else WorkflowIDConflictPolicy.FAIL
            ),
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            static_summary=(
                f"toolnexus-temporal key canary of task queue {task_queue!r}: the key its "
                "payloads are encrypted with (never runs; workers check it at start)"
            ),
            rpc_timeout=_RPC_TIMEOUT,
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


async def _decodes(codec: PayloadCodec, payload: Payload) -> str | None:
    """None when ``codec`` decodes the canary to its plaintext, else why not."""
    try:
        [plain] = await codec.decode([payload])
    except CodecError as err:
        return str(err)
    except Exception as err:  # another codec's own error type
        return f"{type(err).__name__}: {err}"
    if plain.data != CANARY_TEXT:
        return "it decodes to something else than the canary's text"
    return None


def _encoded(payload: Payload) -> bool:
    return payload.metadata.get("encoding") != b"json/plain"


async def check_worker_keys(
    client: Client, task_queue: str, codec: PayloadCodec | None, *, write: bool = True
) -> str | None:
    """Check this worker's keys against ``task_queue``'s key canary (module docstring),
    creating it, or re-writing it with the current key after a rotation, as needed.

    Args:
        client: any client of the namespace (its converter is not used).
        task_queue: the task queue the worker is to poll.
        codec: the worker's payload codec (None: plain payloads).
        write: create the canary when there is none, re-write one under an older key this
            worker holds (False: only check; no canary passes).

    Returns:
        The key id the task queue's payloads are written with after the check (None: plain).

    Raises:
        KeyMismatchError: the canary is encrypted and ``codec`` is None, or ``codec`` does not
            decode it.
        RPCError: the server could not be asked (a PERMISSION_DENIED is logged and the check
            skipped instead: a worker role that may not start workflows still starts).
    """
    try:
        return await _check(client, task_queue, codec, write)
    except RPCError as err:
        if err.status != RPCStatusCode.PERMISSION_DENIED:
            raise
        logger.warning(
            "task queue %r: no key check (this worker may not read or start the key canary "
            "workflow %r: %s)",
            task_queue,
            canary_workflow_id(task_queue),
            err.message,
        )
        return None


async def _check(
    client: Client, task_queue: str, codec: PayloadCodec | None, write: bool
) -> str | None:
    state = await read_canary(client, task_queue)
    if state.payload is None:
        if codec is None or not write:
            return None
        if await write_canary(client, task_queue, codec, replace=False):
            return await _written_key(client, task_queue)
        state = await read_canary(client, task_queue)  # another worker's won the race
        if state.payload is None:
            return None
    payload = state.payload
    if codec is None:
        if not _encoded(payload):
            return None
        raise KeyMismatchError(task_queue, state.key_id, (), "it has no payload codec")
    why = await _decodes(codec, payload)
    if why is not None:
        raise KeyMismatchError(task_queue, state.key_id, codec_key_ids(codec), why)
    current = codec_key_ids(codec)[:1]
    if write and current and current[0] != "?" and state.key_id not in current:
        await write_canary(client, task_queue, codec, replace=True)
        logger.info(
            "task queue %r: key canary re-written with key id %r (was %r)",
            task_queue,
            current[0],
            state.key_id,
        )
        return await _check(client, task_queue, codec, False)
    return state.key_id


async def _written_key(client: Client, task_queue: str) -> str | None:
    return (await read_canary(client, task_queue)).key_id


class KeyWatch:
    """Reads the canary again when this worker's codec fails to decode a payload, and stops
    the worker when its keys no longer read the task queue's (module docstring).

    Args:
        client: a client of the namespace.
        task_queue: the worker's task queue.
        codec: the worker's codec (None: a worker without one).
    """

    def __init__(self, client: Client, task_queue: str, codec: PayloadCodec | None) -> None:
        self.client = client
        self.task_queue = task_queue
        self.codec = codec
        self.stale: KeyMismatchError | None = None
        """Why the worker stopped, once it has (None while its keys read the canary)."""
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._checked_at = 0.0

    def notice(self) -> None:
        """A payload did not decode with this worker's codec (thread-safe, never raises)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:  # the loop closed meanwhile
            pass

    async def run(self, stop: Callable[[], object]) -> None:
        """Until cancelled: after each :meth:`notice`, check the keys again (at most every
        :data:`RECHECK_EVERY_S`); on a mismatch, log it, set :attr:`stale` and call ``stop``
        (which shuts the worker down) and return."""
        self._loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            pause = self._checked_at + RECHECK_EVERY_S - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
            self._wake.clear()
            self._checked_at = time.monotonic()
            try:
                await check_worker_keys(self.client, self.task_queue, self.codec, write=False)
            except KeyMismatchError as err:
                self.stale = err
                logger.error("stopping the worker: %s", err)
                result = stop()
                if asyncio.iscoroutine(result):
                    await result
                return
            except Exception:  # the server could not be asked: try again on the next notice
                logger.warning("key check after an undecodable payload failed", exc_info=True)


class WatchedCodec(PayloadCodec):
    """A worker's codec that tells its :class:`KeyWatch` when a payload does not decode;
    with ``inner`` None (a worker without keys) it passes plain payloads and refuses
    encrypted ones with a :class:`~toolnexus_temporal.client.codec.CodecError` naming the key
    id.

    Args:
        inner: the worker's codec, or None.
        watch: told of every payload that does not decode.
    """

    def __init__(self, inner: PayloadCodec | None, watch: KeyWatch) -> None:
        self.inner = inner
        self.watch = watch

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The inner codec's key ids (``()`` without one)."""
        return codec_key_ids(self.inner)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """The inner codec's encoding (payloads unchanged without one)."""
        if self.inner is None:
            return list(payloads)
        return await self.inner.encode(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """The inner codec's decoding; a failure is told to the watch, then raised.

        Raises:
            CodecError: a payload does not decode (without an inner codec: any encrypted
                payload).
        """
        if self.inner is None:
            for p in payloads:
                if p.metadata.get("encoding") == ENCODING:
                    self.watch.notice()
                    key_id = p.metadata.get(KEY_ID_META, b"").decode("utf-8", "replace")
                    raise CodecError(
                        f"payload encrypted with key id {key_id!r}, and this worker has no "
                        f"codec keys: give it the keys ({ENV_KEYS} / --codec-keys)"
                    )
            return list(payloads)
        try:
            return await self.inner.decode(payloads)
        except Exception:
            self.watch.notice()
            raise


def worker_converter(
    base: DataConverter, codec: PayloadCodec | None, watch: KeyWatch
) -> DataConverter:
    """The data converter of a worker whose codec is ``codec`` (``base``: its client's):
    with a codec, :func:`~toolnexus_temporal.client.codec.data_converter` of it wrapped in a
    :class:`WatchedCodec`; without one, ``base`` with a keyless :class:`WatchedCodec` (plain
    payloads and failures, as before)."""
    watched = WatchedCodec(codec, watch)
    if codec is None:
        return dataclasses.replace(base, payload_codec=watched)
    if base.payload_codec is codec:
        return dataclasses.replace(base, payload_codec=watched)
    return data_converter(watched)
