"""The AES-256-GCM payload codec and its key configuration (no server)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.client.codec import (
    AesGcmCodec,
    CodecError,
    CodecKeyError,
    UnknownKeyError,
    codec_from_env,
    codec_from_keys,
    data_converter,
    parse_keys,
)
from toolnexus_temporal.workflows.contract.models import InboxItem

KEY_A = bytes(range(32))
KEY_B = bytes(range(32, 64))
SECRET = b"the prompt holds SECRET-MARKER-42"


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def plain(data: bytes = SECRET) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=data)


async def test_encrypted_payload_hides_the_data_and_names_the_key() -> None:
    codec = AesGcmCodec({"a": KEY_A})
    [enc] = await codec.encode([plain()])
    assert enc.metadata["encoding"] == b"binary/encrypted"
    assert enc.metadata["encryption-key-id"] == b"a"
    assert b"SECRET-MARKER" not in enc.SerializeToString()
    assert b"json/plain" not in enc.SerializeToString()  # inner metadata encrypted too
    [dec] = await codec.decode([enc])
    assert dec == plain()


async def test_each_encryption_uses_a_fresh_nonce() -> None:
    codec = AesGcmCodec({"a": KEY_A})
    first, second = await codec.encode([plain(), plain()])
    assert first.data[:12] != second.data[:12] and first.data != second.data


async def test_plain_payloads_pass_decode_unchanged() -> None:
    """Histories written before the codec was turned on stay readable."""
    codec = AesGcmCodec({"a": KEY_A})
    assert await codec.decode([plain()]) == [plain()]


async def test_rotation_encodes_with_the_first_key_and_decodes_with_any() -> None:
    old = AesGcmCodec({"a": KEY_A})
    [under_a] = await old.encode([plain()])
    rotated = AesGcmCodec({"b": KEY_B, "a": KEY_A})
    assert rotated.current_key_id == "b"
    [under_b] = await rotated.encode([plain()])
    assert under_b.metadata["encryption-key-id"] == b"b"
    assert await rotated.decode([under_a, under_b]) == [plain(), plain()]


async def test_unknown_key_id_is_a_clear_error_naming_it() -> None:
    [under_a] = await AesGcmCodec({"a": KEY_A}).encode([plain()])
    with pytest.raises(UnknownKeyError, match=r"key id 'a'.*known keys \(b\)") as info:
        await AesGcmCodec({"b": KEY_B}).decode([under_a])
    assert info.value.key_id == "a"


async def test_wrong_key_under_a_known_id_and_tampering_are_refused() -> None:
    [enc] = await AesGcmCodec({"a": KEY_A}).encode([plain()])
    with pytest.raises(CodecError, match="key id 'a' does not decrypt"):
        await AesGcmCodec({"a": KEY_B}).decode([enc])
    tampered = Payload()
    tampered.CopyFrom(enc)
    tampered.data = enc.data[:-1] + bytes([enc.data[-1] ^ 1])
    with pytest.raises(CodecError, match="does not decrypt"):
        await AesGcmCodec({"a": KEY_A}).decode([tampered])
    no_id = Payload(metadata={"encoding": b"binary/encrypted"}, data=enc.data)
    with pytest.raises(CodecError, match="no 'encryption-key-id'"):
        await AesGcmCodec({"a": KEY_A}).decode([no_id])


def test_parse_keys_keeps_order_and_skips_blanks_and_comments() -> None:
    spec = f"# rotated 2026-12\nb:{b64(KEY_B)}\n\n a : {b64(KEY_A)} , # old\n"
    assert list(parse_keys(spec).items()) == [("b", KEY_B), ("a", KEY_A)]
    assert list(parse_keys(f"b:{b64(KEY_B)},a:{b64(KEY_A)}")) == ["b", "a"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "no encryption keys"),
        ("# only a comment", "no encryption keys"),
        (f"k:{b64(b'short')}", "'k' is 5 bytes; AES-256 needs exactly 32"),
        (f"k:{b64(bytes(33))}", "'k' is 33 bytes"),
        ("k:not*base64", "'k' is not valid base64"),
        (b64(KEY_A), "expected id:base64key"),
        (f"k:{b64(KEY_A)},k:{b64(KEY_B)}", "'k' is given twice"),
        (f"bad id:{b64(KEY_A)}", "bad encryption key id 'bad id'"),
    ],
)
def test_bad_key_configuration_is_a_clear_error(spec: str, message: str) -> None:
    with pytest.raises(CodecKeyError, match=message) as info:
        parse_keys(spec)
    assert b64(KEY_A) not in str(info.value)  # a key never appears in a message


def test_codec_refuses_a_key_of_the_wrong_size() -> None:
    with pytest.raises(CodecKeyError, match="16 bytes"):
        AesGcmCodec({"a": bytes(16)})
    with pytest.raises(CodecKeyError, match="no encryption keys"):
        AesGcmCodec({})


def test_keys_from_the_environment_and_a_file(tmp_path: Path) -> None:
    assert codec_from_env({}) is None
    codec = codec_from_env({"TNX_CODEC_KEYS": f"b:{b64(KEY_B)},a:{b64(KEY_A)}"})
    assert codec is not None and codec.key_ids == ("b", "a")
    key_file = tmp_path / "keys"
    key_file.write_text(f"# current first\nc:{b64(os.urandom(32))}\na:{b64(KEY_A)}\n")
    from_file = codec_from_env({"TNX_CODEC_KEY_FILE": str(key_file)})
    assert from_file is not None and from_file.key_ids == ("c", "a")
    assert codec_from_keys(f"b:{b64(KEY_B)}", key_file).key_ids == ("b", "c", "a")
    with pytest.raises(CodecKeyError, match="cannot read the key file"):
        codec_from_env({"TNX_CODEC_KEY_FILE": str(tmp_path / "missing")})


async def test_data_converter_encrypts_models_and_failure_messages() -> None:
    converter = data_converter(AesGcmCodec({"a": KEY_A}))
    item = InboxItem(from_="x", channel="c", text="SECRET-MARKER-7")
    [payload] = await converter.encode([item])
    assert b"SECRET-MARKER" not in payload.SerializeToString()
    assert await converter.decode([payload], [InboxItem]) == [item]

    failure = Failure()
    await converter.encode_failure(ApplicationError("tool said SECRET-MARKER-8"), failure)
    assert b"SECRET-MARKER" not in failure.SerializeToString()
    err = await converter.decode_failure(failure)
    assert "SECRET-MARKER-8" in str(err)


def test_without_a_codec_the_converter_is_the_plain_pydantic_one() -> None:
    from temporalio.contrib.pydantic import pydantic_data_converter

    assert data_converter(None) is pydantic_data_converter


async def test_a_failure_under_a_key_this_codec_lacks_reads_as_a_stand_in() -> None:
    """A failure a worker with other keys wrote (issue 23 item 4): its text decodes to a
    message naming the key id instead of failing the reader's workflow task; any other
    payload under that key still raises."""
    writer = data_converter(AesGcmCodec({"k1": KEY_B}))
    failure = Failure()
    await writer.encode_failure(ApplicationError("Failed decoding arguments"), failure)
    assert failure.message == "Encoded failure"
    assert failure.encoded_attributes.metadata["tnx-failure-text"] == b"1"
    assert SECRET not in failure.SerializeToString()
    same_id = data_converter(AesGcmCodec({"k1": KEY_A}))
    other_id = data_converter(AesGcmCodec({"k2": KEY_A}))
    for reader, why in [(same_id, "does not decrypt"), (other_id, "not among the known keys")]:
        copy = Failure()
        copy.CopyFrom(failure)
        err = await reader.decode_failure(copy)
        assert "cannot read" in str(err) and "key id 'k1'" in str(err) and why in str(err)
    # The writer's own fleet reads the real text.
    own = await data_converter(AesGcmCodec({"k1": KEY_B})).decode_failure(failure)
    assert str(own) == "Failed decoding arguments"
    with pytest.raises(CodecError, match="does not decrypt"):
        AesGcmCodec({"k1": KEY_A}).decode_one(AesGcmCodec({"k1": KEY_B}).encode_one(plain()))
