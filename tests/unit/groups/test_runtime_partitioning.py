"""Which `__consumer_offsets` partition holds a group: Kafka's abs(groupId.hashCode()) % partitions."""

from broker.groups.runtime import group_partition


def test_group_partition_matches_java_string_hash():
    assert group_partition("abc", 50) == 96354 % 50  # "abc".hashCode() == 96354
    assert group_partition("", 4) == 0
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0.
    assert group_partition("polygenelubricants", 7) == 0
    # Negative hashes are folded to their absolute value: "Aa"... e.g. "zzzzzzz".hashCode() < 0.
    h = 0
    for ch in "zzzzzzz":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    assert signed < 0 and group_partition("zzzzzzz", 50) == abs(signed) % 50
