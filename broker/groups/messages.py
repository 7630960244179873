"""Error messages the group coordinator answers with: Kafka's Errors messages, and its own for a failed write."""

from __future__ import annotations

from protocol.errors import ErrorCode

WRITE_FAILED = "The group coordinator could not write the group's records."

# Kafka's Errors messages for the group-level errors of the share-group offsets APIs.
MESSAGES = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    ErrorCode.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
    ErrorCode.FENCED_STATE_EPOCH: "The share coordinator rejected the request because the share-group state "
                                  "epoch did not match.",
}
