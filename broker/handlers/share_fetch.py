"""ShareFetch (78) and ShareAcknowledge (79), v1-2: share sessions, acknowledgements, acquisition, long poll.

Thin: the session cache and the share-partition manager (broker.share.manager) do the work, the long poll is
broker.share.delayed_fetch. Acknowledgements are made durable (WriteShareGroupState) before their
AcknowledgeErrorCode is answered.
"""

from __future__ import annotations

import asyncio
import uuid
from itertools import chain
from typing import Any

from broker.handlers.share_groups import valid_member_id
from broker.security.acl import AclOperation, ResourceType
from broker.share.delayed_fetch import DelayedShareFetch, ShareFetchParams
from broker.share.inflight import ACK_REJECT, ACK_RENEW
from broker.share.partition import ShareError
from broker.share.sessions import FINAL_EPOCH
from protocol.errors import ErrorCode

SHARE_FETCH = 78
SHARE_ACKNOWLEDGE = 79
RECORD_LIMIT_MODE = 1  # ShareAcquireMode (v2): MaxRecords is a hard limit


def _top_error(code: ErrorCode, message: str | None = None) -> dict:
    # Kafka's ShareFetch/ShareAcknowledge error responses (getErrorResponse) carry no message: `message` is for
    # the log only.
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None, "responses": [],
            "node_endpoints": []}


def _renew_only_refusal(req) -> str | None:
    """Kafka's check of an is_renew_ack ShareFetch (v2): it only acknowledges, so it must fetch nothing."""
    wrong = [f"{name} must be set to 0, " for name, value in (
        ("maxBytes", req.max_bytes), ("minBytes", req.min_bytes), ("maxRecords", req.max_records),
        ("maxWaitMs", req.max_wait_ms)) if value != 0]
    return "".join(wrong) + "if isRenewAck is true." if wrong else None


def _ack_batches(batches, version: int, renew_ack: bool) -> tuple[list[tuple[int, int, list[int]]], bool] | None:
    """The acknowledgement batches as (first, last, types), and whether any is a RENEW; None for a type the
    version does not know."""
    highest = ACK_RENEW if version >= 2 else ACK_REJECT
    out = []
    renew = False
    for b in batches:
        types = list(b.acknowledge_types)
        if types:
            top = max(types)
            if min(types) < 0 or top > highest:
                return None
            renew = renew or top == ACK_RENEW  # the highest type there is
        out.append((b.first_offset, b.last_offset, types))
    if renew and not renew_ack:
        return None  # Kafka: RENEW only in a request flagged IsRenewAck
    return out, renew


def _requested(topics) -> tuple[list[tuple[uuid.UUID, int]], dict[tuple[uuid.UUID, int], Any]]:
    """The partitions a ShareFetch names, and those of them carrying acknowledgements, in one pass."""
    requested: list[tuple[uuid.UUID, int]] = []
    acks: dict[tuple[uuid.UUID, int], Any] = {}
    for t in topics:
        topic_id = t.topic_id
        for p in t.partitions:
            tp = (topic_id, p.partition_index)
            requested.append(tp)
            if p.acknowledgement_batches:
                acks[tp] = p
    return requested, acks


async def _acknowledge(ctx, group: str, member: str, tp: tuple[uuid.UUID, int], part, version: int, renew_ack: bool
                       ) -> tuple[ErrorCode, str | None]:
    mgr = ctx.broker.share_partitions
    parsed = _ack_batches(part.acknowledgement_batches, version, renew_ack)
    if parsed is None:
        return ErrorCode.INVALID_REQUEST, None  # Kafka refuses the type before the share-partition: no message
    batches, renew = parsed
    if renew and not mgr.renew_enabled(group):
        return ErrorCode.INVALID_RECORD_STATE, "Renew acknowledgements are disabled for the group " \
            "(share.renew.acknowledge.enable=false)."
    try:
        sp = mgr.loaded(group, *tp) or await mgr.partition(group, *tp)
    except ShareError as err:
        return err.code, err.message
    code = await mgr.acknowledge(sp, member, batches)
    return code, (sp.inflight.refusal_message(member, batches) if code == ErrorCode.INVALID_RECORD_STATE
                  or code == ErrorCode.INVALID_REQUEST else None)


def _not_a_member(group: str, member: str) -> dict:
    # Kafka drops the share sessions of members that leave the group or expire; a ShareFetch from one is then
    # answered SHARE_SESSION_NOT_FOUND. A session is opened only for a member of the group, so the same
    # answer goes to a member id the group coordinator does not know (clients re-join and retry).
    return _top_error(ErrorCode.SHARE_SESSION_NOT_FOUND, f"Member {member} is not a member of share group {group}.")


