"""A minimal blocking Kafka client for raw-protocol tests: encode with our codecs, one request at a time."""

from __future__ import annotations

import itertools
import socket
import struct

from protocol.codec import request_codec, response_codec
from protocol.framing import RequestHeader, decode_response_header, encode_request, response_header_version


class RawClient:
    def __init__(self, port: int, client_id: str = "raw-test") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.client_id = client_id
        self._ids = itertools.count(1)

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: dict) -> int:
        correlation_id = next(self._ids)
        payload = request_codec(api_key, version).encode(body)
        header = RequestHeader(api_key, version, correlation_id, self.client_id)
        self.sock.sendall(encode_request(header, payload))
        return correlation_id

    def receive(self, api_key: int, version: int, correlation_id: int):
        size = struct.unpack(">i", self._recv_exact(4))[0]
        frame = self._recv_exact(size)
        got, offset = decode_response_header(frame, response_header_version(api_key, version))
        assert got == correlation_id, (got, correlation_id)
        return response_codec(api_key, version).decode(frame[offset:])

    def call(self, api_key: int, version: int, body: dict):
        return self.receive(api_key, version, self.send(api_key, version, body))

    def _recv_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks += chunk
        return bytes(chunks)
