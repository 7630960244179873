"""Broker configuration: Kafka's property names, typed and validated.

Sources, highest first: dynamic overrides (IncrementalAlterConfigs on the BROKER resource), the static
properties (file plus `--override key=value`), then the default from `BROKER_CONFIGS`. Unknown keys are kept
as strings and logged, as Kafka warns rather than fails. Topic-level values come from
`broker.config.topic_config`, whose broker synonyms are resolved here.
"""

from __future__ import annotations

import base64
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import structlog

from broker.config import topic_config as tc

log = structlog.get_logger(__name__)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# ConfigType codes (DescribeConfigs v3+).
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9
_TYPE_NAMES = {"bool": BOOLEAN, "string": STRING, "int": INT, "short": SHORT, "long": LONG, "double": DOUBLE,
               "list": LIST, "password": PASSWORD}

# ConfigSource codes (DescribeConfigs), re-exported for callers.
DYNAMIC_BROKER_CONFIG = tc.DYNAMIC_BROKER_CONFIG
DYNAMIC_DEFAULT_BROKER_CONFIG = tc.DYNAMIC_DEFAULT_BROKER_CONFIG
STATIC_BROKER_CONFIG = tc.STATIC_BROKER_CONFIG
DEFAULT_CONFIG = tc.DEFAULT_CONFIG


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range."""


# --- value parsing ---------------------------------------------------------------------------------------------
def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise ValueError("expected true or false")
    return low == "true"


def _parse_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


_PARSERS: dict[str, Callable[[str], Any]] = {
    "bool": _parse_bool,
    "string": lambda s: s.strip(),
    "password": lambda s: s,
    "int": lambda s: int(s.strip()),
    "short": lambda s: int(s.strip()),
    "long": lambda s: int(s.strip()),
    "double": lambda s: float(s.strip()),
    "list": _parse_list,
}
_BOUNDS = {"int": (-(2**31), INT_MAX), "short": (-(2**15), 2**15 - 1), "long": (-(2**63), LONG_MAX)}


def at_least(lo: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value < lo:
            raise ValueError(f"value must be at least {lo}")

    return check


def between(lo: int, hi: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not lo <= value <= hi:
            raise ValueError(f"value must be between {lo} and {hi}")

    return check


def one_of(*choices: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        items = value if isinstance(value, list) else [value]
        bad = [v for v in items if v not in choices]
        if bad or not items:
            raise ValueError(f"value must be among {', '.join(choices)}")

    return check


def fraction(value: Any) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError("value must be between 0 and 1")


# --- listeners -------------------------------------------------------------------------------------------------
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
    items = _parse_list(value) if isinstance(value, str) else value
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
    for item in _parse_list(text or ""):
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


def _check_listeners(value: list[str]) -> None:
    parse_listeners(value)  # each name must map to a security protocol: checked with the map (_check_relations)


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_protocol_map(value: list[str]) -> dict[str, str]:
    """`listener.security.protocol.map`: NAME:PROTOCOL pairs, names upper-cased as listener names are."""
    out: dict[str, str] = {}
    for item in value:
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ValueError(f"{item!r} is not LISTENER_NAME:SECURITY_PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {protocol!r} (one of {', '.join(SECURITY_PROTOCOLS)})")
        out[name] = protocol
    return out


def _check_protocol_map(value: list[str]) -> None:
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


# --- the table -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # bool, string, int, short, long, double, list, password
    default: Any  # typed default; None = unset (a derived value or "absent")
    check: Callable[[Any], None] | None = None
    dynamic: bool = False  # may be changed with IncrementalAlterConfigs (cluster-wide default)
    doc: str = ""

    @property
    def sensitive(self) -> bool:
        return self.type == "password"

    def parse(self, text: str) -> Any:
        try:
            value = _PARSERS[self.type](str(text))
        except ValueError:
            raise ConfigError(f"Invalid value {text!r} for configuration {self.name}: expected {self.type}") from None
        bounds = _BOUNDS.get(self.type)
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            raise ConfigError(f"Invalid value {text!r} for configuration {self.name}: out of {self.type} range")
        if self.check is not None:
            try:
                self.check(value)
            except ValueError as err:
                raise ConfigError(f"Invalid value {text!r} for configuration {self.name}: {err}") from None
        return value


H = 3_600_000
_DEFS = [
    # Server basics and listeners.
    ConfigDef("node.id", "int", 1, at_least(0), doc="The node id of this broker (and its combined controller)."),
    ConfigDef("broker.rack", "string", None, doc="Rack of this broker, returned in Metadata."),
    ConfigDef("cluster.id", "string", None,
              doc="Cluster id; generated on first start and kept in log.dirs/meta.properties when absent."),
    ConfigDef("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"], _check_listeners,
              doc="Listeners to bind, NAME://host:port (port 0 = ephemeral)."),
    ConfigDef("advertised.listeners", "list", None, _check_listeners,
              doc="Listeners handed to clients in Metadata; defaults to listeners (with the bound port)."),
    ConfigDef("listener.security.protocol.map", "list",
              ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
              _check_protocol_map, doc="Security protocol of each listener name, NAME:PROTOCOL."),
    ConfigDef("socket.request.max.bytes", "int", 104_857_600, at_least(1),
              doc="Largest request frame accepted; a larger size prefix closes the connection."),
    ConfigDef("queued.max.requests", "int", 100, at_least(1),
              doc="Requests in flight per connection before the broker stops reading from it."),
    ConfigDef("connections.max.unsent.bytes", "long", 1_048_576, at_least(0),
              doc="Response bytes a connection may have waiting to be sent (in its socket write buffer, or "
                  "finished behind an earlier response) before the broker stops dispatching its requests and "
                  "reading from it. Kafka has no such setting: it serves one request per connection at a time."),
    ConfigDef("connections.max.idle.ms", "long", 600_000, at_least(-1),
              doc="Close connections that received and sent nothing for this long, including ones stuck in the "
                  "middle of a request; -1 never."),
    ConfigDef("max.connections", "int", INT_MAX, at_least(0), dynamic=True,
              doc="Connections the broker holds at once; when reached, new connections wait to be accepted "
                  "until one closes."),
    ConfigDef("max.connections.per.ip", "int", INT_MAX, at_least(0), dynamic=True,
              doc="Connections from one address; a new connection over the limit is closed at once."),
    ConfigDef("max.connections.per.ip.overrides", "string", "", parse_ip_overrides, dynamic=True,
              doc="Per-address or host name limits overriding max.connections.per.ip, e.g. "
                  "'hostName:100,127.0.0.1:200'."),
    ConfigDef("message.max.bytes", "int", 1_048_588, at_least(0), dynamic=True),
    # Observability (Shoal's own; Kafka exports JMX).
    ConfigDef("metrics.prometheus.listener", "string", "", parse_host_port,
              doc="host:port serving Prometheus metrics over HTTP (GET /metrics); empty: no endpoint. Port 0 "
                  "binds an ephemeral port (written to --port-file as 'prometheus PORT')."),
    ConfigDef("shoal.loop.lag.warn.ms", "long", 200, at_least(1),
              doc="An event-loop wake-up later than this is logged (a callback held the loop) and counted in "
                  "shoal_event_loop_stalls_total."),
    # Logs.
    ConfigDef("log.dirs", "list", None, doc="Data directories (the first one is used); overrides log.dir."),
    ConfigDef("log.dir", "string", "./data", doc="Data directory when log.dirs is not set."),
    ConfigDef("num.partitions", "int", 1, at_least(1), doc="Partitions of auto-created topics."),
    ConfigDef("default.replication.factor", "int", 1, at_least(1)),
    ConfigDef("auto.create.topics.enable", "bool", True),
    ConfigDef("delete.topic.enable", "bool", True),
    ConfigDef("log.segment.bytes", "int", 1_073_741_824, at_least(1024 * 1024), dynamic=True),  # KIP-1030
    ConfigDef("log.roll.ms", "long", None, at_least(1), dynamic=True),
    ConfigDef("log.roll.hours", "int", 168, at_least(1)),
    ConfigDef("log.roll.jitter.ms", "long", None, at_least(0), dynamic=True),
    ConfigDef("log.retention.ms", "long", None, at_least(-1), dynamic=True),
    ConfigDef("log.retention.minutes", "int", None, at_least(-1)),
    ConfigDef("log.retention.hours", "int", 168, at_least(-1)),
    ConfigDef("log.retention.bytes", "long", -1, at_least(-1), dynamic=True),
    ConfigDef("log.retention.check.interval.ms", "long", 300_000, at_least(1)),
    ConfigDef("log.index.interval.bytes", "int", 4096, at_least(0), dynamic=True),
    ConfigDef("log.index.size.max.bytes", "int", 10_485_760, at_least(4), dynamic=True),
    ConfigDef("log.flush.interval.ms", "long", 0, at_least(0), dynamic=True,
              doc="Group-commit interval: 0 flushes as soon as the previous flush finishes."),
    ConfigDef("log.flush.interval.messages", "long", LONG_MAX, at_least(1), dynamic=True),
    ConfigDef("log.cleanup.policy", "list", ["delete"], one_of("delete", "compact"), dynamic=True),
    ConfigDef("log.message.timestamp.type", "string", "CreateTime", one_of("CreateTime", "LogAppendTime"),
              dynamic=True),
    ConfigDef("log.preallocate", "bool", False, dynamic=True),
    ConfigDef("compression.type", "string", "producer",
              one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), dynamic=True),
    ConfigDef("min.insync.replicas", "int", 1, at_least(1), dynamic=True),
    ConfigDef("unclean.leader.election.enable", "bool", False, dynamic=True),
    # Log cleaner (compaction of cleanup.policy=compact topics; Kafka's names and defaults).
    ConfigDef("log.cleaner.enable", "bool", True,
              doc="Run the log cleaner: compacted topics (__consumer_offsets included) grow without bound without it."),
    ConfigDef("log.cleaner.threads", "int", 1, at_least(0), dynamic=True,
              doc="Logs cleaned at once; each runs in a cleaner process of its own (started when first needed)."),
    ConfigDef("log.cleaner.backoff.ms", "long", 15_000, at_least(0), dynamic=True,
              doc="Pause between cleaner passes that found nothing to clean."),
    ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5, fraction, dynamic=True),
    ConfigDef("log.cleaner.delete.retention.ms", "long", 86_400_000, at_least(0), dynamic=True),
    ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0, at_least(0), dynamic=True),
    ConfigDef("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, at_least(1), dynamic=True),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134_217_728, at_least(1 << 20), dynamic=True,
              doc="Memory for the key -> offset maps of all cleaner processes; bounds the keys one pass can map "
                  "(about 120 bytes per key here, 24 in Kafka's hash table)."),
    ConfigDef("log.cleaner.io.buffer.size", "int", 524_288, at_least(4096), dynamic=True,
              doc="Bytes a cleaner reads and writes at a time."),
    ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9, fraction, dynamic=True),
    ConfigDef("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, at_least(1), dynamic=True,
              doc="Throttle on the bytes a cleaner reads plus writes per second."),
    ConfigDef("producer.id.expiration.ms", "int", 86_400_000, at_least(1), dynamic=True,
              doc="A producer silent this long is forgotten: its idempotence state is dropped (its next batch is "
                  "accepted at any sequence, as Kafka) and the cleaner no longer keeps its last batch."),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", 600_000, at_least(1),
              doc="How often expired producer ids are removed."),
    ConfigDef("transactional.id.expiration.ms", "int", 604_800_000, at_least(1),
              doc="A transactional id unused this long is forgotten (InitProducerId keeps them in memory)."),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3_600_000, at_least(1),
              doc="How often expired transactional ids are removed."),
    # Internal topics.
    ConfigDef("offsets.topic.num.partitions", "int", 4, at_least(1),
              doc="Partitions of __consumer_offsets (Kafka: 50; 4 here, see README)."),
    ConfigDef("offsets.topic.replication.factor", "short", 1, at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", "int", 104_857_600, at_least(1)),
    ConfigDef("offsets.retention.minutes", "int", 10_080, at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600_000, at_least(1)),
    ConfigDef("offset.metadata.max.bytes", "int", 4096, at_least(0)),
    ConfigDef("share.coordinator.state.topic.num.partitions", "int", 50, at_least(1)),
    ConfigDef("share.coordinator.state.topic.replication.factor", "short", 1, at_least(1)),
    ConfigDef("share.coordinator.state.topic.segment.bytes", "int", 104_857_600, at_least(1)),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", "int", 500, between(0, 500)),
    ConfigDef("share.coordinator.write.timeout.ms", "int", 5000, at_least(1)),
    ConfigDef("share.coordinator.state.topic.prune.interval.ms", "long", 300_000, at_least(1)),
    # Groups.
    ConfigDef("group.coordinator.rebalance.protocols", "list", ["classic", "consumer", "share"],
              one_of("classic", "consumer", "share", "streams")),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 0, at_least(0),
              doc="Kafka: 3000. 0 here (as Kafka's own dev server.properties) so tests join quickly."),
    ConfigDef("group.min.session.timeout.ms", "int", 6000, at_least(0)),
    ConfigDef("group.max.session.timeout.ms", "int", 1_800_000, at_least(0)),
    ConfigDef("group.max.size", "int", INT_MAX, at_least(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", "int", 5000, at_least(1)),
    ConfigDef("group.consumer.session.timeout.ms", "int", 45_000, at_least(1)),
    ConfigDef("group.consumer.max.size", "int", INT_MAX, at_least(1)),
    ConfigDef("group.consumer.min.session.timeout.ms", "int", 45_000, at_least(1)),
    ConfigDef("group.consumer.max.session.timeout.ms", "int", 60_000, at_least(1)),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", "int", 5000, at_least(1)),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", "int", 15_000, at_least(1)),
    ConfigDef("group.consumer.assignors", "list", ["uniform", "range"], one_of("uniform", "range"),
              doc="Server-side assignors of consumer groups (short names; the first is the default)."),
    ConfigDef("group.consumer.migration.policy", "string", "bidirectional",
              one_of("disabled", "upgrade", "downgrade", "bidirectional")),
    # Share groups (KIP-932; names and defaults from Kafka's ShareGroupConfig / ShareCoordinatorConfig).
    ConfigDef("group.share.enable", "bool", True),
    ConfigDef("group.share.record.lock.duration.ms", "int", 30_000, between(1000, 3_600_000), dynamic=True),
    ConfigDef("group.share.min.record.lock.duration.ms", "int", 15_000, between(1000, 30_000)),
    ConfigDef("group.share.max.record.lock.duration.ms", "int", 60_000, between(30_000, 3_600_000)),
    ConfigDef("group.share.delivery.count.limit", "int", 5, between(2, 10)),
    ConfigDef("group.share.min.delivery.count.limit", "int", 2, between(2, 10)),
    ConfigDef("group.share.max.delivery.count.limit", "int", 10, between(2, 10)),
    ConfigDef("group.share.partition.max.record.locks", "int", 2000, between(100, 10_000)),
    ConfigDef("group.share.min.partition.max.record.locks", "int", 100, between(100, 10_000)),
    ConfigDef("group.share.max.partition.max.record.locks", "int", 4000, between(100, 10_000)),
    ConfigDef("group.share.heartbeat.interval.ms", "int", 5000, at_least(1)),
    ConfigDef("group.share.min.heartbeat.interval.ms", "int", 5000, at_least(1)),
    ConfigDef("group.share.max.heartbeat.interval.ms", "int", 15_000, at_least(1)),
    ConfigDef("group.share.session.timeout.ms", "int", 45_000, at_least(1)),
    ConfigDef("group.share.min.session.timeout.ms", "int", 45_000, at_least(1)),
    ConfigDef("group.share.max.session.timeout.ms", "int", 60_000, at_least(1)),
    ConfigDef("group.share.max.size", "int", 200, between(10, 1000)),
    ConfigDef("group.share.max.share.sessions", "int", 2000, at_least(1)),
    ConfigDef("group.share.initialize.retry.interval.ms", "int", 30_000, at_least(1)),
    ConfigDef("group.share.assignors", "list", ["simple"]),
    # Security (see broker.security): SASL, TLS, authorizer. Any of LISTENER_KEYS may be set per listener.
    ConfigDef("sasl.enabled.mechanisms", "list", list(SASL_MECHANISMS), one_of(*SASL_MECHANISMS),
              doc="SASL mechanisms served on SASL listeners (Kafka: GSSAPI, which Shoal does not serve)."),
    ConfigDef("sasl.jaas.config", "password", None,
              doc="JAAS entry; PlainLoginModule user_NAME=\"password\" options are the PLAIN users. Set it per "
                  "listener and mechanism: listener.name.NAME.plain.sasl.jaas.config."),
    ConfigDef("sasl.server.max.receive.size", "int", 524_288, at_least(1),
              doc="Largest frame read from a SASL client before it has authenticated."),
    ConfigDef("connections.max.reauth.ms", "long", 0, at_least(0),
              doc="SASL session lifetime; a client must re-authenticate before it ends (0: sessions never end)."),
    ConfigDef("connection.failed.authentication.delay.ms", "int", 100, at_least(0),
              doc="Delay before the answer to a failed authentication is sent and the connection closed."),
    ConfigDef("ssl.keystore.type", "string", "PEM", one_of("PEM"),
              doc="Only PEM (Kafka's default is JKS, which Python's ssl module cannot read)."),
    ConfigDef("ssl.keystore.location", "string", None, doc="PEM file with the private key and certificate chain."),
    ConfigDef("ssl.keystore.password", "password", None),
    ConfigDef("ssl.key.password", "password", None, doc="Password of an encrypted PEM private key."),
    ConfigDef("ssl.keystore.certificate.chain", "password", None, doc="PEM certificate chain, inline."),
    ConfigDef("ssl.keystore.key", "password", None, doc="PEM private key, inline."),
    ConfigDef("ssl.truststore.type", "string", "PEM", one_of("PEM")),
    ConfigDef("ssl.truststore.location", "string", None, doc="PEM file of the CAs trusted for client certificates."),
    ConfigDef("ssl.truststore.password", "password", None),
    ConfigDef("ssl.truststore.certificates", "password", None, doc="PEM CA certificates, inline."),
    ConfigDef("ssl.client.auth", "string", "none", one_of("none", "requested", "required")),
    ConfigDef("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], one_of("TLSv1.2", "TLSv1.3")),
    ConfigDef("ssl.protocol", "string", "TLSv1.3", one_of("TLSv1.2", "TLSv1.3", "TLS")),
    ConfigDef("ssl.cipher.suites", "list", [], doc="OpenSSL cipher names for TLS 1.2 (empty: OpenSSL's defaults)."),
    ConfigDef("ssl.principal.mapping.rules", "string", "DEFAULT", one_of("DEFAULT"),
              doc="Only DEFAULT: the principal of a TLS client is User:<its certificate's subject DN>."),
    ConfigDef("authorizer.class.name", "string", "",
              one_of("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                     "kafka.security.authorizer.AclAuthorizer"),
              doc="Empty: no authorization. Kafka's StandardAuthorizer (or AclAuthorizer) name: ACLs are enforced."),
    ConfigDef("super.users", "string", "", doc="Principals allowed everything, separated by ';' (User:admin;User:x)."),
    ConfigDef("allow.everyone.if.no.acl.found", "bool", False,
              doc="Whether a resource that no ACL names is open to everyone."),
    # KIP-1191 share-group dead-letter queues (cluster configs, dynamic as in Kafka).
    ConfigDef("errors.deadletterqueue.auto.create.topics.enable", "bool", False, dynamic=True),
    ConfigDef("errors.deadletterqueue.topic.name.prefix", "string", "dlq.", dynamic=True),
]
BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

# Keys whose effective value is derived from a family (Kafka: ms beats minutes beats hours).
_DERIVED: dict[str, tuple[tuple[str, int], ...]] = {
    "log.retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", H)),
    "log.roll.ms": (("log.roll.ms", 1), ("log.roll.hours", H)),
}


class ConfigDescription(NamedTuple):
    """One row for DescribeConfigs: the first five fields are the wire's ConfigEntry."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool
    read_only: bool
    config_type: int = 0
    documentation: str | None = None
    synonyms: tuple[tuple[str, str | None, int], ...] = ()


