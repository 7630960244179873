"""Raw DescribeClientQuotas (48) / AlterClientQuotas (49) requests: no installed client exposes these APIs."""

from __future__ import annotations

from tests.helpers.raw_client import RawClient

DESCRIBE, ALTER = 48, 49


def alter(client: RawClient, entity: dict[str, str | None], ops: dict[str, float | None], *,
          validate_only: bool = False, version: int = 1):
    """Set (a float) or remove (None) quota keys of one entity; returns the response's entries."""
    body = {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                         "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                                 for k, v in ops.items()]}],
            "validate_only": validate_only}
    return client.call(ALTER, version, body).entries


def describe(client: RawClient, components: list[tuple[str, int, str | None]], *, strict: bool = False,
             version: int = 1):
    body = {"components": [{"entity_type": t, "match_type": m, "match": v} for t, m, v in components],
            "strict": strict}
    return client.call(DESCRIBE, version, body)


def as_dict(response) -> dict[tuple, dict[str, float]]:
    """{((type, name), ...): {key: value}} of a DescribeClientQuotas response."""
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry["values"]} for entry in response.entries}
