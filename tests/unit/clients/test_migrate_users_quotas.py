"""shoal-migrate's pure parts for SCRAM users and client quotas: which credentials are created with which
password, and the AlterClientQuotas request built from a DescribeClientQuotas answer (encoded by our codecs)."""

from __future__ import annotations

from protocol.codec import request_codec, response_codec
from shoal_client.migrate import (
    ALTER_CLIENT_QUOTAS,
    DESCRIBE_CLIENT_QUOTAS,
    alter_quotas_body,
    quota_entries,
    scram_plan,
)

SHA256, SHA512 = 1, 2


def test_every_credential_of_a_user_gets_the_password_of_the_file() -> None:
    described = {"carol": [(SHA256, 4096), (SHA512, 4096)], "dave": [(SHA256, 8192)]}
    plan, problems = scram_plan(described, {"carol": "c", "dave": "d"}, None)
    assert plan == [("carol", SHA256, 4096, "c"), ("carol", SHA512, 4096, "c"), ("dave", SHA256, 8192, "d")]
    assert problems == []


def test_a_user_without_a_password_or_without_credentials_is_reported() -> None:
    described = {"carol": [(SHA512, 4096)], "dave": [(SHA256, 8192)]}
    plan, problems = scram_plan(described, {"carol": "c", "erin": "e"}, None)
    assert plan == [("carol", SHA512, 4096, "c")]
    assert problems == ["user dave: no password in the passwords file"]
    plan, problems = scram_plan(described, {"erin": "e"}, ["erin", "erin"])
    assert plan == [] and problems == ["user erin: no SCRAM credential on the source"]


def test_the_quotas_described_are_the_quotas_altered() -> None:
    described = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": [
        {"entity": [{"entity_type": "user", "entity_name": "carol"}],
         "values": [{"key": "producer_byte_rate", "value": 1024.0}, {"key": "consumer_byte_rate", "value": 2048.0}]},
        {"entity": [{"entity_type": "user", "entity_name": "dave"}, {"entity_type": "client-id", "entity_name": None}],
         "values": [{"key": "request_percentage", "value": 50.0}]}]}
    codec = response_codec(DESCRIBE_CLIENT_QUOTAS, 1)
    entries = quota_entries(codec.decode(memoryview(codec.encode(described))))
    assert entries == {(("user", "carol"),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
                       (("client-id", None), ("user", "dave")): {"request_percentage": 50.0}}
    body = alter_quotas_body(entries)
    request_codec(ALTER_CLIENT_QUOTAS, 1).encode(body)  # a valid request for the codec
    assert {tuple((e["entity_type"], e["entity_name"]) for e in entry["entity"]):
            {op["key"]: (op["value"], op["remove"]) for op in entry["ops"]} for entry in body["entries"]} == {
        (("user", "carol"),): {"producer_byte_rate": (1024.0, False), "consumer_byte_rate": (2048.0, False)},
        (("client-id", None), ("user", "dave")): {"request_percentage": (50.0, False)}}
