"""Encryption at rest: an AES-256-GCM payload codec with key ids and key rotation.

Every payload the client and the worker hand to Temporal (update and signal arguments, the
prompts in them, activity inputs and results, i.e. LLM replies, tool arguments and tool
results, query results, workflow results, memo and user metadata) goes through the data
converter; with :func:`data_converter` ``(codec)`` the pydantic converter's JSON is encrypted
before it leaves the process. Search attributes are never encoded (Temporal indexes them):
ours hold no user text (state, agent name, parent id, depth).

Wire format of an encrypted payload (the one Temporal's encryption samples use, so their codec
servers interoperate): metadata ``encoding: binary/encrypted`` and ``encryption-key-id: <id>``;
data = 12-byte random nonce + AES-GCM ciphertext and tag of the serialized inner
``Payload`` (metadata and data of the plain payload).

Keys (:func:`parse_keys`): ``id:base64key`` entries separated by commas or new lines, the
first is the current one (used to encode), every one decodes. Environment: ``TNX_CODEC_KEYS``
(the entries) or ``TNX_CODEC_KEY_FILE`` (a file of entries, ``#`` comments allowed); see
:func:`codec_from_env`. A new key: ``python -c "import os,base64;
print(base64.b64encode(os.urandom(32)).decode())"``.

Needs the ``cryptography`` package (``pip install 'toolnexus-temporal[codec]'``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from temporalio.api.common.v1 import Payload
from temporalio.api.errordetails.v1 import QueryFailedFailure
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
    PayloadConverter,
)
from temporalio.service import RPCError

from toolnexus_temporal.client.errors import TnxError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

ENCODING: Final = b"binary/encrypted"
"""The ``encoding`` metadata of an encrypted payload."""

KEY_ID_META: Final = "encryption-key-id"
"""The metadata entry naming the key a payload was encrypted with."""

KEY_BYTES: Final = 32
"""AES-256: every key is exactly 32 bytes."""

NONCE_BYTES: Final = 12
"""The GCM nonce prepended to each ciphertext (random per payload)."""

ENV_KEYS: Final = "TNX_CODEC_KEYS"
"""Environment variable with the key entries (``id1:base64,id2:base64``; first is current)."""

ENV_KEY_FILE: Final = "TNX_CODEC_KEY_FILE"
"""Environment variable with the path of a key file (same entries, one per line)."""

FAILURE_META: Final = "tnx-failure-text"
"""Metadata (in the clear) of an encrypted payload that holds only a failure's message and
stack trace (the failure's encoded attributes, :class:`FailureConverter`)."""

_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class CodecError(TnxError):
    """A payload cannot be encrypted or decrypted, or the key configuration is unusable.

    The message names the key id involved and what to do."""


class CodecKeyError(CodecError):
    """The key configuration is malformed (bad entry, key not 32 bytes, duplicate id)."""


class UnknownKeyError(CodecError):
    """A payload was encrypted with a key id this codec does not know.

    Attributes:
        key_id: the id found in the payload's metadata.
    """

    def __init__(self, key_id: str, known: Sequence[str]) -> None:
        super().__init__(
            f"payload encrypted with key id {key_id!r}, which is not among the known keys "
            f"({', '.join(known)}): add that key to {ENV_KEYS} or the key file"
        )
        self.key_id = key_id


def _aesgcm(key: bytes) -> AESGCM:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as err:  # pragma: no cover - depends on the installed extras
        raise CodecError(
            "the payload codec needs the cryptography package: "
            "pip install 'toolnexus-temporal[codec]'"
        ) from err
    return AESGCM(key)


class AesGcmCodec(PayloadCodec):
    """AES-256-GCM payload codec: encodes with the current key, decodes with any known key.

    Args:
        keys: key id → 32-byte key, in order; the first is the current (encoding) key.
            Rotation: put the new key first and keep the old ones for as long as histories
            written under them must be read.

    Payloads without ``encoding: binary/encrypted`` pass :meth:`decode` unchanged (histories
    written before the codec was turned on stay readable).

    Raises:
        CodecKeyError: no keys, a key id that is not ``[A-Za-z0-9._-]{1,64}``, or a key that is
            not 32 bytes.
    """

    def __init__(self, keys: Mapping[str, bytes]) -> None:
        if not keys:
            raise CodecKeyError("no encryption keys given (need at least one id:base64key)")
        for key_id, key in keys.items():
            _check_key(key_id, key)
        self.key_ids: tuple[str, ...] = tuple(keys)
        """Every known key id; the first is the current one."""
        self._ciphers = {key_id: _aesgcm(bytes(key)) for key_id, key in keys.items()}

    @property
    def current_key_id(self) -> str:
        """The id of the key new payloads are encrypted with."""
        return self.key_ids[0]

    def encode_one(self, payload: Payload) -> Payload:
        """Encrypt one payload with the current key (synchronous; see :meth:`encode`). A
        failure's text (:data:`FAILURE_META` on the plain payload) keeps that mark in the
        clear, so a reader without this key still reads the failure (:meth:`decode_one`)."""
        key_id = self.current_key_id
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[key_id].encrypt(nonce, payload.SerializeToString(), None)
        metadata = {"encoding": ENCODING, KEY_ID_META: key_id.encode()}
        if payload.metadata.get(FAILURE_META):
            metadata[FAILURE_META] = b"1"
        return Payload(metadata=metadata, data=nonce + sealed)

    def decode_one(self, payload: Payload) -> Payload:
        """Decrypt one payload (synchronous; see :meth:`decode`).

        A failure's text (:data:`FAILURE_META`) under a key this codec cannot read decodes to
        a message saying so (:func:`unreadable_failure_text`) instead of raising: a worker
        with another key that failed an activity must not stop the agent's every later
        workflow task (issue 23, item 4).

        Raises:
            UnknownKeyError: the payload names a key id this codec does not know.
            CodecError: no key id, too short, or the authentication tag does not match (wrong
                key under that id, or the payload was altered).
        """
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        if payload.metadata.get(FAILURE_META):
            try:
                return self._decrypt(payload)
            except CodecError as err:
                return unreadable_failure_text(err)
        return self._decrypt(payload)

    def _decrypt(self, payload: Payload) -> Payload:
        raw_id = payload.metadata.get(KEY_ID_META)
        if not raw_id:
            raise CodecError(f"encrypted payload has no {KEY_ID_META!r} metadata")
        key_id = raw_id.decode("utf-8", "replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UnknownKeyError(key_id, self.key_ids)
        if len(payload.data) <= NONCE_BYTES:
            raise CodecError(f"encrypted payload (key id {key_id!r}) is truncated")
        from cryptography.exceptions import InvalidTag

        try:
            plain = cipher.decrypt(payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:], None)
        except InvalidTag:
            raise CodecError(
                f"payload encrypted with key id {key_id!r} does not decrypt: the key configured "
                "under that id is not the one it was written with, or the payload was altered"
            ) from None
        return Payload.FromString(plain)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Encrypt every payload with the current key (see :meth:`encode_one`)."""
        return [self.encode_one(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Decrypt every encrypted payload; others pass unchanged (see :meth:`decode_one`)."""
        return [self.decode_one(p) for p in payloads]


def unreadable_failure_text(err: CodecError) -> Payload:
    """The stand-in for a failure's encrypted text this codec cannot read: a failure's
    encoded attributes (JSON ``message`` and ``stack_trace``) whose message says why."""
    text = json.dumps(
        {
            "message": f"a failure whose text this process cannot read ({err}): it was "
            "written by a worker with other codec keys",
            "stack_trace": "",
        }
    )
    return Payload(metadata={"encoding": b"json/plain"}, data=text.encode())


class FailureConverter(DefaultFailureConverterWithEncodedAttributes):
    """Failures with their message and stack trace in encoded (encrypted) attributes, each
    marked :data:`FAILURE_META` so that a codec without the writer's key reads a stand-in
    text rather than failing (:meth:`AesGcmCodec.decode_one`)."""

    def to_failure(
        self,
        exception: BaseException,
        payload_converter: PayloadConverter,
        failure: Failure,
    ) -> None:
        """See ``DefaultFailureConverterWithEncodedAttributes``; marks the encoded attributes
        (of the failure and, through the recursion, of each cause)."""
        super().to_failure(exception, payload_converter, failure)
        if failure.HasField("encoded_attributes"):
            failure.encoded_attributes.metadata[FAILURE_META] = b"1"


def _check_key(key_id: str, key: bytes) -> None:
    if not _KEY_ID.match(key_id):
        raise CodecKeyError(
            f"bad encryption key id {key_id!r}: use 1-64 characters of letters, digits, '.', "
            "'_' or '-'"
        )
    if len(key) != KEY_BYTES:
        raise CodecKeyError(
            f"encryption key {key_id!r} is {len(key)} bytes; AES-256 needs exactly {KEY_BYTES} "
            "(base64 of 32 random bytes: 44 characters)"
        )


def parse_keys(spec: str) -> dict[str, bytes]:
    """Parse key entries ``id:base64key`` separated by commas or new lines (blank lines and
    ``#`` comments skipped), in order: the first is the current key.

    Raises:
        CodecKeyError: an entry without ``:``, bad base64, a duplicate id, a bad id or a key
            that is not 32 bytes (the message names the entry's id, never the key).
    """
    keys: dict[str, bytes] = {}
    for line in spec.splitlines():
        line = line.split("#", 1)[0]
        for entry in line.split(","):
            entry = entry.strip()
            if not entry:
                continue
            key_id, sep, b64 = entry.partition(":")
            key_id = key_id.strip()
            if not sep:
                raise CodecKeyError(
                    f"bad encryption key entry starting {entry[:8]!r}...: expected id:base64key"
                )
            try:
                key = base64.b64decode(b64.strip(), validate=True)
            except (binascii.Error, ValueError):
                raise CodecKeyError(f"encryption key {key_id!r} is not valid base64") from None
            if key_id in keys:
                raise CodecKeyError(f"encryption key id {key_id!r} is given twice")
            _check_key(key_id, key)
            keys[key_id] = key
    if not keys:
        raise CodecKeyError("no encryption keys given (need at least one id:base64key)")
    return keys


def codec_from_keys(keys: str | None = None, key_file: str | Path | None = None) -> AesGcmCodec:
    """Build the codec from key entries and/or a key file (entries first, then the file's).

    Raises:
        CodecKeyError: neither given, the file is unreadable, or an entry is bad.
    """
    spec = keys or ""
    if key_file:
        try:
            spec += "\n" + Path(key_file).read_text()
        except OSError as err:
            raise CodecKeyError(f"cannot read the key file {key_file}: {err.strerror}") from err
    return AesGcmCodec(parse_keys(spec))


def codec_from_env(env: Mapping[str, str] | None = None) -> AesGcmCodec | None:
    """The codec configured by ``TNX_CODEC_KEYS`` / ``TNX_CODEC_KEY_FILE``, or None when
    neither is set (no encryption).

    Raises:
        CodecKeyError: a variable is set but the keys are unusable.
    """
    env = os.environ if env is None else env
    keys, key_file = env.get(ENV_KEYS), env.get(ENV_KEY_FILE)
    if not keys and not key_file:
        return None
    return codec_from_keys(keys, key_file)


def data_converter(codec: PayloadCodec | None) -> DataConverter:
    """The runtime's data converter: pydantic JSON, then ``codec`` when given.

    With a codec, failures carry their message and stack trace in encoded attributes too
    (:class:`FailureConverter`): an error text can quote a prompt or a tool argument.
    Without one, this is ``pydantic_data_converter`` itself.
    """
    if codec is None:
        return pydantic_data_converter
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=codec,
        failure_converter_class=FailureConverter,
    )


