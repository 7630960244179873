"""Which `__consumer_offsets` partition holds a group: Kafka's abs(groupId.hashCode()) % partitions."""

from broker.groups.runtime import group_partition


def test_group_partition_matches_java_string_hash():
    assert group_partition("abc", 50) == 96354 % 50  # "abc".hashCode() == 96354
    assert group_partition("", 4) == 0
    # A negative hash is folded to its absolute value: "my-group".hashCode() == -1906497762.
    assert group_partition("my-group", 50) == 1906497762 % 50
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0.
    assert group_partition("polygenelubricants", 7) == 0
