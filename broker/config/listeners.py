"""Listeners (`NAME://host:port`), their security protocols and listener-prefixed properties."""

from __future__ import annotations

import re
from typing import NamedTuple

from broker.config.definitions import parse_list


class Listener(NamedTuple):
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[0-9a-fA-F:.]+\]|[^:/\[\]]*):(?P<port>\d+)$")


def parse_listeners(value: str | list[str]) -> list[Listener]:
    """`PLAINTEXT://host:port[,NAME://host:port]`; an empty host means all interfaces; port 0 = ephemeral."""
    items = parse_list(value) if isinstance(value, str) else value
    out: list[Listener] = []
    for item in items:
        match = _LISTENER.match(item)
        if match is None:
            raise ValueError(f"listener {item!r} is not NAME://host:port")
        port = int(match["port"])
        if port > 65535:
            raise ValueError(f"listener {item!r} has port {port} out of range")
        host = match["host"].strip("[]")
        out.append(Listener(match["name"].upper(), host, port))
    if not out:
        raise ValueError("no listener given")
    names = [listener.name for listener in out]
    if len(set(names)) != len(names):
        raise ValueError("each listener name may be used once")
    return out


_HOST_PORT = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[^:/\[\]]*):(?P<port>\d+)$")


def parse_host_port(text: str) -> tuple[str, int] | None:
    """`host:port` (`[v6]:port`; an empty host means all interfaces), or None for an empty value."""
    if not text.strip():
        return None
    match = _HOST_PORT.match(text.strip())
    if match is None or int(match["port"]) > 65535:
        raise ValueError(f"{text!r} is not host:port")
    return match["host"].strip("[]"), int(match["port"])


def parse_ip_overrides(text: str) -> dict[str, int]:
    """`host:count,host:count` (max.connections.per.ip.overrides); the count follows the last colon, so IPv6
    literals work."""
    out: dict[str, int] = {}
    for item in parse_list(text or ""):
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ValueError(f"{item!r} is not host:count")
        try:
            limit = int(count)
        except ValueError:
            raise ValueError(f"{item!r}: {count!r} is not a number") from None
        if limit < 0:
            raise ValueError(f"{item!r}: the count must be at least 0")
        out[host] = limit
    return out


def check_listeners(value: list[str]) -> None:
    parse_listeners(value)  # each name must map to a security protocol: checked with the map (_check_relations)


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_protocol_map(value: str | list[str]) -> dict[str, str]:
    """`listener.security.protocol.map`: NAME:PROTOCOL pairs (comma-separated in Kafka's string), names
    upper-cased as listener names are."""
    items = [item for item in value.split(",") if item.strip()] if isinstance(value, str) else value
    out: dict[str, str] = {}
    for item in items:
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ValueError(f"{item!r} is not LISTENER_NAME:SECURITY_PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {protocol!r} (one of {', '.join(SECURITY_PROTOCOLS)})")
        out[name] = protocol
    return out


def check_protocol_map(value: str | list[str]) -> None:
    parse_protocol_map(value)


# SASL mechanisms this broker serves (Kafka also has GSSAPI and OAUTHBEARER).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Properties that may also be set per listener as `listener.name.<listener>.<key>` (Kafka's listener prefix);
# `listener.name.<listener>.<mechanism>.sasl.jaas.config` carries a mechanism as well.
LISTENER_KEYS = frozenset({
    "sasl.enabled.mechanisms", "connections.max.reauth.ms", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites", "ssl.principal.mapping.rules",
    "sasl.jaas.config",
})
_LISTENER_KEY = re.compile(r"^listener\.name\.(?P<listener>[a-z0-9_]+)\.(?:(?P<mechanism>[a-z0-9-]+)\.)?"
                           r"(?P<key>sasl\.jaas\.config|[a-z0-9.]+)$")


def split_listener_key(key: str) -> tuple[str, str | None, str] | None:
    """`listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config` -> ("SASL_SSL", "SCRAM-SHA-256", "sasl.jaas.config");
    None when the key is not a listener-prefixed property this broker knows."""
    match = _LISTENER_KEY.match(key)
    if match is None:
        return None
    mechanism, base = match["mechanism"], match["key"]
    if mechanism is not None and base != "sasl.jaas.config":
        base, mechanism = f"{mechanism}.{base}", None  # the greedy split took part of a dotted key
    if base not in LISTENER_KEYS:
        return None
    return match["listener"].upper(), mechanism.upper() if mechanism else None, base
