"""Every API with ACL checks refuses a client that has no ACLs (authorizer on, no super user, nothing allowed).

The requests below are driven from the authorization table (broker.security.api_acls): an API the broker serves
whose entry names an error must have a request here, so no handler can skip its checks unnoticed.
"""

from __future__ import annotations

import pytest

from broker.security.api_acls import API_ACLS
from protocol import schema
from protocol.codec import request_codec
from protocol.errors import ErrorCode
from tests.helpers.api_requests import MAX_VERSION, REQUESTS, error_codes
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.integration

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
@pytest.mark.parametrize("api_key", sorted(REQUESTS))
def test_requests_fit_the_schema(api_key):
    """Each request names only fields of its API (a misspelt field would silently take its default)."""
    spec = schema.api_specs().get(api_key)
    assert spec is not None, f"a request for api key {api_key}, which has no schema"
    fields = {f.key for f in schema.request_message(api_key).struct.fields}
    assert set(REQUESTS[api_key]) <= fields, set(REQUESTS[api_key]) - fields
    for version in range(spec.min_version, spec.max_version + 1):
        request_codec(api_key, version).encode(REQUESTS[api_key])


@pytest.fixture(scope="module")
def locked_broker(tmp_path_factory):
    from tests.helpers.broker_process import start_broker

    proc = start_broker(tmp_path_factory.mktemp("locked"), {"authorizer.class.name": STANDARD_AUTHORIZER})
    try:
        yield proc
    finally:
        proc.stop()


def served(broker) -> dict[int, int]:
    with RawClient(broker.port) as raw:
        versions = raw.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    return {k.api_key: k.max_version for k in versions.api_keys}


def test_every_checked_api_has_a_refused_request(locked_broker):
    lacking = [schema.api_specs()[k].name for k in served(locked_broker)
               if API_ACLS[k].denied is not None and k not in REQUESTS]
    assert not lacking, f"add a request for {lacking} to REQUESTS"


@pytest.mark.parametrize("api_key", sorted(k for k, e in API_ACLS.items() if e.denied is not None))
def test_refused_without_acls(locked_broker, api_key):
    versions = served(locked_broker)
    # Every API of the table is served: a checked API missing from ApiVersions would be checked by nobody.
    assert api_key in versions, f"{schema.api_specs()[api_key].name} has ACL checks but is not served"
    version = min(versions[api_key], MAX_VERSION.get(api_key, versions[api_key]))
    with RawClient(locked_broker.port) as raw:
        response = raw.call(api_key, version, REQUESTS[api_key])
    codes = error_codes(response)
    entry = API_ACLS[api_key]
    assert int(entry.denied) in codes, (
        f"{schema.api_specs()[api_key].name} served a client without ACLs ({entry.note}); its handler must call "
        f"ctx.authorize() where Kafka's KafkaApis does and answer {entry.denied.name}. Response: {dict(response)}")
    # Nothing was created by a refused request.
    if api_key in (19, 3):
        with RawClient(locked_broker.port) as raw:
            answer = raw.call(3, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
        assert [tp.error_code for tp in answer.topics] == [29]


def test_add_partitions_v4_needs_cluster_action(locked_broker):
    with RawClient(locked_broker.port) as raw:
        response = raw.call(24, 4, REQUESTS[24])
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and not response.results_by_transaction


def test_list_transactions_lists_nothing_without_acls(locked_broker):
    with RawClient(locked_broker.port) as raw:
        response = raw.call(66, 1, {"state_filters": [], "producer_id_filters": []})
    assert response.error_code == 0 and response.transaction_states == []
