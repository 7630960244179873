"""Error-only responses: a response body carrying one error code in its top-level error_code field.

Kept apart from `protocol.errors` because it needs the codecs, which themselves import `protocol.errors`.
"""

from __future__ import annotations

import structlog

from protocol import schema
from protocol.codec import response_codec
from protocol.errors import ErrorCode

log = structlog.get_logger(__name__)


def error_body(api_key: int, version: int, code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR) -> bytes | None:
    """A response carrying `code` in its top-level error_code field (other fields at schema defaults), or
    None when the response has no top-level error code at this version."""
    message = schema.response_message(api_key)
    if not any(f.key == "error_code" and f.present(version) and not f.tagged(version)
               for f in message.struct.fields):
        return None
    try:
        return response_codec(api_key, version).encode({"error_code": int(code)})
    except Exception:  # noqa: BLE001
        log.exception("cannot build error response", api_key=api_key, api_version=version)
        return None