async def _acknowledge_all(ctx, group: str, member: str, parts: list[tuple[tuple[uuid.UUID, int], Any]],
                           version: int, renew_ack: bool = False) -> list[tuple[ErrorCode, str | None]]:
    """Acknowledge several partitions together: their state writes go out concurrently (one group commit)
    instead of one fsync after another. One partition (the common case) is awaited directly: a task of its own
    would only cost event-loop turns."""
    if len(parts) == 1:
        (tp, p), = parts
        return [await _acknowledge(ctx, group, member, tp, p, version, renew_ack)]
    return list(await asyncio.gather(*(_acknowledge(ctx, group, member, tp, p, version, renew_ack)
                                       for tp, p in parts)))


def _unreadable(ctx, topic_ids: set[uuid.UUID]) -> set[uuid.UUID]:
    """Topics (by id) the client may not READ: share consumption needs READ on the topic and on the group."""
    registry = ctx.broker.topics.registry
    out = set()
    for topic_id in topic_ids:
        info = registry.by_id(topic_id)
        if info is not None and not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, info.name):
            out.add(topic_id)
    return out


def _leader(ctx) -> dict:
    return {"leader_id": ctx.broker.node.node_id, "leader_epoch": 0}


def _no_group(ctx, requested: list[tuple[uuid.UUID, int]], lock_ms: int) -> dict:
    responses: dict[uuid.UUID, list[dict]] = {}
    for tid, p in requested:
        responses.setdefault(tid, []).append({
            "partition_index": p, "error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": None,
            "acknowledge_error_code": 0, "acknowledge_error_message": None, "current_leader": _leader(ctx),
            "records": b"", "acquired_records": []})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": lock_ms,
            "responses": [{"topic_id": tid, "partitions": parts} for tid, parts in responses.items()],
            "node_endpoints": []}


