"""A blocking connection to one broker: framed requests encoded with protocol/'s codecs, one at a time.

`BrokerConnection.call(api_key, version, body)` sends a request and returns the decoded response body. Versions
are negotiated once with ApiVersions: `version(api_key, lowest, highest)` picks the highest version both sides
serve, or raises UnsupportedVersionError. Any socket failure closes the connection and raises
`ConnectionLost`; the caller decides whether to reconnect. Not thread-safe: callers serialize (each user of a
connection holds its own lock).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import ssl
from typing import TYPE_CHECKING

from construct import Container

from protocol.codec import request_codec, response_codec
from protocol.framing import (
    FrameSizeError,
    RequestHeader,
    decode_response_header,
    encode_request,
    frame_size,
    response_header_version,
)
from protocol.schema import api_specs

if TYPE_CHECKING:
    from shoal_client.security import ClientSecurity

API_VERSIONS = 18
_MAX_RESPONSE = 1 << 30


class ConnectionLost(ConnectionError):
    """The connection broke (or never opened); it is closed and must be replaced."""


class UnsupportedVersionError(RuntimeError):
    """The broker does not serve a version of an API that this client needs."""


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """"host:port,host:port" -> [(host, port), ...]; ValueError for a malformed entry."""
    out = []
    for entry in servers.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"bootstrap server {entry!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


class BrokerConnection:
    def __init__(self, host: str, port: int, *, client_id: str, timeout_s: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        """`security` (shoal_client.security): TLS and/or SASL before anything else is sent."""
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._ids = itertools.count(1)
        self._versions: dict[int, tuple[int, int]] = {}
        try:
            self._sock: socket.socket | None = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as err:
            raise ConnectionLost(f"cannot connect to {host}:{port}: {err}") from err
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if security is not None:
            try:
                self._sock = security.wrap(self._sock, host)
                security.authenticate(self.call)
            except (OSError, ssl.SSLError) as err:
                self.close()
                raise ConnectionLost(f"cannot connect securely to {host}:{port}: {err}") from err
            except Exception:
                self.close()
                raise
        self._negotiate()

    @property
    def closed(self) -> bool:
        return self._sock is None

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _negotiate(self) -> None:
        ours = api_specs()[API_VERSIONS]
        resp = self.call(API_VERSIONS, min(3, ours.max_version), {
            "client_software_name": "shoal-client", "client_software_version": "0.1.0"})
        if resp.error_code != 0:
            self.close()
            raise ConnectionLost(f"ApiVersions to {self.host}:{self.port} failed with error {resp.error_code}")
        self._versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    def version(self, api_key: int, lowest: int, highest: int | None = None) -> int:
        """The highest version of `api_key` in [lowest, highest] that the broker and our schemas both serve."""
        theirs = self._versions.get(api_key)
        spec = api_specs().get(api_key)
        top = spec.max_version if spec else -1
        if highest is not None:
            top = min(top, highest)
        if theirs is not None:
            top = min(top, theirs[1])
            if top >= max(lowest, theirs[0]):
                return top
        name = spec.name if spec else str(api_key)
        raise UnsupportedVersionError(
            f"broker {self.host}:{self.port} does not serve {name} v{lowest}+ (it serves {theirs or 'none'})")

    def call(self, api_key: int, version: int, body: dict, *, timeout_s: float | None = None,
             views: bool = False) -> Container:
        """Send one request and wait for its response (`timeout_s` beyond the default, e.g. for long polls).
        `views`: bytes and records fields are read-only memoryview slices of the received frame, not copies."""
        sock = self._sock
        if sock is None:
            raise ConnectionLost(f"connection to {self.host}:{self.port} is closed")
        correlation_id = next(self._ids)
        frame = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id),
                               request_codec(api_key, version).encode(body))
        try:
            sock.settimeout(self.timeout_s if timeout_s is None else timeout_s)
            sock.sendall(frame)
            # one response at a time: the prefix, then exactly that many bytes into one buffer (no copies)
            size = frame_size(self._recv_exact(sock, 4), _MAX_RESPONSE)
            assert size is not None  # the whole prefix is there
            data = self._recv_exact(sock, size)
        except FrameSizeError as err:
            self.close()
            raise ConnectionLost(f"bad response size {err.size} from {self.host}:{self.port}") from None
        except OSError as err:
            self.close()
            raise ConnectionLost(f"connection to {self.host}:{self.port} failed: {err}") from err
        except ConnectionLost:
            self.close()
            raise
        # the header is decoded in place: decoding copies nothing of the (maybe tens of MB) frame
        got, offset = decode_response_header(data, response_header_version(api_key, version))
        if got != correlation_id:
            self.close()
            raise ConnectionLost(f"response correlation id {got}, expected {correlation_id}")
        return response_codec(api_key, version).decode(memoryview(data)[offset:], views=views)

    @staticmethod
    def _recv_exact(sock: socket.socket, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        pos = 0
        while pos < n:
            got = sock.recv_into(view[pos:], n - pos)
            if got == 0:
                raise ConnectionLost("connection closed by the broker")
            pos += got
        return buf
