"""Delegation token ids are Kafka's Uuid text (what Kafka 4.4's DelegationTokenManager makes and clients log in
with): 22 characters of URL-safe base64 for 16 random bytes, never starting with '-'."""

from __future__ import annotations

import base64

from broker.security.delegation_tokens import new_token_id


def test_token_ids_are_kafka_uuid_text():
    ids = {new_token_id() for _ in range(2000)}
    assert len(ids) == 2000
    for token_id in ids:
        assert len(token_id) == 22 and not token_id.startswith("-")
        assert len(base64.urlsafe_b64decode(token_id + "==")) == 16
