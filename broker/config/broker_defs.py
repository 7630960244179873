"""The broker's config definitions: Kafka's names, types, defaults and validators, and derived families."""

from __future__ import annotations

from dataclasses import replace

from broker.config.definitions import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    at_least,
    between,
    fraction,
    one_of,
    to_text,
)
from broker.config.kafka_broker_defs import CLUSTER_WIDE, KAFKA_BROKER_CONFIGS, READ_ONLY
from broker.config.listeners import (
    SASL_MECHANISMS,
    check_listeners,
    check_protocol_map,
    parse_host_port,
    parse_ip_overrides,
)

H = 3_600_000


def _socket_buffer(value: int) -> None:
    if value == 0 or value < -1:
        raise ValueError("value must be -1 (the operating system's default) or a size in bytes")


_DEFS = [
    # Server basics and listeners.
    ConfigDef("node.id", "int", 1, at_least(0), doc="The node id of this broker (and its combined controller)."),
    ConfigDef("broker.rack", "string", None, doc="Rack of this broker, returned in Metadata."),
    ConfigDef("cluster.id", "string", None,
              doc="Cluster id; generated on first start and kept in log.dirs/meta.properties when absent."),
    ConfigDef("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"], check_listeners,
              doc="Listeners to bind, NAME://host:port (port 0 = ephemeral)."),
    ConfigDef("advertised.listeners", "list", None, check_listeners,
              doc="Listeners handed to clients in Metadata; defaults to listeners (with the bound port)."),
    ConfigDef("listener.security.protocol.map", "string",
              "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
              check_protocol_map, doc="Security protocol of each listener name, NAME:PROTOCOL pairs."),
    ConfigDef("socket.request.max.bytes", "int", 104_857_600, at_least(1),
              doc="Largest request frame accepted; a larger size prefix closes the connection."),
    ConfigDef("fetch.max.bytes", "int", 57_671_680, at_least(0),
              doc="The most bytes a Fetch or ShareFetch returns, whatever its MaxBytes asks (its MinBytes is capped "
                  "to the same)."),
    ConfigDef("socket.listen.backlog.size", "int", 1024, at_least(1),
              doc="Connections the kernel queues on a listening socket before the broker accepts them (the listen "
                  "backlog; the kernel caps it at net.core.somaxconn). Kafka's default is 50."),
    ConfigDef("socket.send.buffer.bytes", "int", -1, _socket_buffer,
              doc="SO_SNDBUF of the connections the broker accepts; -1: the operating system's default, which on "
                  "Linux grows with use (autotuning). Kafka's default is 102400."),
    ConfigDef("socket.receive.buffer.bytes", "int", -1, _socket_buffer,
              doc="SO_RCVBUF of the listening sockets, which the connections they accept inherit (set before the "
                  "listener binds, as Kafka does, so the TCP window scale can use it); -1: the operating system's "
                  "default, which on Linux grows with use (autotuning). Kafka's default is 102400."),
    ConfigDef("queued.max.requests", "int", 100, at_least(1),
              doc="Requests in flight per connection before the broker stops reading from it."),
    ConfigDef("max.request.partition.size.limit", "int", 2000, at_least(1),
              doc="The most partitions one DescribeTopicPartitions response holds."),
    ConfigDef("queued.max.request.bytes", "long", 268_435_456, at_least(-1),
              doc="Request bytes all connections together may hold buffered (a request in the middle of being "
                  "received is counted at its full declared size); when reached, the broker stops reading from "
                  "connections that are not in the middle of a request until requests are dispatched. -1: no "
                  "bound (Kafka's default)."),
    ConfigDef("connections.max.unsent.bytes", "long", 1_048_576, at_least(0),
              doc="Response bytes a connection may have waiting to be sent (in its socket write buffer, or "
                  "finished behind an earlier response) before the broker stops dispatching its requests and "
                  "reading from it. Kafka has no such setting: it serves one request per connection at a time."),
    # Client quotas (Kafka's QuotaConfig): the samples a client's rates are measured over.
    ConfigDef("quota.window.num", "int", 11, at_least(1),
              doc="The number of samples to retain in memory for client quotas."),
    ConfigDef("quota.window.size.seconds", "int", 1, at_least(1),
              doc="The time span of each sample for client quotas."),
    ConfigDef("controller.quota.window.num", "int", 11, at_least(1),
              doc="The number of samples to retain in memory for controller mutation quotas."),
    ConfigDef("controller.quota.window.size.seconds", "int", 1, at_least(1),
              doc="The time span of each sample for controller mutations quotas."),
    ConfigDef("connections.max.idle.ms", "long", 600_000, at_least(-1),
              doc="Close connections that received and sent nothing for this long, including ones stuck in the "
                  "middle of a request; -1 never."),
    ConfigDef("max.connections", "int", INT_MAX, at_least(0), dynamic=True,
              doc="Connections the broker holds at once; when reached, new connections wait to be accepted "
                  "until one closes."),
    ConfigDef("max.connection.creation.rate", "int", INT_MAX, at_least(0), dynamic=True,
              doc="New connections per second the broker accepts, over the quota window (quota.window.num samples "
                  "of quota.window.size.seconds); above it the accept loop waits before taking the next one on "
                  "(new clients queue in the listen backlog meanwhile)."),
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
    ConfigDef("log.dir", "list", ["./data"], doc="Data directory when log.dirs is not set (the first one)."),
    ConfigDef("num.partitions", "int", 1, at_least(1), doc="Partitions of auto-created topics."),
    ConfigDef("default.replication.factor", "int", 1, at_least(1)),
    ConfigDef("auto.create.topics.enable", "bool", True),
    ConfigDef("delete.topic.enable", "bool", True),
    ConfigDef("log.segment.bytes", "int", 1_073_741_824, at_least(1024 * 1024), dynamic=True),  # KIP-1030
    ConfigDef("log.roll.ms", "long", None, at_least(1), dynamic=True),
    ConfigDef("log.roll.hours", "int", 168, at_least(1)),
    ConfigDef("log.roll.jitter.ms", "long", None, at_least(0), dynamic=True),
    ConfigDef("log.roll.jitter.hours", "int", 0, at_least(0)),
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
    ConfigDef("log.message.timestamp.before.max.ms", "long", LONG_MAX, at_least(0), dynamic=True,
              doc="How far in the past a record's CreateTime may lie from the broker's clock; a batch holding an "
                  "older record is refused with INVALID_TIMESTAMP."),
    ConfigDef("log.message.timestamp.after.max.ms", "long", 3_600_000, at_least(0), dynamic=True,
              doc="How far in the future a record's CreateTime may lie from the broker's clock; a batch holding a "
                  "later record is refused with INVALID_TIMESTAMP."),
    ConfigDef("log.preallocate", "bool", False, dynamic=True),
    ConfigDef("compression.type", "string", "producer",
              one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), dynamic=True,
              doc="The codec batches are stored with: 'producer' keeps each batch as it came; a codec (or "
                  "'uncompressed') rebuilds batches written with another one."),
    ConfigDef("compression.gzip.level", "int", -1, between(-1, 9), dynamic=True,
              doc="The level gzip compresses at when compression.type is gzip (-1: zlib's default, 6)."),
    ConfigDef("compression.lz4.level", "int", 9, between(1, 17), dynamic=True,
              doc="The level lz4 compresses at when compression.type is lz4."),
    ConfigDef("compression.zstd.level", "int", 3, between(-131072, 22), dynamic=True,
              doc="The level zstd compresses at when compression.type is zstd."),
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
              doc="A transactional id with no transaction running for this long is forgotten (tombstoned on "
                  "__transaction_state)."),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3_600_000, at_least(1),
              doc="How often expired transactional ids are removed."),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000, at_least(1),
              doc="How often transactions open longer than their timeout are aborted."),
    ConfigDef("transaction.partition.verification.enable", "bool", True,
              doc="A transactional produce that starts a transaction on a partition is checked with the "
                  "transaction coordinator first (KIP-890 part 1): a partition not added to the transaction is "
                  "refused."),
    ConfigDef("transaction.version", "short", 2, between(0, 2),
              doc="The finalized transaction.version feature (Kafka sets it with `kafka-storage format --feature "
                  "transaction.version=N` or UpdateFeatures): 2 is KIP-890 part 2 (the epoch bumped by every "
                  "EndTxn, partitions added implicitly by Produce v12 and TxnOffsetCommit v5), below 2 clients use "
                  "transactions v1. Needs transaction.partition.verification.enable for 2 (else 1 is used)."),
    ConfigDef("transaction.max.timeout.ms", "int", 900_000, at_least(1),
              doc="The largest transaction timeout a producer may ask for (InitProducerId)."),
    ConfigDef("unstable.api.versions.enable", "bool", False, internal=True,
              doc="Serve (and advertise) the API versions Kafka marks latestVersionUnstable: InitProducerId v6 "
                  "(KIP-939)."),
    # Internal topics.
    ConfigDef("offsets.topic.num.partitions", "int", 4, at_least(1),
              doc="Partitions of __consumer_offsets (Kafka: 50; 4 here, see README)."),
    ConfigDef("offsets.topic.replication.factor", "short", 1, at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", "int", 104_857_600, at_least(1)),
    ConfigDef("offsets.retention.minutes", "int", 10_080, at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600_000, at_least(1)),
    ConfigDef("offset.metadata.max.bytes", "int", 4096, at_least(0)),
    ConfigDef("transaction.state.log.num.partitions", "int", 4, at_least(1),
              doc="Partitions of __transaction_state (Kafka: 50; 4 here, see README)."),
    ConfigDef("transaction.state.log.replication.factor", "short", 1, at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", "int", 104_857_600, at_least(1)),
    ConfigDef("share.coordinator.state.topic.num.partitions", "int", 50, at_least(1)),
    ConfigDef("share.coordinator.state.topic.replication.factor", "short", 1, at_least(1)),
    ConfigDef("share.coordinator.state.topic.segment.bytes", "int", 104_857_600, at_least(1)),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", "int", 500, between(0, 500)),
    ConfigDef("share.coordinator.write.timeout.ms", "int", 5000, at_least(1)),
    ConfigDef("shoal.share.state.fsync.interval.ms", "long", 1000, at_least(0),
              doc="0: every __share_group_state write (the acknowledgements of a ShareFetch/ShareAcknowledge, "
                  "acquisitions' delivery counts) is fsynced before the request is answered. Above 0: it is "
                  "answered once the write is in the log file, which survives a broker crash or kill -9, and the "
                  "written partitions are fsynced together at most this many ms later; a power loss may then lose "
                  "the last interval's state, whose records are delivered again (never lost). Kafka does not fsync "
                  "this topic at all (it relies on replication)."),
    ConfigDef("share.coordinator.state.topic.prune.interval.ms", "long", 300_000, at_least(1)),
    # Groups.
    ConfigDef("group.coordinator.rebalance.protocols", "list", ["classic", "consumer", "share", "streams"],
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
    # A share group's target assignment is recomputed at most once per interval (a group config may override it).
    ConfigDef("group.share.assignment.interval.ms", "int", 1000, at_least(0)),
    ConfigDef("group.share.min.assignment.interval.ms", "int", 0, at_least(0)),
    ConfigDef("group.share.max.assignment.interval.ms", "int", 15_000, at_least(0)),
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
    # Delegation tokens (KIP-48, broker.security.delegation_tokens).
    ConfigDef("delegation.token.secret.key", "password", None,
              doc="Key of the tokens' HmacSHA512; unset or empty: delegation tokens are disabled."),
    ConfigDef("delegation.token.max.lifetime.ms", "long", 7 * 24 * H, at_least(1),
              doc="A token's maximum lifetime, beyond which it cannot be renewed."),
    ConfigDef("delegation.token.expiry.time.ms", "long", 24 * H, at_least(1),
              doc="How long a token stays valid before it must be renewed."),
    ConfigDef("delegation.token.expiry.check.interval.ms", "long", H, at_least(1),
              doc="How often expired tokens are removed."),
    ConfigDef("super.users", "string", "", doc="Principals allowed everything, separated by ';' (User:admin;User:x)."),
    ConfigDef("allow.everyone.if.no.acl.found", "bool", False,
              doc="Whether a resource that no ACL names is open to everyone."),
    # KIP-1191 share-group dead-letter queues (cluster configs, dynamic as in Kafka).
    ConfigDef("errors.deadletterqueue.auto.create.topics.enable", "bool", False, dynamic=True),
    ConfigDef("errors.deadletterqueue.topic.name.prefix", "string", "dlq.", dynamic=True),
    # KIP-714 client telemetry (Kafka's ServerConfigs, read-only).
    ConfigDef("telemetry.max.bytes", "int", 1_048_576, at_least(1),
              doc="The largest metrics payload (compressed) a client may push with PushTelemetry."),
]
SHOAL_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

# Kafka's other broker configs: accepted, stored and described as Kafka does, with no effect here.
INERT_DOC = "A Kafka broker config that Shoal accepts and reports but does not use: it has no effect."
_KAFKA_TYPES = {"boolean": "bool", "class": "class"}


def _inert(name: str, kafka_type: str, default: str | None, mode: str, internal: bool) -> ConfigDef:
    type_name = _KAFKA_TYPES.get(kafka_type, kafka_type)
    definition = ConfigDef(name, type_name, None, dynamic=mode != READ_ONLY, doc=INERT_DOC, internal=internal)
    if default is not None:
        definition = ConfigDef(name, type_name, definition.parse(default), dynamic=mode != READ_ONLY, doc=INERT_DOC,
                               internal=internal)
    return definition


# Apache Kafka 4.4, the referee, where it differs from the commit kafka_broker_defs was generated from: a config
# added (max.decompressed.message.bytes), configs it does not list (internal or not yet defined there), a default
# as it prints it.
KAFKA_4_4_CONFIGS: dict[str, tuple[str, str | None, str, bool]] = {
    **KAFKA_BROKER_CONFIGS,
    "max.decompressed.message.bytes": ("int", "2147483639", CLUSTER_WIDE, False),
    "ssl.client.auth": ("string", "none", KAFKA_BROKER_CONFIGS["ssl.client.auth"][2], False),
    **{name: (*KAFKA_BROKER_CONFIGS[name][:3], True) for name in (
        "group.consumer.assignor.offload.enable", "group.share.assignor.offload.enable",
        "group.streams.acceptable.recovery.lag", "group.streams.assignor.offload.enable",
        "group.streams.max.warmup.replicas", "group.streams.min.task.offset.interval.ms",
        "group.streams.num.warmup.replicas", "group.streams.task.offset.interval.ms")},
}
# Shoal's own configs (no Kafka config of that name): listed by DescribeConfigs even when not set. Other names
# Kafka does not define are listed only when set, as Kafka lists a config it does not know (its originals).
SHOAL_OWN = frozenset({"shoal.loop.lag.warn.ms", "shoal.share.state.fsync.interval.ms", "metrics.prometheus.listener",
                       "connections.max.unsent.bytes"})


def _listed_as_kafka(definition: ConfigDef) -> ConfigDef:
    """Shoal's definition, internal where Kafka's is (DescribeConfigs lists what Kafka lists)."""
    kafka = KAFKA_4_4_CONFIGS.get(definition.name)
    internal = kafka[3] if kafka is not None else definition.name not in SHOAL_OWN
    return definition if internal == definition.internal else replace(definition, internal=internal)


BROKER_CONFIGS: dict[str, ConfigDef] = {
    **{name: _inert(name, *facts) for name, facts in KAFKA_4_4_CONFIGS.items() if name not in SHOAL_CONFIGS},
    **{name: _listed_as_kafka(definition) for name, definition in SHOAL_CONFIGS.items()},
}


def kafka_default_text(name: str) -> str | None:
    """Kafka's default of a broker config as it prints it (None: no default); Shoal's for a name Kafka lacks."""
    kafka = KAFKA_4_4_CONFIGS.get(name)
    if kafka is not None:
        return kafka[1]
    return to_text(BROKER_CONFIGS[name].default) if name in BROKER_CONFIGS else None


def update_mode(name: str) -> str:
    """How a broker config may change at run time, by Kafka's rules (DynamicBrokerConfig): read-only,
    per-broker or cluster-wide. A Kafka-dynamic config that Shoal reads only at start (listeners, TLS and SASL
    settings, transaction.partition.verification.enable) is read-only here: a change could not take effect.
    Shoal's own configs: cluster-wide when Shoal applies them at run time."""
    kafka = KAFKA_4_4_CONFIGS.get(name)
    shoal = SHOAL_CONFIGS.get(name)
    if kafka is None:
        return CLUSTER_WIDE if shoal is not None and shoal.dynamic else READ_ONLY
    if kafka[2] != READ_ONLY and shoal is not None and not shoal.dynamic:
        return READ_ONLY
    return kafka[2]

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the keys DescribeConfigs lists as synonyms of a key.
_FAMILIES = (("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
             ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))
SYNONYM_FAMILIES: dict[str, tuple[str, ...]] = {
    **{key: family for family in _FAMILIES for key in family},
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}

# Keys whose effective value is derived from a family (Kafka: ms beats minutes beats hours).
DERIVED: dict[str, tuple[tuple[str, int], ...]] = {
    "log.retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", H)),
    "log.roll.ms": (("log.roll.ms", 1), ("log.roll.hours", H)),
    "log.roll.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", H)),
}


def default_text(name: str) -> str | None:
    """A broker config's value when nothing sets it, as Kafka shows it (a derived key: from the last key of its
    family, as BrokerConfig resolves it); the defaults of topic and group configs come from here."""
    family = DERIVED.get(name)
    if family is not None:
        key, scale = family[-1]
        return to_text(BROKER_CONFIGS[key].default * scale)
    return to_text(BROKER_CONFIGS[name].default)
