"""A TLS-terminating TCP proxy in front of the session's dev server (which has no TLS flags),
and the certificates for it, made with ``cryptography``: tests/test_cluster_tls.py.

The proxy speaks TLS with ALPN ``h2`` (so gRPC works), optionally requires a client
certificate signed by its CA (mutual TLS), and forwards the plain bytes to the dev server. It
also reads the HTTP/2 HEADERS frames the client sends (HPACK-decoded with ``hpack``), so a
test can see what metadata reached the server (``authorization: Bearer ...``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import hpack
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@dataclass
class Pki:
    """PEM files of one test PKI in ``folder``: a CA, a server certificate for
    ``localhost``/``127.0.0.1`` and a client certificate, both signed by the CA."""

    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def server_cert(self) -> Path:
        return self.folder / "server.pem"

    @property
    def server_key(self) -> Path:
        return self.folder / "server.key"

    @property
    def client_cert(self) -> Path:
        return self.folder / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.folder / "client.key"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_pki(folder: Path, label: str = "tnx test") -> Pki:
    """Write a fresh CA, a server and a client certificate into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = _key()
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{label} CA"))
        .issuer_name(_name(f"{label} CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pki = Pki(folder)
    pki.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    def leaf(common: str, server: bool) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = _key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [
                        x509.ExtendedKeyUsageOID.SERVER_AUTH
                        if server
                        else x509.ExtendedKeyUsageOID.CLIENT_AUTH
                    ]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return builder.sign(ca_key, hashes.SHA256()), key

    server_cert, server_key = leaf("localhost", server=True)
    pki.server_cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.server_key, server_key)
    client_cert, client_key = leaf("tnx test client", server=False)
    pki.client_cert.write_bytes(client_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.client_key, client_key)
    return pki


class HeaderReader:
    """Reads the client's HTTP/2 frames as they pass and keeps the decoded request headers."""

    def __init__(self, sink: list[dict[str, str]]) -> None:
        self.buffer = b""
        self.preface_seen = False
        self.decoder = hpack.Decoder()
        self.block = b""
        self.sink = sink

    def feed(self, data: bytes) -> None:
        self.buffer += data
        if not self.preface_seen:
            if len(self.buffer) < len(PREFACE):
                return
            self.buffer = self.buffer[len(PREFACE) :]
            self.preface_seen = True
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[:3], "big")
            kind, flags = self.buffer[3], self.buffer[4]
            if len(self.buffer) < 9 + length:
                return
            payload, self.buffer = self.buffer[9 : 9 + length], self.buffer[9 + length :]
            if kind == 0x1:  # HEADERS
                if flags & 0x8:  # PADDED
                    pad = payload[0]
                    payload = payload[1 : len(payload) - pad]
                if flags & 0x20:  # PRIORITY
                    payload = payload[5:]
                self.block = payload
            elif kind == 0x9:  # CONTINUATION
                self.block += payload
            else:
                continue
            if flags & 0x4:  # END_HEADERS
                decoded = self.decoder.decode(self.block)
                self.sink.append({str(k): str(v) for k, v in decoded})
                self.block = b""


@dataclass
class TlsProxy:
    """A running proxy: ``address`` (``127.0.0.1:port``) and the request headers it saw."""

    address: str
    headers: list[dict[str, str]] = field(default_factory=list)
    handshake_errors: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def tls_proxy(
    pki: Pki, upstream: str, *, require_client_cert: bool = False
) -> AsyncIterator[TlsProxy]:
    """Serve TLS on a free loopback port and forward each connection to ``upstream``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.server_cert, pki.server_key)
    ctx.set_alpn_protocols(["h2"])
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(pki.ca)
    host, port = upstream.rsplit(":", 1)
    tasks: set[asyncio.Task[None]] = set()
    proxy = TlsProxy(address="")

    async def pump(
        src: asyncio.StreamReader, dst: asyncio.StreamWriter, reader: HeaderReader | None
    ) -> None:
        try:
            while data := await src.read(65536):
                if reader is not None:
                    reader.feed(data)
                dst.write(data)
                await dst.drain()
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        watch = HeaderReader(proxy.headers)
        both = asyncio.gather(pump(reader, up_writer, watch), pump(up_reader, writer, None))
        task = asyncio.ensure_future(both)
        tasks.add(task)  # type: ignore[arg-type]
        try:
            await task
        except asyncio.CancelledError:
            pass  # the proxy is closing
        finally:
            tasks.discard(task)  # type: ignore[arg-type]

    def on_error(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        proxy.handshake_errors.append(str(context.get("exception") or context.get("message")))

    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    sockname = server.sockets[0].getsockname()
    proxy.address = f"127.0.0.1:{sockname[1]}"
    loop.set_exception_handler(on_error)  # failed handshakes are expected in some tests
    try:
        yield proxy
    finally:
        loop.set_exception_handler(previous)
        server.close()
        for task in list(tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)
