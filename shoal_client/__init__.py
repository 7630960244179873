"""A small synchronous Kafka share-group client on Shoal's protocol package (see shoal_client.member)."""

from shoal_client.connection import BrokerConnection, ConnectionLost, UnsupportedVersionError
from shoal_client.member import (
    ACCEPT,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    Acquired,
    FetchResult,
    ShareGroupError,
    ShareGroupMember,
    TopicIdPartition,
    acknowledgements,
)

__all__ = ["ACCEPT", "GAP", "REJECT", "RELEASE", "RENEW", "Acquired", "BrokerConnection", "ConnectionLost",
           "FetchResult", "ShareGroupError", "ShareGroupMember", "TopicIdPartition", "UnsupportedVersionError",
           "acknowledgements"]
