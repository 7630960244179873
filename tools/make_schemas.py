"""Generate Shoal's schema files from Apache Kafka's JSON message definitions.

Reads the reference specs (default ../shared/kafka-spec) and writes protocol/schemas/messages/*.json
and protocol/schemas/records/*.json. Only wire facts are kept: prose ("about", comments, listeners) is dropped,
validVersions is set to the range Shoal serves and every version range inside is clipped to it. It then checks
that docs/api-coverage.md names every API key of the definitions (exit status 1 if not).

    python tools/make_schemas.py [--spec DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = ROOT.parent / "shared" / "kafka-spec"

# api name -> (min, max) we serve; None means "the spec's full validVersions".
SERVED: dict[str, tuple[int, int] | None] = {
    "ApiVersions": (0, 5),
    "Metadata": (0, 13),
    "Produce": (3, 13),
    "Fetch": (4, 18),
    "ListOffsets": (1, 11),
    "CreateTopics": (2, 7),
    "DeleteTopics": (1, 6),
    "CreatePartitions": (0, 3),
    "DescribeConfigs": (1, 4),
    "IncrementalAlterConfigs": (0, 1),
    "DescribeCluster": (0, 2),
    "FindCoordinator": (0, 6),
    "InitProducerId": (0, 6),
    # Transactions (coordinator side). EndTxn v5, AddPartitionsToTxn v5, Produce v12 and TxnOffsetCommit v5 are
    # TV2 (KIP-890 part 2): advertised only while transaction.version 2 is finalized (broker.features).
    "AddPartitionsToTxn": (0, 5),
    "AddOffsetsToTxn": (0, 4),
    "EndTxn": (0, 5),
    # TxnOffsetCommit v6 names topics by id (KIP-1319).
    "TxnOffsetCommit": (0, 6),
    "DescribeTransactions": None,
    "ListTransactions": None,
    # Next milestone (groups and share groups): the spec's full range.
    "ShareGroupHeartbeat": None,
    "ShareGroupDescribe": None,
    "ShareFetch": None,
    "ShareAcknowledge": None,
    "InitializeShareGroupState": None,
    "ReadShareGroupState": None,
    "WriteShareGroupState": None,
    "DeleteShareGroupState": None,
    "ReadShareGroupStateSummary": None,
    "DescribeShareGroupOffsets": None,
    "AlterShareGroupOffsets": None,
    "DeleteShareGroupOffsets": None,
    "ConsumerGroupHeartbeat": None,
    "ConsumerGroupDescribe": None,
    "JoinGroup": None,
    "SyncGroup": None,
    "Heartbeat": None,
    "LeaveGroup": None,
    "OffsetCommit": None,
    "OffsetFetch": None,
    "ListGroups": None,
    "DescribeGroups": None,
    "DeleteGroups": None,
    "OffsetDelete": None,
    "DescribeTopicPartitions": None,
    "ListConfigResources": None,
    # Client telemetry (KIP-714).
    "GetTelemetrySubscriptions": None,
    "PushTelemetry": None,
    # Security (SASL, SCRAM credentials, ACLs): the spec's full range.
    "SaslHandshake": None,
    "SaslAuthenticate": None,
    "DescribeUserScramCredentials": None,
    "AlterUserScramCredentials": None,
    "CreateAcls": None,
    "DescribeAcls": None,
    "DeleteAcls": None,
    "CreateDelegationToken": None,
    "RenewDelegationToken": None,
    "ExpireDelegationToken": None,
    "DescribeDelegationToken": None,
    # Transactions, partition side (issue 17): markers from the coordinator, active producers.
    "WriteTxnMarkers": None,
    "DescribeProducers": None,
    # Client quotas (issue 18): the spec's full range.
    "DescribeClientQuotas": None,
    "AlterClientQuotas": None,
    # Partition admin (issue 18): DeleteRecords moves a log start offset; OffsetForLeaderEpoch answers the end
    # offset of an epoch (one epoch per partition on a single node).
    "DeleteRecords": None,
    "OffsetForLeaderEpoch": None,
    # Admin and cluster APIs for one node (issue 18): the spec's full range.
    "AlterConfigs": None,
    "DescribeLogDirs": None,
    "AlterReplicaLogDirs": None,
    "ElectLeaders": None,
    "AlterPartitionReassignments": None,
    "ListPartitionReassignments": None,
    "DescribeQuorum": None,
    "UpdateFeatures": None,
    # Streams groups (KIP-1071): the versions Kafka 4.4 serves.
    "StreamsGroupHeartbeat": (0, 1),
    "StreamsGroupDescribe": (0, 1),
}

# Embedded "data" schemas: the consumer protocol's subscription and assignment inside JoinGroup/SyncGroup bytes
# (the group coordinator reads subscribed topics and builds assignments for classic members of consumer groups).
DATA: dict[str, tuple[int, int] | None] = {"ConsumerProtocolSubscription": None, "ConsumerProtocolAssignment": None}

# Header schemas: request header v0 only served ControlledShutdown v0, which Kafka 4 removed.
HEADERS: dict[str, tuple[int, int]] = {"RequestHeader": (1, 2), "ResponseHeader": (0, 1)}

# Coordinator records we persist (legacy offsets are out of scope).
RECORD_PREFIXES = ("GroupMetadata", "OffsetCommit", "ConsumerGroup", "ShareGroup", "Share", "StreamsGroup")

# Metadata records are not in the reference specs; these are small equivalents with Kafka's
# record type ids so a future switch to Kafka's full definitions keeps the same keys.
OWN_RECORDS: list[dict[str, Any]] = [
    {
        "apiKey": 2,
        "type": "metadata",
        "name": "TopicRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "Name", "type": "string", "versions": "0+", "entityType": "topicName"},
            {"name": "TopicId", "type": "uuid", "versions": "0+"},
        ],
    },
    {
        "apiKey": 3,
        "type": "metadata",
        "name": "PartitionRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "PartitionId", "type": "int32", "versions": "0+", "default": "-1"},
            {"name": "TopicId", "type": "uuid", "versions": "0+"},
        ],
    },
    {
        "apiKey": 4,
        "type": "metadata",
        "name": "ConfigRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "ResourceType", "type": "int8", "versions": "0+"},
            {"name": "ResourceName", "type": "string", "versions": "0+"},
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Value", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        ],
    },
    {
        "apiKey": 12,
        "type": "metadata",
        "name": "FeatureLevelRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "FeatureLevel", "type": "int16", "versions": "0+"},
        ],
    },
    {
        "apiKey": 9,
        "type": "metadata",
        "name": "RemoveTopicRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [{"name": "TopicId", "type": "uuid", "versions": "0+"}],
    },
    {
        "apiKey": 10,
        "type": "metadata",
        "name": "DelegationTokenRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "Owner", "type": "string", "versions": "0+"},
            {"name": "Requester", "type": "string", "versions": "0+"},
            {"name": "Renewers", "type": "[]string", "versions": "0+"},
            {"name": "IssueTimestamp", "type": "int64", "versions": "0+"},
            {"name": "MaxTimestamp", "type": "int64", "versions": "0+"},
            {"name": "ExpirationTimestamp", "type": "int64", "versions": "0+"},
            {"name": "TokenId", "type": "string", "versions": "0+"},
        ],
    },
    {
        "apiKey": 26,
        "type": "metadata",
        "name": "RemoveDelegationTokenRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [{"name": "TokenId", "type": "string", "versions": "0+"}],
    },
    {
        "apiKey": 11,
        "type": "metadata",
        "name": "UserScramCredentialRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Mechanism", "type": "int8", "versions": "0+"},
            {"name": "Salt", "type": "bytes", "versions": "0+"},
            {"name": "StoredKey", "type": "bytes", "versions": "0+"},
            {"name": "ServerKey", "type": "bytes", "versions": "0+"},
            {"name": "Iterations", "type": "int32", "versions": "0+"},
        ],
    },
    {
        "apiKey": 18,
        "type": "metadata",
        "name": "AccessControlEntryRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "Id", "type": "uuid", "versions": "0+"},
            {"name": "ResourceType", "type": "int8", "versions": "0+"},
            {"name": "ResourceName", "type": "string", "versions": "0+"},
            {"name": "PatternType", "type": "int8", "versions": "0+"},
            {"name": "Principal", "type": "string", "versions": "0+"},
            {"name": "Host", "type": "string", "versions": "0+"},
            {"name": "Operation", "type": "int8", "versions": "0+"},
            {"name": "PermissionType", "type": "int8", "versions": "0+"},
        ],
    },
    {
        "apiKey": 19,
        "type": "metadata",
        "name": "RemoveAccessControlEntryRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [{"name": "Id", "type": "uuid", "versions": "0+"}],
    },
    {
        "apiKey": 22,
        "type": "metadata",
        "name": "RemoveUserScramCredentialRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Mechanism", "type": "int8", "versions": "0+"},
        ],
    },
    {
        "apiKey": 14,
        "type": "metadata",
        "name": "ClientQuotaRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "Entity", "type": "[]EntityData", "versions": "0+", "fields": [
                {"name": "EntityType", "type": "string", "versions": "0+"},
                {"name": "EntityName", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            ]},
            {"name": "Key", "type": "string", "versions": "0+"},
            {"name": "Value", "type": "float64", "versions": "0+"},
            {"name": "Remove", "type": "bool", "versions": "0+"},
        ],
    },
    {
        "apiKey": 15,
        "type": "metadata",
        "name": "ProducerIdsRecord",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [
            {"name": "BrokerId", "type": "int32", "versions": "0+", "entityType": "brokerId"},
            {"name": "BrokerEpoch", "type": "int64", "versions": "0+", "default": "-1"},
            {"name": "NextProducerId", "type": "int64", "versions": "0+"},
        ],
    },
]

# Keys that carry wire facts (or facts handlers use, like mapKey/entityType); all else is prose.
FIELD_KEYS = (
    "name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default", "flexibleVersions",
    "mapKey", "entityType", "ignorable", "zeroCopy", "fields",
)


def strip_comments(text: str) -> str:
    """Remove // and /* */ comments outside string literals (Kafka's JSON allows them)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load_spec(path: Path) -> dict[str, Any]:
    return json.loads(strip_comments(path.read_text()))


