"""shoal_client.cluster.ClusterMetadata (the client's view of brokers and partition leaders) and how the share-group
member reads leader changes out of ShareFetch answers, on answers encoded and decoded by our codecs."""

from __future__ import annotations

import uuid

from protocol.codec import response_codec
from protocol.errors import ErrorCode
from shoal_client.cluster import METADATA_MAX_AGE_S, REFRESH_BACKOFF_S, ClusterMetadata
from shoal_client.member import ShareGroupMember, TopicIdPartition

TID = uuid.uuid4()
BROKERS = [(1, 9091), (2, 9092), (3, 9093)]


def metadata(leaders: dict[int, tuple[int, int]], brokers=BROKERS):
    """A decoded Metadata v12 answer: partition -> (leader, leader epoch)."""
    body = {"brokers": [{"node_id": n, "host": "127.0.0.1", "port": port, "rack": None} for n, port in brokers],
            "cluster_id": "c", "controller_id": 1, "topics": [{
                "error_code": 0, "name": "t", "topic_id": TID, "is_internal": False, "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": leader, "leader_epoch": epoch,
                     "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2, 3], "offline_replicas": []}
                    for p, (leader, epoch) in leaders.items()]}]}
    codec = response_codec(3, 12)
    return codec.decode(codec.encode(body))


def share_fetch(partition: int, error: int, leader: int, epoch: int, endpoints=()):
    """A decoded ShareFetch v2 answer with one partition's error and the CurrentLeader it names."""
    body = {"error_code": 0, "acquisition_lock_timeout_ms": 30000, "responses": [{"topic_id": TID, "partitions": [{
        "partition_index": partition, "error_code": error, "acknowledge_error_code": 0,
        "current_leader": {"leader_id": leader, "leader_epoch": epoch}, "records": b"", "acquired_records": []}]}],
        "node_endpoints": [{"node_id": n, "host": "127.0.0.1", "port": port, "rack": None} for n, port in endpoints]}
    codec = response_codec(78, 2)
    return codec.decode(codec.encode(body))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_leaders_come_from_metadata_and_a_newer_epoch_named_by_an_error_wins():
    view = ClusterMetadata()
    view.update(metadata({0: (1, 5), 1: (2, 3)}))
    assert view.nodes[2] == ("127.0.0.1", 9092)
    assert view.topics_by_name["t"].partitions == (0, 1)
    assert (view.leader(TID, 0), view.leader(TID, 1)) == (1, 2)
    view.leader_moved(TID, 0, 3, 6)  # NOT_LEADER_OR_FOLLOWER naming the new leader
    assert view.leader(TID, 0) == 3
    view.update(metadata({0: (1, 5), 1: (2, 3)}))  # a broker that has not heard of the election yet
    assert view.leader(TID, 0) == 3
    view.leader_moved(TID, 0, 1, 4)  # an older election, reported late: ignored
    assert view.leader(TID, 0) == 3
    view.update(metadata({0: (2, 7), 1: (2, 3)}))  # newer than what the error said
    assert view.leader(TID, 0) == 2


def test_an_error_without_a_leader_forgets_it_and_asks_for_a_refresh():
    clock = Clock()
    view = ClusterMetadata(clock)
    assert view.needs_refresh()  # never refreshed
    view.attempted()
    view.update(metadata({0: (1, 5)}))
    clock.now += 1
    assert not view.needs_refresh()
    view.leader_moved(TID, 0, -1, -1)
    assert view.leader(TID, 0) is None and view.needs_refresh()
    view.attempted()
    assert not view.needs_refresh()  # the backoff between refreshes
    clock.now += REFRESH_BACKOFF_S + 0.01
    assert view.needs_refresh()
    view.update(metadata({0: (-1, 6)}))  # an election under way: still stale
    assert view.leader(TID, 0) is None and view.needs_refresh()
    view.attempted()
    view.update(metadata({0: (3, 7)}))
    clock.now += REFRESH_BACKOFF_S + 0.01
    assert view.leader(TID, 0) == 3 and not view.needs_refresh()
    clock.now += METADATA_MAX_AGE_S
    assert view.needs_refresh()  # old enough to ask again anyway


def test_a_leader_outside_the_brokers_known_is_not_used_until_its_endpoint_is():
    view = ClusterMetadata()
    view.update(metadata({0: (1, 5)}, brokers=BROKERS[:2]))
    view.leader_moved(TID, 0, 3, 6)  # broker 3 is not in the metadata, and the answer gave no endpoint
    assert view.leader(TID, 0) is None and view.needs_refresh()
    view.leader_moved(TID, 0, 3, 6, share_fetch(0, 6, 3, 6, endpoints=[(3, 9093)]).node_endpoints)
    assert view.leader(TID, 0) == 3 and view.nodes[3] == ("127.0.0.1", 9093)


def test_the_member_follows_not_leader_and_fenced_leader_epoch_answers_alike():
    member = ShareGroupMember("127.0.0.1:9", "g", ["t"])  # never started: no request is sent here
    member._metadata.update(metadata({0: (1, 5), 1: (1, 5)}))
    for partition, code in ((0, ErrorCode.NOT_LEADER_OR_FOLLOWER), (1, ErrorCode.FENCED_LEADER_EPOCH)):
        resp = share_fetch(partition, code, 2, 6, endpoints=[(2, 9092)])
        [p] = resp.responses[0].partitions
        member._partition_error(TID, p, resp.node_endpoints)
    assert member.leader(TopicIdPartition(TID, 0)) == member.leader(TopicIdPartition(TID, 1)) == 2
    assert member.errors_seen == {ErrorCode.NOT_LEADER_OR_FOLLOWER: 1, ErrorCode.FENCED_LEADER_EPOCH: 1}
