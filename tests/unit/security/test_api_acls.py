"""No API is served without a line in the authorization table (broker.security.api_acls)."""

from __future__ import annotations

from broker import handlers
from broker.security.api_acls import API_ACLS
from protocol import schema


def served_api_keys() -> dict[int, str]:
    return {api_key: f"{owner}: {schema.api_specs()[api_key].name}"
            for api_key, owner in handlers.served_api_keys().items()}


def test_every_served_api_has_an_authorization_entry() -> None:
    missing = {k: v for k, v in served_api_keys().items() if k not in API_ACLS}
    assert not missing, (
        f"APIs without an entry in broker/security/api_acls.py: {missing}. Check Kafka's KafkaApis for the ACLs "
        "the API needs, call ctx.authorize() in the handler as Kafka does, add the entry and a refused request in "
        "tests/integration/security/test_authorization.py.")


def test_entries_are_consistent() -> None:
    for api_key, entry in API_ACLS.items():
        assert bool(entry.checks) or entry.denied is None, api_key
        assert entry.note, api_key
