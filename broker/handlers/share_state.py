"""Initialize/Read/Write/Delete ShareGroupState and ReadShareGroupStateSummary (83-87), served by
`broker.share_state` (records durable before the response)."""

from __future__ import annotations

from typing import Any

OPERATIONS = {
    83: "initialize_share_group_state",
    84: "read_share_group_state",
    85: "write_share_group_state",
    86: "delete_share_group_state",
    87: "read_share_group_state_summary",
}


def _handler(operation: str):
    async def handle(ctx, req) -> dict[str, Any]:
        return await ctx.broker.share_state.serve(operation, req, ctx.api_version)

    handle.__name__ = f"handle_{operation}"
    return handle


HANDLERS = {api_key: _handler(operation) for api_key, operation in OPERATIONS.items()}
