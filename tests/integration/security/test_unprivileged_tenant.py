"""What an unprivileged tenant sees over SASL: no secret through DescribeConfigs synonyms, and the BROKER_LOGGER
resource guarded by the cluster's DESCRIBE_CONFIGS and ALTER_CONFIGS as Kafka guards it.

The broker runs the standard authorizer with a super user (`admin`, SCRAM) and a tenant (`tenant`, SCRAM-SHA-256;
`carol` over PLAIN) holding READ on one topic and two groups, plus DESCRIBE_CONFIGS on the cluster.
"""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from tests.helpers.raw_client import RawClient
from tests.helpers.sasl import scram_raw_client

pytestmark = pytest.mark.integration

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, ALTER_CONFIGS, CREATE_ACLS = 32, 44, 33, 30
BROKER, BROKER_LOGGER = 4, 8
TOPIC_ACL, GROUP_ACL, CLUSTER_ACL = 2, 3, 4
READ, ALTER_CONFIGS_OP, DESCRIBE_CONFIGS_OP = 3, 11, 10
SET, DELETE, APPEND = 0, 1, 2
# Password-typed settings given to the broker at start (static): DescribeConfigs must never show them.
SECRETS = {"delegation.token.secret.key": "token-signing-secret", "ssl.key.password": "key-pw",
           "ssl.keystore.password": "keystore-pw", "ssl.truststore.password": "truststore-pw",
           "sasl.oauthbearer.client.credentials.client.secret": "oauth-secret"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-pw" user_admin="admin-pw" user_carol="carol-pw";')


def _acl(principal: str, resource_type: int, name: str, operation: int) -> dict:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": 3,
            "principal": principal, "host": "*", "operation": operation, "permission_type": 3}


@pytest.fixture(scope="module")
def tenant_broker(tmp_path_factory):
    from tests.helpers.broker_process import start_broker  # noqa: PLC0415

    overrides = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                 "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:admin", **SECRETS}
    scram = [arg for user in ("admin", "tenant", "nobody")
             for arg in ("--add-scram", f"SCRAM-SHA-256=[name={user},password={user}-pw]")]
    proc = start_broker(tmp_path_factory.mktemp("tenant"), overrides, scram)
    try:
        with as_user(proc, "admin") as admin:
            acls = [_acl("User:tenant", TOPIC_ACL, "t", READ), _acl("User:tenant", GROUP_ACL, "g1", READ),
                    _acl("User:tenant", GROUP_ACL, "g2", READ),
                    _acl("User:tenant", CLUSTER_ACL, "kafka-cluster", DESCRIBE_CONFIGS_OP),
                    _acl("User:carol", CLUSTER_ACL, "kafka-cluster", DESCRIBE_CONFIGS_OP)]
            created = admin.call(CREATE_ACLS, 3, {"creations": acls})
            assert [r.error_code for r in created.results] == [0] * len(acls), created
        yield proc
    finally:
        proc.stop()


def as_user(broker, user: str) -> RawClient:
    return scram_raw_client(broker.ports["SASL_PLAINTEXT"], user, f"{user}-pw")[0]


def as_plain_user(broker, user: str) -> RawClient:
    raw = RawClient(broker.ports["SASL_PLAINTEXT"])
    assert raw.call(17, 1, {"mechanism": "PLAIN"}).error_code == 0
    answer = raw.call(36, 2, {"auth_bytes": f"\0{user}\0{user}-pw".encode()})
    assert answer.error_code == 0, answer
    return raw


