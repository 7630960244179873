"""Client-side security for BrokerConnection: TLS and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

Built from Kafka client properties (a `--command-config` file):

    security.protocol   PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl.mechanism      PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl.jaas.config    ...LoginModule required username="u" password="p";   (Java clients' form)
    sasl.username / sasl.password                                               (librdkafka's form)
    ssl.ca.location or ssl.truststore.location (PEM)      CA certificates to trust; default: the system's
    ssl.certificate.location + ssl.key.location, or ssl.keystore.location (PEM with the key): client certificate
    ssl.key.password or ssl.keystore.password: the private key's password
    ssl.endpoint.identification.algorithm   "https" (default) checks the broker's host name; "" does not

Java keystores (JKS, PKCS12) are not read: give PEM files. Other properties are ignored (`unused`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = {"PLAIN": None, "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
KNOWN = {"security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password",
         "ssl.ca.location", "ssl.truststore.location", "ssl.truststore.type", "ssl.certificate.location",
         "ssl.key.location", "ssl.keystore.location", "ssl.keystore.type", "ssl.key.password",
         "ssl.keystore.password", "ssl.endpoint.identification.algorithm", "bootstrap.servers", "client.id",
         "request.timeout.ms", "default.api.timeout.ms"}


class SecurityConfigError(ValueError):
    """A security property that cannot be used (unknown protocol or mechanism, missing credentials)."""


class AuthenticationError(RuntimeError):
    """The broker refused the credentials (SASL_AUTHENTICATION_FAILED and its message)."""


def load_properties(path: str) -> dict[str, str]:
    """A Java properties file (key=value or key: value, # and ! comments, backslash line continuations)."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        pending = ""
        for raw in f:
            line = pending + raw.rstrip("\n").lstrip()
            pending = ""
            if line.endswith("\\") and not line.endswith("\\\\"):
                pending = line[:-1]
                continue
            if not line or line[0] in "#!":
                continue
            m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
            if m:
                out[m.group(1)] = m.group(2).strip()
            else:
                out[line.strip()] = ""
    return out


def _jaas_value(jaas: str, key: str) -> str | None:
    m = re.search(rf'\b{key}\s*=\s*"((?:[^"\\]|\\.)*)"', jaas)
    return m.group(1).replace('\\"', '"') if m else None


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ssl_context: ssl.SSLContext | None = None
    unused: tuple[str, ...] = field(default=())

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise SecurityConfigError(f"Invalid value {protocol} for configuration security.protocol: "
                                      f"must be one of {', '.join(PROTOCOLS)}")
        mechanism = username = password = None
        if protocol.startswith("SASL"):
            mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
            if mechanism not in MECHANISMS:
                raise SecurityConfigError(f"SASL mechanism {mechanism} is not supported here (supported: "
                                          f"{', '.join(MECHANISMS)})")
            jaas = props.get("sasl.jaas.config", "")
            username = props.get("sasl.username") or _jaas_value(jaas, "username")
            password = props.get("sasl.password") or _jaas_value(jaas, "password")
            if username is None or password is None:
                raise SecurityConfigError(f"{mechanism} needs a username and a password (sasl.jaas.config or "
                                          "sasl.username/sasl.password)")
        context = _ssl_context(props) if protocol in ("SSL", "SASL_SSL") else None
        unused = tuple(sorted(k for k in props if k not in KNOWN))
        return cls(protocol, mechanism, username, password, context, unused)

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        if self.ssl_context is None:
            return sock
        return self.ssl_context.wrap_socket(sock, server_hostname=host)

    def authenticate(self, call: Any) -> None:
        """SaslHandshake v1 then SaslAuthenticate v2 rounds; `call(api_key, version, body)` sends a request."""
        if not self.sasl:
            return
        handshake = call(SASL_HANDSHAKE, 1, {"mechanism": self.mechanism})
        if handshake.error_code != 0:
            raise AuthenticationError(f"SASL mechanism {self.mechanism} is not enabled on the broker "
                                      f"(enabled: {', '.join(handshake.mechanisms)})")

        def exchange(data: bytes) -> bytes:
            resp = call(SASL_AUTHENTICATE, 2, {"auth_bytes": data})
            if resp.error_code != 0:
                raise AuthenticationError(resp.error_message or f"SASL authentication failed ({resp.error_code})")
            return bytes(resp.auth_bytes)

        assert self.username is not None and self.password is not None
        if self.mechanism == "PLAIN":
            exchange(b"\0" + self.username.encode() + b"\0" + self.password.encode())
            return
        _scram(exchange, MECHANISMS[self.mechanism or ""] or "sha256", self.username, self.password)


def _ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        if props.get(key, "PEM").upper() != "PEM":
            raise SecurityConfigError(f"{key}={props[key]} is not supported: give PEM files")
    context = ssl.create_default_context(cafile=props.get("ssl.ca.location") or props.get("ssl.truststore.location"))
    context.check_hostname = props.get("ssl.endpoint.identification.algorithm", "https").lower() == "https"
    if not context.check_hostname:
        context.verify_mode = ssl.CERT_REQUIRED
    cert = props.get("ssl.certificate.location") or props.get("ssl.keystore.location")
    if cert:
        key_file = props.get("ssl.key.location")
        password = props.get("ssl.key.password") or props.get("ssl.keystore.password")
        context.load_cert_chain(cert, key_file or None, password or None)
    return context


def _scram(exchange: Any, hash_name: str, username: str, password: str) -> None:
    """RFC 5802 client (no channel binding), as Kafka's ScramSaslClient."""
    nonce = base64.b64encode(os.urandom(24)).decode()
    name = username.replace("=", "=3D").replace(",", "=2C")
    client_first_bare = f"n={name},r={nonce}"
    server_first = exchange(("n,," + client_first_bare).encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    if not fields.get("r", "").startswith(nonce):
        raise AuthenticationError("SCRAM: the broker's nonce does not extend ours")
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_final = exchange(f"{without_proof},p={base64.b64encode(proof).decode()}".encode()).decode()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    expected = base64.b64encode(hmac.new(server_key, auth_message, hash_name).digest()).decode()
    final = dict(part.split("=", 1) for part in server_final.split(",") if "=" in part)
    if "e" in final:
        raise AuthenticationError(f"SCRAM: {final['e']}")
    if not hmac.compare_digest(final.get("v", ""), expected):
        raise AuthenticationError("SCRAM: the broker's signature does not match (is it the real broker?)")