def with_codec(client: Client, codec: PayloadCodec | None) -> Client:
    """``client`` itself when ``codec`` is None, else a client on the same connection and
    namespace whose data converter is :func:`data_converter` ``(codec)``."""
    if codec is None:
        return client
    config = client.config()
    config["data_converter"] = data_converter(codec)
    return Client(**config)


ENCODED_FAILURE: Final = "Encoded failure"
"""The message a failure carries in the clear when its real one is encoded (encrypted)."""


async def readable_query_failure(
    client: Client, err: WorkflowQueryFailedError
) -> WorkflowQueryFailedError:
    """``err`` with its real message when the worker encrypted it.

    The SDK raises a failed query as ``WorkflowQueryFailedError`` with the RPC's message only,
    which with a codec is ``"Encoded failure"``; the failure itself rides in the RPC status
    details (``QueryFailedFailure``). Decode it with ``client``'s converter; when that is not
    possible (no codec, unknown key), the message says so.
    """
    rpc = err.__context__
    if err.message != ENCODED_FAILURE or not isinstance(rpc, RPCError):
        return err
    for detail in rpc.grpc_status.details:
        query_failure = QueryFailedFailure()
        if not detail.Unpack(query_failure) or not query_failure.HasField("failure"):
            continue
        try:
            decoded = await client.data_converter.decode_failure(query_failure.failure)
        except Exception as why:
            return WorkflowQueryFailedError(f"{ENCODED_FAILURE} (cannot decode it: {why})")
        return WorkflowQueryFailedError(str(decoded))
    return err