def describe(client: RawClient, resource_type: int, name: str, keys: list[str] | None, *, version: int = 4):
    response = client.call(DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": version >= 3})
    [result] = response.results
    return result


@pytest.mark.parametrize("login", ["scram", "plain"])
def test_no_secret_in_any_synonym(tenant_broker, login):
    """DescribeConfigs v4 with synonyms, named keys and every config: each sensitive value and each of its
    synonyms' values is null, static and default alike."""
    client = as_user(tenant_broker, "tenant") if login == "scram" else as_plain_user(tenant_broker, "carol")
    with client:
        named = describe(client, BROKER, "1", sorted(SECRETS))
        everything = describe(client, BROKER, "1", None)
    assert named.error_code == 0, named
    rows = {c.name: c for c in named.configs}
    assert set(rows) == set(SECRETS)
    for name, row in rows.items():
        assert row.is_sensitive and row.value is None, row
        assert [s.source for s in row.synonyms][:1] == [4], row  # the static setting is listed, as a synonym
        assert all(s.value is None for s in row.synonyms), (name, row.synonyms)
    leaked = [(c.name, s.name) for c in everything.configs for s in c.synonyms
              if s.value is not None and any(secret in s.value for secret in SECRETS.values())]
    leaked += [(c.name, None) for c in everything.configs
               if c.value is not None and any(secret in c.value for secret in SECRETS.values())]
    assert everything.error_code == 0 and not leaked, leaked


def test_broker_logger_needs_the_clusters_config_acls(tenant_broker):
    """BROKER_LOGGER is the cluster's: a principal without DESCRIBE_CONFIGS on it gets
    CLUSTER_AUTHORIZATION_FAILED (not INVALID_REQUEST), one with it sees the root logger, and altering a logger
    needs ALTER_CONFIGS on the cluster. The legacy AlterConfigs does not know the resource type at all."""
    with as_user(tenant_broker, "nobody") as nobody:
        refused = describe(nobody, BROKER_LOGGER, "1", None)
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and not refused.configs, refused
    with as_user(tenant_broker, "tenant") as tenant:
        seen = describe(tenant, BROKER_LOGGER, "1", None)
        change = tenant.call(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": BROKER_LOGGER, "resource_name": "1",
             "configs": [{"name": "root", "config_operation": SET, "value": "DEBUG"}]}], "validate_only": False})
        legacy = tenant.call(ALTER_CONFIGS, 2, {"resources": [
            {"resource_type": BROKER_LOGGER, "resource_name": "1",
             "configs": [{"name": "root", "value": "DEBUG"}]}], "validate_only": False})
    assert seen.error_code == 0 and [(c.name, c.value, c.config_source, c.read_only) for c in seen.configs] == [
        ("root", "INFO", 6, False)], seen
    [result] = change.responses
    # as Kafka (tests/differential/test_authorization_walk.py): the refusal carries no message
    assert (result.error_code, result.error_message) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None), result
    [result] = legacy.responses
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown resource type 8")


def _alter_logger(client: RawClient, name: str, configs: list[dict], validate_only: bool = False):
    response = client.call(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": BROKER_LOGGER, "resource_name": name, "configs": configs}],
        "validate_only": validate_only})
    [result] = response.responses
    return result.error_code, result.error_message


def test_broker_logger_level_changes_at_run_time(tenant_broker):
    """The super user sets the root logger's level: DescribeConfigs shows it, and the broker logs at it (a
    connection's opening is logged at debug)."""
    with as_user(tenant_broker, "admin") as admin:
        assert _alter_logger(admin, "1", [{"name": "root", "config_operation": SET, "value": "TRACE"}],
                             validate_only=True) == (0, None)
        assert [c.value for c in describe(admin, BROKER_LOGGER, "1", ["root"]).configs] == ["INFO"]
        assert _alter_logger(admin, "1", [{"name": "root", "config_operation": SET, "value": "TRACE"}]) == (0, None)
        assert [c.value for c in describe(admin, BROKER_LOGGER, "1", ["root"]).configs] == ["TRACE"]
        before = tenant_broker.log_path.read_text().count('"connection opened"')
        RawClient(tenant_broker.ports["PLAINTEXT"]).close()
        from tests.helpers.waiting import wait_until  # noqa: PLC0415

        wait_until(lambda: tenant_broker.log_path.read_text().count('"connection opened"') > before, timeout=10,
                   what="a debug line after the root logger was set to TRACE")
        errors = [
            _alter_logger(admin, "1", [{"name": "root", "config_operation": SET, "value": "VERBOSE"}]),
            _alter_logger(admin, "1", [{"name": "kafka.server", "config_operation": SET, "value": "INFO"}]),
            _alter_logger(admin, "1", [{"name": "root", "config_operation": DELETE, "value": None}]),
            _alter_logger(admin, "1", [{"name": "root", "config_operation": APPEND, "value": "INFO"}]),
            _alter_logger(admin, "2", [{"name": "root", "config_operation": SET, "value": "INFO"}]),
            _alter_logger(admin, "x", [{"name": "root", "config_operation": SET, "value": "INFO"}]),
        ]
        assert _alter_logger(admin, "1", [{"name": "root", "config_operation": SET, "value": "INFO"}]) == (0, None)
        wrong_broker = describe(admin, BROKER_LOGGER, "2", None)
        empty_name = describe(admin, BROKER_LOGGER, "", None)
    assert errors == [
        (ErrorCode.INVALID_CONFIG, "Cannot set the log level of root to VERBOSE as it is not a supported log level. "
                                   "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
        (ErrorCode.INVALID_CONFIG, "Logger kafka.server does not exist!"),
        (ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed"),
        (ErrorCode.INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource"),
        (ErrorCode.INVALID_REQUEST, "Unexpected node id. Expected 1, but received 2"),
        (ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: x"),
    ]
    assert (wrong_broker.error_code, wrong_broker.error_message) == (
        ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1 but received 2")
    assert (empty_name.error_code, empty_name.error_message) == (ErrorCode.INVALID_REQUEST,
                                                                 "Broker id must not be empty")
