"""What a request's version means to the coordinator, and what its answer must look like at that version.

Kept apart from the coordinator so it stays free of wire versions: the handler maps in and out here.
"""

from __future__ import annotations

from protocol.errors import ErrorCode

from .state import TV_0, TV_2

# First version of each API that knows PRODUCER_FENCED (KIP-588); older clients get INVALID_PRODUCER_EPOCH.
_FENCED_FROM = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2,
                "TxnOffsetCommit": 3}


def client_transaction_version(api: str, version: int) -> int:
    """The transaction version a request speaks: EndTxn v5+ and AddPartitionsToTxn v5+ are TV2 (KIP-890
    part 2), everything else TV0, as Kafka's request handler decides."""
    if api in ("EndTxn", "AddPartitionsToTxn") and version >= 5:
        return TV_2
    return TV_0


def error_for_version(code: ErrorCode, api: str, version: int) -> ErrorCode:
    if code is ErrorCode.PRODUCER_FENCED and version < _FENCED_FROM.get(api, 0):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