def to_text(value: Any) -> str | None:
    """The string form Kafka shows for a typed value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


class BrokerConfig:
    """Typed broker properties with Kafka's precedence; cheap `get()` (values are resolved once per change)."""

    def __init__(self, props: Mapping[str, str] | None = None, *, dynamic: Mapping[str, str] | None = None) -> None:
        self._static: dict[str, Any] = {}
        self.unknown: dict[str, str] = {}
        # Listener-prefixed values: (LISTENER, MECHANISM or None, key) -> typed value.
        self._per_listener: dict[tuple[str, str | None, str], Any] = {}
        for key, text in (props or {}).items():
            definition = BROKER_CONFIGS.get(key)
            if definition is None:
                prefixed = split_listener_key(key)
                if prefixed is not None:
                    self._per_listener[prefixed] = BROKER_CONFIGS[prefixed[2]].parse(str(text))
                else:
                    self.unknown[key] = str(text)
                continue
            self._static[key] = definition.parse(str(text))
        self._dynamic: dict[str, Any] = {}
        for key, text in (dynamic or {}).items():
            self._dynamic[key] = self.validate_dynamic(key, text)
        self._check_relations()
        self._resolve()

    # --- lookups -----------------------------------------------------------------------------------------------
    def get(self, name: str) -> Any:
        """The typed effective value of a known key (derived keys resolved), or the raw string of an unknown
        key. KeyError for a key that is neither known nor set."""
        try:
            return self._values[name]
        except KeyError:
            if name in self.unknown:
                return self.unknown[name]
            raise

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._values or name in self.unknown

    def source(self, name: str) -> int:
        family = _DERIVED.get(name, ((name, 1),))
        for key, _ in family:
            if key in self._dynamic:
                return DYNAMIC_DEFAULT_BROKER_CONFIG
        for key, _ in family:
            if key in self._static:
                return STATIC_BROKER_CONFIG
        return DEFAULT_CONFIG

    def as_properties(self) -> dict[str, str]:
        """Every known key with its effective value as text (unset keys omitted), plus unknown keys."""
        out = {k: to_text(v) for k, v in self._values.items() if v is not None}
        out.update(self.unknown)
        return out  # type: ignore[return-value]

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(d) for d in self._values["log.dirs"]]

    @property
    def data_dir(self) -> Path:
        return self.log_dirs[0]

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self._values["listeners"])

    @property
    def advertised_listeners(self) -> list[Listener]:
        return parse_listeners(self._values["advertised.listeners"])

    @property
    def node_id(self) -> int:
        return self._values["node.id"]

    def listener_value(self, listener: str, key: str, mechanism: str | None = None) -> Any:
        """A listener's value of a LISTENER_KEYS property: `listener.name.<listener>[.<mechanism>].<key>`, else
        the broker-wide value."""
        for candidate in ((listener.upper(), mechanism.upper() if mechanism else None, key),
                          (listener.upper(), None, key)):
            if candidate in self._per_listener:
                return self._per_listener[candidate]
        if key == "sasl.jaas.config":
            return None  # as Kafka: a broker's JAAS entry is per listener and mechanism
        return self._values[key]

    def security_protocol(self, listener: str) -> str:
        return self.protocol_map[listener.upper()]

    @property
    def protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(self._values["listener.security.protocol.map"])

    # --- dynamic changes ---------------------------------------------------------------------------------------
    def validate_dynamic(self, name: str, text: str | None) -> Any:
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown broker config {name}")
        if not definition.dynamic:
            raise ConfigError(f"Cannot update these configs dynamically: {name}")
        return None if text is None else definition.parse(text)

    def set_dynamic(self, name: str, text: str | None) -> None:
        """Set (or with None remove) a cluster-wide dynamic override; ConfigError if not allowed."""
        value = self.validate_dynamic(name, text)
        if value is None:
            self._dynamic.pop(name, None)
        else:
            self._dynamic[name] = value
        self._resolve()

    def dynamic_overrides(self) -> dict[str, str]:
        return {k: to_text(v) or "" for k, v in self._dynamic.items()}

    # --- describe ----------------------------------------------------------------------------------------------
    def describe(self, keys: Iterable[str] | None = None, *, include_synonyms: bool = False) -> list[ConfigDescription]:
        names = sorted(BROKER_CONFIGS) if keys is None else list(keys)
        rows = []
        for name in names:
            definition = BROKER_CONFIGS.get(name)
            if definition is None:
                continue
            value = None if definition.sensitive else to_text(self._values.get(name))
            synonyms: tuple[tuple[str, str | None, int], ...] = ()
            if include_synonyms:
                synonyms = tuple(self._synonyms(name))
            rows.append(ConfigDescription(name, value, self.source(name), definition.sensitive, not definition.dynamic,
                                          _TYPE_NAMES[definition.type], definition.doc or None, synonyms))
        return rows

    def _synonyms(self, name: str) -> list[tuple[str, str | None, int]]:
        out = []
        family = _DERIVED.get(name, ((name, 1),))
        for layer, source in ((self._dynamic, DYNAMIC_DEFAULT_BROKER_CONFIG), (self._static, STATIC_BROKER_CONFIG)):
            out += [(key, to_text(layer[key]), source) for key, _ in family if key in layer]
        out += [(key, to_text(BROKER_CONFIGS[key].default), DEFAULT_CONFIG) for key, _ in family
                if BROKER_CONFIGS[key].default is not None]
        return out

    # --- topic-level values ------------------------------------------------------------------------------------
    def broker_value(self, broker_key: str) -> tuple[str | None, int]:
        """Lookup used by topic configs: (value text, source); (None, DEFAULT_CONFIG) when only defaulted."""
        source = self.source(broker_key) if broker_key in BROKER_CONFIGS else DEFAULT_CONFIG
        if source == DEFAULT_CONFIG:
            return None, DEFAULT_CONFIG
        return to_text(self._values.get(broker_key)), source

    def topic_value(self, name: str, overrides: Mapping[str, str]) -> str:
        return tc.effective_value(name, dict(overrides), self.broker_value)

    def topic_values(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """Every topic config's effective value (text) for a topic with these overrides."""
        return {name: self.topic_value(name, overrides) for name in tc.TOPIC_CONFIGS}

    def describe_topic(self, overrides: Mapping[str, str], keys: Iterable[str] | None = None) -> list[tc.ConfigEntry]:
        names = tc.DESCRIBED_CONFIGS if keys is None else [k for k in keys if k in tc.DESCRIBED_CONFIGS]
        return [tc.effective(name, dict(overrides), self.broker_value) for name in names]

    def validate_topic_value(self, name: str, value: str) -> str:
        return tc.validate(name, value)

    def validate_topic_values(self, overrides: Mapping[str, str]) -> None:
        """Cross-config checks of a topic with these (already validated) overrides; ValueError."""
        tc.validate_values(self.topic_values(overrides))

    def log_config(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """Effective topic configs of a partition log (names as Kafka's topic configs)."""
        return self.topic_values(overrides)

    # --- internals ---------------------------------------------------------------------------------------------
    def _raw(self, name: str) -> Any:
        if name in self._dynamic:
            return self._dynamic[name]
        if name in self._static:
            return self._static[name]
        return BROKER_CONFIGS[name].default

    def _resolve(self) -> None:
        values = {name: self._raw(name) for name in BROKER_CONFIGS}
        for name, family in _DERIVED.items():
            for key, scale in family:
                raw = self._dynamic.get(key, self._static.get(key))
                if raw is not None:
                    values[name] = raw * scale if raw >= 0 else -1
                    break
            else:
                last_key, scale = family[-1]
                values[name] = values[last_key] * scale
        if values["log.dirs"] is None:
            values["log.dirs"] = [values["log.dir"]]
        if values["advertised.listeners"] is None:
            values["advertised.listeners"] = values["listeners"]
        self._values = values

    def _check_relations(self) -> None:
        raw = self._raw
        listeners = {listener.name for listener in parse_listeners(raw("listeners"))}
        protocols = parse_protocol_map(raw("listener.security.protocol.map"))
        for name in sorted(listeners):
            if name not in protocols:
                raise ConfigError(f"No security protocol defined for listener {name} "
                                  "(listener.security.protocol.map)")
            if protocols[name] in ("SSL", "SASL_SSL"):
                def value(key: str, name: str = name) -> Any:
                    return self._per_listener.get((name, None, key), raw(key))
                if not value("ssl.keystore.location") and not value("ssl.keystore.certificate.chain"):
                    raise ConfigError(f"listener {name} ({protocols[name]}) needs ssl.keystore.location or "
                                      "ssl.keystore.certificate.chain")
        if raw("advertised.listeners") is not None:
            extra = {a.name for a in parse_listeners(raw("advertised.listeners"))} - listeners
            if extra:
                raise ConfigError(f"advertised.listeners names {sorted(extra)} not found in listeners")
        if raw("max.connections.per.ip") == 0 and not parse_ip_overrides(raw("max.connections.per.ip.overrides")):
            raise ConfigError("max.connections.per.ip can be 0 only when max.connections.per.ip.overrides is set")
        # Kafka's validateNewGroupCoordinatorConfigs: the consumer group timings within their bounds.
        for key in ("heartbeat.interval.ms", "session.timeout.ms"):
            lo, value, hi = (raw(f"group.consumer.min.{key}"), raw(f"group.consumer.{key}"),
                             raw(f"group.consumer.max.{key}"))
            for ok, message in ((hi >= lo, f"group.consumer.max.{key} must be greater than or equals to "
                                           f"group.consumer.min.{key}"),
                                (value >= lo, f"group.consumer.{key} must be greater than or equals to "
                                              f"group.consumer.min.{key}"),
                                (value <= hi, f"group.consumer.{key} must be less than or equals to "
                                              f"group.consumer.max.{key}")):
                if not ok:
                    raise ConfigError(message)
        for prefix in ("group.share", "group.consumer"):
            if raw(f"{prefix}.heartbeat.interval.ms") >= raw(f"{prefix}.session.timeout.ms"):
                raise ConfigError(f"{prefix}.heartbeat.interval.ms must be smaller than {prefix}.session.timeout.ms")
        for key in ("record.lock.duration.ms", "session.timeout.ms", "heartbeat.interval.ms", "delivery.count.limit",
                    "partition.max.record.locks"):
            lo, value, hi = (raw(f"group.share.min.{key}"), raw(f"group.share.{key}"), raw(f"group.share.max.{key}"))
            if not lo <= value <= hi:
                raise ConfigError(f"group.share.{key}={value} must be between group.share.min.{key}={lo} "
                                  f"and group.share.max.{key}={hi}")


# --- loading ---------------------------------------------------------------------------------------------------
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 5 < len(text):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java `.properties` syntax: `#`/`!` comments, `key=value`, `key: value` or `key value`, backslash line
    continuation and escapes. Later keys win."""
    props: dict[str, str] = {}
    logical: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not logical and (not line or line[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(line[:-1])
            if i < len(lines):
                continue
        else:
            logical.append(line)
        entry = "".join(logical)
        logical = []
        match = re.match(r"((?:\\.|[^\s=:\\])*)\s*[=:]?\s*(.*)$", entry, re.S)
        if match is None or not match.group(1):
            continue
        props[_unescape(match.group(1))] = _unescape(match.group(2))
    return props


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r} is not key=value")
        out[key.strip()] = value
    return out


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
    props: dict[str, str] = {}
    if path is not None:
        try:
            props.update(parse_properties(Path(path).read_text(encoding="utf-8")))
        except OSError as err:
            raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    props.update(parse_overrides(overrides))
    config = BrokerConfig(props)
    for key in sorted(config.unknown):
        log.warning("unknown config key kept", key=key)
    return config


# --- meta.properties -------------------------------------------------------------------------------------------
def new_cluster_id() -> str:
    """Kafka's format: a random UUID as URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def ensure_meta_properties(data_dir: Path, node_id: int, cluster_id: str | None) -> str:
    """Read or create `meta.properties` (KRaft v1 layout) and return the cluster id.

    A configured cluster.id must match the stored one, and the stored node.id must match ours: pointing a
    broker at another cluster's data is refused as Kafka does.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "meta.properties"
    if path.exists():
        meta = parse_properties(path.read_text(encoding="utf-8"))
        stored = meta.get("cluster.id")
        if not stored:
            raise ConfigError(f"{path} has no cluster.id")
        if cluster_id is not None and cluster_id != stored:
            raise ConfigError(f"cluster.id {cluster_id} does not match {stored} stored in {path}")
        if "node.id" in meta and int(meta["node.id"]) != node_id:
            raise ConfigError(f"node.id {node_id} does not match {meta['node.id']} stored in {path}")
        return stored
    cluster_id = cluster_id or new_cluster_id()
    directory_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    text = (f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n"
            f"node.id={node_id}\nversion=1\ncluster.id={cluster_id}\ndirectory.id={directory_id}\n")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return cluster_id