def parse_range(text: str) -> tuple[int, int] | None:
    """'3+' -> (3, BIG), '1-4' -> (1, 4), '2' -> (2, 2), 'none' -> None."""
    text = text.strip()
    if text == "none":
        return None
    if text.endswith("+"):
        return int(text[:-1]), 1 << 15
    if "-" in text:
        lo, hi = text.split("-")
        return int(lo), int(hi)
    return int(text), int(text)


def clip(text: str | None, lo: int, hi: int) -> str | None:
    """Intersect a range string with [lo, hi]; None if empty. Open ranges stay open."""
    if text is None:
        return None
    r = parse_range(text)
    if r is None:
        return None
    a, b = max(r[0], lo), min(r[1], hi)
    if a > b:
        return None
    if text.strip().endswith("+"):
        return f"{a}+"
    return str(a) if a == b else f"{a}-{b}"


def clip_fields(fields: list[dict[str, Any]], lo: int, hi: int) -> list[dict[str, Any]]:
    out = []
    for f in fields:
        # A tagged field may leave out "versions": Kafka's generator takes its taggedVersions then.
        f = f if "versions" in f else {**f, "versions": f["taggedVersions"]}
        versions = clip(f["versions"], lo, hi)
        if versions is None:
            continue
        g: dict[str, Any] = {}
        for key in FIELD_KEYS:
            if key not in f:
                continue
            value = f[key]
            if key == "versions":
                value = versions
            elif key in ("nullableVersions", "taggedVersions"):
                value = clip(value, lo, hi)
                if value is None:
                    continue
            elif key == "flexibleVersions":  # field-level override (RequestHeader.ClientId)
                value = clip(value, lo, hi) or "none"
            elif key == "fields":
                value = clip_fields(value, lo, hi)
            g[key] = value
        if "tag" in f and "taggedVersions" not in g:
            del g["tag"]  # tagged only in versions we do not serve
        out.append(g)
    return out


