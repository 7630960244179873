"""Fetch (api key 1): read whole batches from the logs, with MaxBytes/PartitionMaxBytes and long polling.

Sessionless: every request is served as a full fetch and SessionId 0 tells the client no session was created
(Kafka does the same when its fetch-session cache is full), so incremental fetch sessions are never needed.

IsolationLevel 1 (read_committed) reads below the last stable offset only and gets the aborted transactions of
what it reads; every answer carries the real LSO (the partitions' transaction state is loaded first, off the loop,
on a partition's first fetch after a start). Markers wake parked fetches, so a read_committed long poll returns
once the LSO moves.

Batches are served as stored whatever the version: Kafka 4 converts nothing down (KIP-896), zstd batches to Fetch
before v10 included.

CurrentLeaderEpoch (v9+, KIP-320) is checked against the partition's leader epoch (always 0 here): older is
FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, a negative one no check (Kafka's FetchRequest reads it as none).
A follower's fetch (ReplicaId >= 0) needs CLUSTER_ACTION and, a single node having no follower, gets
NOT_LEADER_OR_FOLLOWER; from v16 that error carries the partition's leader (KIP-951). A partition whose read fails that way (or offline,
or out of range) answers the fetch at once, as Kafka's ReplicaManager.fetchMessages (errorReadingData).

v13+ names topics by id (UNKNOWN_TOPIC_ID for an id not known). v18 (KIP-1166) changes only the request: a
follower sends the high watermark it knows (a tagged partition field) so its leader can answer as soon as that
moves; the response is v17's. With no followers, Shoal reads the field and ignores it, as Kafka does for consumers.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from broker.cluster.manager import TopicManager
from broker.config import BrokerConfig
from broker.config.request_limits import RequestLimitsConfig
from broker.context import RequestContext
from broker.handlers.apis import Apis, Request, Response
from broker.node import Endpoints
from broker.quotas.service import QuotaService
from broker.replica_manager import LEADER_EPOCH, FetchResult, ReplicaManager
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from protocol.codec import response_codec
from protocol.errors import ErrorCode

FETCH = 1
ZERO_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1
_LEADER_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
# answered from the request's checks (Kafka's FetchResponse.partitionResponse), not from a read
_REFUSED_BEFORE_READ = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  ErrorCode.UNKNOWN_TOPIC_ID})


def _resolve(topics, topic, version):
    if version >= 13:
        info = topics.registry.by_id(topic.topic_id)
        return info, ErrorCode.UNKNOWN_TOPIC_ID
    return topics.registry.get(topic.topic), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@dataclass(slots=True)
class _Topic:
    """A topic of the request, its partitions named once (see _requested)."""

    topic: str | None
    topic_id: uuid.UUID
    partitions: list

    def get(self, key: str, default=None):
        return getattr(self, key, default)


def _requested(req, version: int) -> list[_Topic]:
    """The request's partitions as Kafka keys them (a LinkedHashMap by topic and partition): a partition named
    twice is fetched once, where it was first named, with what it was named with last; consecutive partitions of
    one topic are one topic of the response."""
    parts: dict[tuple[object, int], tuple[Any, Any]] = {}  # the decoded topic and partition
    for topic in req.topics:
        key = topic.get("topic_id", ZERO_UUID) if version >= 13 else topic.get("topic")
        for part in topic.partitions:
            parts[(key, part.partition)] = (topic, part)
    out: list[_Topic] = []
    last_key: object = object()
    for (key, _index), (topic, part) in parts.items():
        if key != last_key:
            out.append(_Topic(topic.get("topic"), topic.get("topic_id", ZERO_UUID), []))
            last_key = key
        out[-1].partitions.append(part)
    return out


def _aborted(result: FetchResult, read_committed: bool) -> list[dict] | None:
    """As Kafka: a partition refused before its read (unknown, unauthorized) has the response's default, an empty
    list; a read that failed has none (null), and so has a read_uncommitted one."""
    if result.error in _REFUSED_BEFORE_READ:
        return []
    if not read_committed or result.error != ErrorCode.NONE:
        return None
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset}
            for t in result.aborted_transactions or ()]


def _error_response(req, version: int, code: ErrorCode) -> dict:
    """Kafka's FetchRequest.getErrorResponse: the error at the top (v7+) and, before v13, for every partition
    the request names."""
    responses = [] if version >= 13 else [
        {"topic": t.get("topic"), "topic_id": t.get("topic_id", ZERO_UUID), "partitions": [
            {"partition_index": p.partition, "error_code": int(code), "high_watermark": -1, "last_stable_offset": -1,
             "log_start_offset": -1, "aborted_transactions": [], "preferred_read_replica": -1, "records": b""}
            for p in t.partitions]} for t in req.topics]
    return {"throttle_time_ms": 0, "error_code": int(code), "session_id": req.get("session_id", 0),
            "responses": responses}


class FetchApis(Apis):
    """Fetch, through the replica manager (long poll on its appends)."""

    def __init__(self, topics: TopicManager, replicas: ReplicaManager, quotas: QuotaService,
                 config: BrokerConfig, endpoints: Endpoints) -> None:
        self._topics = topics
        self._replicas = replicas
        self._quotas = quotas
        self._config = config
        self._endpoints = endpoints

    def _denied(self, ctx: RequestContext, topics: list[_Topic]) -> set[str | None]:
        """Topics the client may not READ (Kafka answers their partitions TOPIC_AUTHORIZATION_FAILED)."""
        denied: set[str | None] = set()
        for topic in topics:
            info, _ = _resolve(self._topics, topic, ctx.api_version)
            name = info.name if info is not None else topic.get("topic")
            if name and not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
                denied.add(name)
        return denied

    def _collect(self, ctx: RequestContext, req: Request, topics: list[_Topic], denied: set[str | None],
                 max_bytes: int, follower: bool = False) -> tuple[list[dict], int, bool]:
        """One pass over the requested partitions: build the response topics, count the bytes found and tell whether
        reading a partition failed (Kafka's errorReadingData: offline, fenced or unknown leader epoch, offset out of
        range), which answers a long poll at once."""
        version = ctx.api_version
        remaining = max_bytes
        read_committed = req.get("isolation_level", 0) == READ_COMMITTED
        total = 0
        read_error = False
        responses = []
        for topic in topics:
            info, missing = _resolve(self._topics, topic, version)
            refused = (info.name if info is not None else topic.get("topic")) in denied
            partitions = []
            for part in topic.partitions:
                if refused:
                    result = FetchResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                elif info is None:
                    result = FetchResult(missing)
                else:
                    limit = max(0, min(part.partition_max_bytes, remaining))
                    # KIP-74: the first partition that has data returns at least one whole batch.
                    # (-1 before v9; Kafka's FetchRequest reads any negative epoch as none given)
                    result = self._replicas.read(info, part.partition, part.fetch_offset, limit,
                                                 min_one=total == 0, read_committed=read_committed,
                                                 follower=follower,
                                                 current_leader_epoch=max(part.current_leader_epoch, -1))
                    # a partition past the topic's count is refused before the read in Kafka (KafkaApis' metadata check)
                    read_error = read_error or result.error not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    size = len(result.records)
                    total += size
                    remaining -= size
                answer = {
                    "partition_index": part.partition,
                    "error_code": int(result.error),
                    "high_watermark": result.high_watermark,
                    "last_stable_offset": result.last_stable_offset,
                    "log_start_offset": result.log_start_offset,
                    "aborted_transactions": _aborted(result, read_committed),
                    "preferred_read_replica": -1,
                    "records": result.records,
                }
                if version >= 16 and result.error in _LEADER_ERRORS:
                    # KIP-951: the partition's leader (this node) comes with the error, as Kafka's
                    answer["current_leader"] = {"leader_id": self._endpoints.node_id,
                                                "leader_epoch": LEADER_EPOCH}
                partitions.append(answer)
            responses.append(
                {"topic": topic.get("topic"), "topic_id": topic.get("topic_id", ZERO_UUID), "partitions": partitions}
            )
        return responses, total, read_error

    async def fetch(self, ctx: RequestContext, req: Request) -> Response:
        version = ctx.api_version
        if version >= 7 and req.session_epoch not in (-1, 0):
            # We never hand out fetch sessions, so an incremental fetch (session id 0 included, as Kafka's
            # FetchManager looks it up too) refers to one we do not have.
            return {"error_code": int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), "session_id": 0, "responses": []}
        if version >= 4 and req.isolation_level not in (0, READ_COMMITTED):
            # Kafka fails to read the isolation level with an unexpected exception:
            # FetchRequest.getErrorResponse
            ctx.log.info("fetch refused: unknown isolation level", isolation_level=req.isolation_level)
            return _error_response(req, version, ErrorCode.UNKNOWN_SERVER_ERROR)
        topics = _requested(req, version)
        replica_id = req.replica_state.replica_id if version >= 15 else req.get("replica_id", -1)
        follower = replica_id >= 0
        denied: set[str | None]  # None: the topics named by an id that is unknown (refused to a follower)
        if not follower:
            denied = self._denied(ctx, topics)
        elif ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            denied = set()  # a broker may read every topic (Kafka checks no topic ACL for followers)
        else:  # every partition TOPIC_AUTHORIZATION_FAILED, known or not
            denied = {t.topic if version < 13 else None for t in topics} | {
                info.name for t in topics if (info := _resolve(self._topics, t, version)[0]) is not None}
        keys = self._watch_keys(ctx, topics, denied)
        await self._replicas.ensure_loaded(keys)  # the LSO needs the transaction state
        # Kafka bounds MaxBytes by fetch.max.bytes and by what the client's consumer_byte_rate allows in a
        # quota window, and MinBytes by the result
        max_bytes = int(min(req.max_bytes if version >= 3 else 0x7FFFFFFF,
                            RequestLimitsConfig.from_config(self._config).fetch_max_bytes,
                            self._quotas.fetch_max_bytes(ctx)))
        min_bytes = min(req.min_bytes, max_bytes)
        responses, total, read_error = self._collect(ctx, req, topics, denied, max_bytes, follower)
        wait_ms = req.max_wait_ms
        # As Kafka's ReplicaManager.fetchMessages, a partition that failed to read answers at once; partitions refused
        # before the read (authorization, unknown topic) do not, the others are waited for.
        if total < min_bytes and wait_ms > 0 and not read_error:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait_ms / 1000
            while total < min_bytes:
                left = deadline - loop.time()
                if left <= 0 or not keys:
                    break
                if not await self._replicas.wait_for_append(keys, left):
                    break
                responses, total, read_error = self._collect(ctx, req, topics, denied, max_bytes, follower)
                if read_error:
                    break
        response = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
        if self._quotas.fetch.enabled:
            # Over consumer_byte_rate: an empty answer with the throttle time, as Kafka's getThrottledResponse
            size = len(response_codec(FETCH, version).encode(response))
            ctx.throttle_ms = self._quotas.fetch_throttle(ctx, size)
            if ctx.throttle_ms > 0:
                return {"throttle_time_ms": ctx.throttle_ms, "error_code": 0, "session_id": 0,
                        "responses": []}
        return response

    def _watch_keys(self, ctx: RequestContext, topics: list[_Topic], denied: set[str | None]
                    ) -> list[tuple[str, int]]:
        keys: list[tuple[str, int]] = []
        for topic in topics:
            info, _ = _resolve(self._topics, topic, ctx.api_version)
            if info is not None and info.name not in denied:
                keys.extend((info.name, p.partition) for p in topic.partitions if 0 <= p.partition < info.num_partitions)
        return keys

    HANDLERS = {FETCH: fetch}