async def handle_share_fetch(ctx, req) -> dict:
    broker = ctx.broker
    mgr = broker.share_partitions
    version = ctx.api_version
    group, member, epoch = req.group_id, req.member_id, req.share_session_epoch
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group):
        return _top_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not valid_member_id(member):
        return _top_error(ErrorCode.INVALID_REQUEST, "Invalid member id in the request.")
    if version >= 2 and req.get("is_renew_ack", False) and (refused := _renew_only_refusal(req)) is not None:
        return _top_error(ErrorCode.INVALID_REQUEST, refused)
    requested, acks = _requested(req.topics)
    if not group:
        # Kafka opens the session, but no share-partition of group "" can be loaded: each requested partition
        # is answered UNKNOWN_SERVER_ERROR.
        return _no_group(ctx, requested, mgr.lock_duration_ms(group))
    forgotten = req.forgotten_topics_data
    forget = [(t.topic_id, p) for t in forgotten for p in t.partitions] if forgotten else []
    if epoch == 0 and not mgr.membership(group, member)[0]:
        return _not_a_member(group, member)
    # A final request (-1) lists partitions only to acknowledge them: they join no session.
    add = [] if epoch == FINAL_EPOCH else requested
    outcome = mgr.sessions.begin(group, member, epoch, add, forget, bool(acks))
    if outcome.error != ErrorCode.NONE:
        return _top_error(outcome.error, outcome.message)
    session = outcome.session
    if epoch == FINAL_EPOCH:
        mgr.session_closed(group, member)
    elif epoch == 0:
        mgr.session_opened(group, member, ctx.connection.id)
    lock_ms = mgr.lock_duration_ms(group)

    results: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}
    leader = _leader(ctx)  # the same for every partition: one node leads them all

    def entry(tp: tuple[uuid.UUID, int]) -> dict[str, Any]:
        if tp not in results:
            results[tp] = {"partition_index": tp[1], "error_code": 0, "error_message": None,
                           "acknowledge_error_code": 0, "acknowledge_error_message": None,
                           "current_leader": leader, "records": b"", "acquired_records": []}
        return results[tp]

    denied = _unreadable(ctx, {tp[0] for tp in chain(requested, session.partitions)})
    for tp in [tp for tp in acks if tp[0] in denied] if denied else ():
        del acks[tp]
        entry(tp)["acknowledge_error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if acks:
        outcomes = await _acknowledge_all(ctx, group, member, list(acks.items()), version,
                                          version >= 2 and bool(req.get("is_renew_ack", False)))
        for tp, (code, message) in zip(acks, outcomes, strict=True):
            e = entry(tp)
            e["acknowledge_error_code"], e["acknowledge_error_message"] = int(code), message

    if epoch == FINAL_EPOCH:
        # Session closed: the member's records go back to the others at once, in every partition of the group
        # (a forgotten partition may still hold locks). A session re-opened with epoch 0 keeps them, as in Kafka
        # (the member may still acknowledge what it holds).
        await mgr.release_member(group, member)

    renew_only = version >= 2 and req.get("is_renew_ack", False)
    if epoch != FINAL_EPOCH and not renew_only:
        readable = list(session.partitions)
        if denied:
            for tp in readable:
                if tp[0] in denied:
                    entry(tp)["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            readable = [tp for tp in readable if tp[0] not in denied]
        await _fetch(ctx, req, group, member, readable, entry)
        if epoch > 0:
            # Kafka moves the share-partitions that returned records to the end of an incremental session's list,
            # so that the session's next fetches (rotated from there) start with the others.
            for tp, e in results.items():
                if e["acquired_records"] and tp in session.partitions:
                    del session.partitions[tp]
                    session.partitions[tp] = None

    responses: dict[uuid.UUID, list[dict]] = {}
    for (tid, _), e in results.items():
        responses.setdefault(tid, []).append(e)
    # consumer_byte_rate (Kafka records ShareFetch bytes too); the acquired records are still handed over
    ctx.throttle_ms = broker.quotas.share_fetch_throttle(
        ctx, sum(len(e.get("records") or b"") for e in results.values()))
    return {"throttle_time_ms": ctx.throttle_ms, "error_code": 0, "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms,
            "responses": [{"topic_id": tid, "partitions": parts} for tid, parts in responses.items()],
            # Kafka lists the leaders of partitions answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH only;
            # this broker leads every partition it serves, so there are none.
            "node_endpoints": []}


async def _fetch(ctx, req, group: str, member: str, tps: list[tuple[uuid.UUID, int]], entry) -> None:
    # (max wait, min bytes, max bytes, max records, record_limit mode, session epoch); Kafka caps MaxBytes by
    # fetch.max.bytes and by what the client's consumer_byte_rate allows in a quota window, and MinBytes by that
    max_bytes = int(min(req.max_bytes, ctx.broker.config.get("fetch.max.bytes"), ctx.broker.quotas.fetch_max_bytes(ctx)))
    params = ShareFetchParams(
        req.max_wait_ms, min(req.min_bytes, max_bytes), max_bytes,
        req.max_records, ctx.api_version >= 2 and req.get("share_acquire_mode", 0) == RECORD_LIMIT_MODE,
        req.share_session_epoch)
    fetch = DelayedShareFetch(ctx.broker.share_partitions, group, member, params)
    results = await fetch.run(tps)
    if req.share_session_epoch == 0:
        for tp in fetch.visited:
            entry(tp)
    for tp, got in results.items():
        e = entry(tp)
        if got.acquired is None:
            e["error_code"], e["error_message"] = int(got.error), got.message
        else:
            e["records"] = got.acquired.records
            e["acquired_records"] = [{"first_offset": r.first_offset, "last_offset": r.last_offset,
                                      "delivery_count": r.delivery_count} for r in got.acquired.ranges]


async def handle_share_acknowledge(ctx, req) -> dict:
    mgr = ctx.broker.share_partitions
    version = ctx.api_version
    group, member, epoch = req.group_id, req.member_id, req.share_session_epoch
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group):
        return _top_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not valid_member_id(member) or not group:
        return _top_error(ErrorCode.INVALID_REQUEST, "Invalid member or group id in the request.")
    outcome = mgr.sessions.acknowledge(group, member, epoch)
    if outcome.error != ErrorCode.NONE:
        return _top_error(outcome.error, outcome.message)
    if epoch == FINAL_EPOCH:
        mgr.session_closed(group, member)
    denied = _unreadable(ctx, {t.topic_id for t in req.topics})
    pairs = [((t.topic_id, p.partition_index), p) for t in req.topics for p in t.partitions if t.topic_id not in denied]
    outcomes = iter(await _acknowledge_all(ctx, group, member, pairs, version,
                                           version >= 2 and bool(req.get("is_renew_ack", False))))
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, message = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None) if t.topic_id in denied else next(outcomes)
            parts.append({"partition_index": p.partition_index, "error_code": int(code), "error_message": message,
                          "current_leader": _leader(ctx)})
        responses.append({"topic_id": t.topic_id, "partitions": parts})
    if outcome.ended is not None:
        await mgr.release_member(group, member)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "acquisition_lock_timeout_ms": mgr.lock_duration_ms(group), "responses": responses,
            "node_endpoints": []}


HANDLERS = {SHARE_FETCH: handle_share_fetch, SHARE_ACKNOWLEDGE: handle_share_acknowledge}