def referenced_types(fields: list[dict[str, Any]]) -> set[str]:
    names: set[str] = set()
    for f in fields:
        names.add(f["type"].removeprefix("[]"))
        names |= referenced_types(f.get("fields", []))
    return names


def convert(spec: dict[str, Any], served: tuple[int, int] | None) -> dict[str, Any]:
    valid = parse_range(spec["validVersions"])
    if valid is None:
        raise ValueError(f"{spec['name']} has no valid versions")
    lo, hi = served if served is not None else valid
    if lo < valid[0] or hi > valid[1]:
        raise ValueError(f"{spec['name']}: served {lo}-{hi} outside spec {spec['validVersions']}")
    out: dict[str, Any] = {}
    if "apiKey" in spec:
        out["apiKey"] = spec["apiKey"]
    out["type"] = spec["type"]
    out["name"] = spec["name"]
    out["validVersions"] = str(lo) if lo == hi else f"{lo}-{hi}"
    out["flexibleVersions"] = clip(spec.get("flexibleVersions", "none"), lo, hi) or "none"
    out["fields"] = clip_fields(spec["fields"], lo, hi)
    commons = []
    for struct in spec.get("commonStructs", []):
        versions = clip(struct["versions"], lo, hi)
        if versions is None:
            continue
        commons.append({"name": struct["name"], "versions": versions,
                        "fields": clip_fields(struct["fields"], lo, hi)})
    # Drop common structs only reachable from clipped-away fields (iterate: structs nest).
    used = referenced_types(out["fields"])
    while True:
        more = used | set().union(*(referenced_types(c["fields"]) for c in commons if c["name"] in used))
        if more == used:
            break
        used = more
    commons = [c for c in commons if c["name"] in used]
    if commons:
        out["commonStructs"] = commons
    return out


