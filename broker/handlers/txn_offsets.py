"""TxnOffsetCommit (28): a transactional producer commits a consumer group's offsets in its transaction (KIP-98,
KIP-447), a thin wrapper over the group coordinator (`commit_txn_offsets`).

As Kafka's KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id, then READ on the group (each
refusal answers every partition), then READ per topic (TOPIC_AUTHORIZATION_FAILED); unknown topics and partitions
are answered UNKNOWN_TOPIC_OR_PARTITION here, the rest goes to the coordinator. Before v2 a loading coordinator
answers COORDINATOR_NOT_AVAILABLE (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS). From v5
(transaction.version 2, served only while it is finalized: broker.features) the group coordinator adds the
offsets partition to the transaction itself: a TV2 client sends no AddOffsetsToTxn. v6 (KIP-1319) names topics by
id, as Kafka 4.4: an id this broker does not know (or the zero id) is UNKNOWN_TOPIC_ID for each of its partitions,
and the answer carries the ids.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.cluster.manager import TopicManager
from broker.context import RequestContext
from broker.groups.runtime import GroupCoordinatorRuntime
from broker.handlers.apis import Apis, Request, Response
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode

TXN_OFFSET_COMMIT = 28


ZERO_UUID = uuid.UUID(int=0)


def _answer(topics, code: ErrorCode) -> list[dict[str, Any]]:
    return [{"name": t["name"], "topic_id": t["topic_id"],
             "partitions": [{"partition_index": p.partition_index, "error_code": int(code)} for p in t["partitions"]]}
            for t in topics]


def _merge(*parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_topic: dict[tuple, dict[str, Any]] = {}
    for topics in parts:
        for t in topics:
            key = (t["name"], t.get("topic_id", ZERO_UUID))
            entry = by_topic.setdefault(key, {"name": t["name"], "topic_id": t.get("topic_id", ZERO_UUID),
                                              "partitions": []})
            entry["partitions"] = entry["partitions"] + list(t["partitions"])
    return list(by_topic.values())


def _named(req, registry, by_id: bool) -> list[dict[str, Any]]:
    """The request's topics as {name, topic_id, partitions}: v6 names them by id (an id not known, or the zero
    id, keeps an empty name), before v6 by name."""
    topics = []
    for t in req.topics:
        if by_id:
            info = registry.by_id(t.topic_id) if t.topic_id != ZERO_UUID else None
            topics.append({"name": info.name if info is not None else "", "topic_id": t.topic_id,
                           "partitions": t.partitions})
        else:
            topics.append({"name": t.name, "topic_id": ZERO_UUID, "partitions": t.partitions})
    return topics


class TxnOffsetApis(Apis):
    """TxnOffsetCommit: transactional offset commits, in the group coordinator."""

    def __init__(self, groups: GroupCoordinatorRuntime, topics: TopicManager) -> None:
        self._groups = groups
        self._topics = topics

    async def txn_offset_commit(self, ctx: RequestContext, req: Request) -> Response:
        version = ctx.api_version
        by_id = version >= 6
        registry = self._topics.registry
        requested = _named(req, registry, by_id)
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            topics = _answer(requested, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
            topics = _answer(requested, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        else:
            refused: list[dict[str, Any]] = []
            valid: list[dict[str, Any]] = []
            for topic in requested:
                if by_id and not topic["name"]:
                    refused += _answer([topic], ErrorCode.UNKNOWN_TOPIC_ID)
                    continue
                if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic["name"]):
                    refused += _answer([topic], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    continue
                info = registry.get(topic["name"])
                if info is None:
                    refused += _answer([topic], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                known = [p for p in topic["partitions"] if 0 <= p.partition_index < info.num_partitions]
                unknown = [p for p in topic["partitions"] if not 0 <= p.partition_index < info.num_partitions]
                if unknown:
                    refused += _answer([{**topic, "partitions": unknown}],
                                       ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                if known:
                    valid.append({"name": topic["name"], "topic_id": topic["topic_id"],
                                  "partitions": [dict(p) for p in known]})
            answered: list[dict[str, Any]] = []
            if valid:
                request = {"transactional_id": req.transactional_id, "group_id": req.group_id,
                           "producer_id": req.producer_id, "producer_epoch": req.producer_epoch,
                           "generation_id_or_member_epoch": req.get("generation_id_or_member_epoch", -1),
                           "member_id": req.get("member_id", ""), "group_instance_id": req.get("group_instance_id"),
                           "topics": [{"name": t["name"], "partitions": t["partitions"]} for t in valid]}
                ids = {t["name"]: t["topic_id"] for t in valid}
                answered = [{**t, "topic_id": ids.get(t["name"], ZERO_UUID)} for t in
                            (await self._groups.commit_txn_offsets(request, version))["topics"]]
            topics = _merge(refused, answered)
        if version < 2:
            for t in topics:
                for p in t["partitions"]:
                    if p["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                        p["error_code"] = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return {"throttle_time_ms": 0, "topics": topics}

    HANDLERS = {TXN_OFFSET_COMMIT: txn_offset_commit}
