"""A small synchronous Kafka share-group client on Shoal's protocol package (see shoal_client.member)."""

from shoal_client.connection import BrokerConnection, ConnectionLost, UnsupportedVersionError
from shoal_client.member import (
    ACCEPT,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    AckTarget,
    Acquired,
    CoordinatorUnavailable,
    FetchResult,
    ShareGroupError,
    ShareGroupMember,
    TopicIdPartition,
    acknowledgements,
)

__all__ = ["ACCEPT", "GAP", "REJECT", "RELEASE", "RENEW", "AckTarget", "Acquired", "BrokerConnection",
           "ConnectionLost", "CoordinatorUnavailable", "FetchResult", "ShareGroupError", "ShareGroupMember",
           "TopicIdPartition", "UnsupportedVersionError", "acknowledgements"]