def write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    ap.add_argument("--out", type=Path, default=ROOT / "protocol" / "schemas")
    args = ap.parse_args(argv)
    messages = args.out / "messages"
    records = args.out / "records"
    messages.mkdir(parents=True, exist_ok=True)
    records.mkdir(parents=True, exist_ok=True)
    count = 0
    for api, served in SERVED.items():
        for kind in ("Request", "Response"):
            spec = load_spec(args.spec / "message" / f"{api}{kind}.json")
            write(messages / f"{api}{kind}.json", convert(spec, served))
            count += 1
    for name, served in DATA.items():
        write(messages / f"{name}.json", convert(load_spec(args.spec / "message" / f"{name}.json"), served))
        count += 1
    for name, served in HEADERS.items():
        write(messages / f"{name}.json", convert(load_spec(args.spec / "message" / f"{name}.json"), served))
        count += 1
    for path in sorted((args.spec / "records").rglob("*.json")):
        if path.stem.startswith(RECORD_PREFIXES):
            write(records / path.name, convert(load_spec(path), None))
            count += 1
    for record in OWN_RECORDS:
        write(records / f"{record['name']}.json", record)
        count += 1
    print(f"wrote {count} schema files under {args.out}", file=sys.stderr)
    # The API coverage table must name every API of these definitions (tools/api_coverage.py).
    from tools.api_coverage import differences, load_table, spec_apis

    diffs = differences(load_table(), spec_apis(args.spec))
    for line in diffs:
        print(f"docs/api-coverage.md: {line}", file=sys.stderr)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
