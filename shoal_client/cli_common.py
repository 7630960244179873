"""What Shoal's command-line tools (shoal-share-groups, shoal-transactions) share: a parser that says usage
errors the way Kafka's tools do (exit code 1), loading --command-config into client security, the errors a
command's connection may end in, and the version they print."""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import NoReturn, TextIO, TypeVar

from protocol.errors import ErrorCode
from protocol.java_hash import java_string_hash
from shoal_client.admin import AdminError
from shoal_client.connection import ConnectionLost, UnsupportedVersionError
from shoal_client.security import AuthenticationError, ClientSecurity, load_properties

T = TypeVar("T")

# What talking to the cluster may end in; each tool words the message its own way, as Kafka's tools do.
COMMAND_FAILURES: tuple[type[Exception], ...] = (
    ConnectionLost, UnsupportedVersionError, AuthenticationError, AdminError, ValueError)


class UsageError(Exception):
    """A command line the tool refuses: its message and the usage, exit code 1."""


class ToolParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2; Kafka's tools exit 1
        missing = "the following arguments are required: "
        if message.startswith(missing):  # in argparse4j's words, as Kafka's tools say it: the first one missing
            message = f"argument {message.removeprefix(missing).split(', ')[0]} is required"
        raise UsageError(message)


def load_security(command_config: str | None, err: TextIO) -> tuple[dict[str, str], ClientSecurity]:
    """The --command-config properties (none without the option) and the client security they set; the
    properties no client setting uses are named on `err`. Raises OSError or SecurityConfigError."""
    props = load_properties(command_config) if command_config else {}
    security = ClientSecurity.from_properties(props)
    if security.unused:
        print(f"These properties are not used by this tool: {', '.join(security.unused)}", file=err)
    return props, security


# Kafka's exception class of an error code (org.apache.kafka.common.protocol.Errors) where it is not the code's
# name in CamelCase followed by "Exception".
_EXCEPTIONS = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    ErrorCode.REQUEST_TIMED_OUT: "TimeoutException",
    ErrorCode.TOPIC_ALREADY_EXISTS: "TopicExistsException",
    ErrorCode.NON_EMPTY_GROUP: "GroupNotEmptyException",
    ErrorCode.INVALID_CONFIG: "InvalidConfigurationException",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TransactionalIdAuthorizationException",
    ErrorCode.SASL_AUTHENTICATION_FAILED: "SaslAuthenticationException",
}


def kafka_exception(code: int) -> str:
    """The class name Kafka's tools print for an error code, e.g. org.apache.kafka.common.errors.
    GroupIdNotFoundException for GROUP_ID_NOT_FOUND."""
    try:
        error = ErrorCode(code)
    except ValueError:
        return "org.apache.kafka.common.errors.UnknownServerException"
    name = _EXCEPTIONS.get(error)
    if name is None:
        words = error.name.removesuffix("_EXCEPTION").split("_")
        name = "".join(w.capitalize() for w in words) + "Exception"
    return f"org.apache.kafka.common.errors.{name}"


# Kafka's own message for an error code (org.apache.kafka.common.protocol.Errors), which its admin client's
# exceptions carry when the broker sent none; the codes Shoal's tools may meet.
_MESSAGES = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates that the "
                                      "broker is not the current leader. For requests intended for any replica, "
                                      "this error indicates that the broker is not a replica of the topic partition.",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.INVALID_TXN_STATE: "The producer attempted a transactional operation in an invalid state.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: "The transactionalId could not be found.",
    ErrorCode.INVALID_PRODUCER_EPOCH: "Producer attempted to produce with an old epoch.",
    ErrorCode.PRODUCER_FENCED: "There is a newer producer with the same transactionalId which fences the current "
                               "one.",
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
}


def kafka_message(code: int) -> str:
    """Kafka's message for an error code (its name where this table has none)."""
    try:
        error = ErrorCode(code)
    except ValueError:
        return f"Unexpected error code: {code}."
    return _MESSAGES.get(error, error.name)


def kafka_error(code: int, message: str | None) -> str:
    """An error as Kafka's tools print the exception the admin client raised: its class and message."""
    return f"{kafka_exception(code)}: {message}" if message else kafka_exception(code)


def topic_partition_hash(topic: str, partition: int) -> int:
    """Kafka's TopicPartition.hashCode()."""
    h = (31 * (31 + partition) + java_string_hash(topic)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def tool_version() -> str:
    try:
        return metadata.version("shoal")
    except metadata.PackageNotFoundError:
        return "unknown"


class Progress:
    """"label: done/total" on `err`, rewritten in place, for operations over many items; shown only when `err` is a
    terminal (a pipe or a test reading the output sees nothing, as with Kafka's tools) and `total` reaches
    `minimum`. `done()` ends the line."""

    def __init__(self, err: TextIO, label: str, total: int, minimum: int = 1) -> None:
        self._err, self._label, self.total = err, label, total
        isatty = getattr(err, "isatty", None)
        self.shown = bool(isatty and isatty()) and total >= minimum
        self.count = 0

    def advance(self, n: int) -> None:
        self.count = min(self.total, self.count + n)
        if self.shown:
            self._err.write(f"\r{self._label}: {self.count}/{self.total}")
            self._err.flush()

    def done(self) -> None:
        if self.shown:
            self._err.write("\n")
            self._err.flush()


def chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]
