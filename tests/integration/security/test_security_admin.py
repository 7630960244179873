"""confluent-kafka AdminClient: SCRAM credentials and ACLs, kept in the metadata journal across restarts."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import errors as kafka_errors
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaResourceType

from tests.helpers.confluent_clients import admin_client

pytestmark = pytest.mark.integration

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}


def admin_for(broker) -> AdminClient:
    return admin_client(broker.bootstrap)


def describe_scram(admin: AdminClient) -> dict:
    described = admin.describe_user_scram_credentials().result(timeout=30)
    return {user: sorted((i.mechanism, i.iterations) for i in d.scram_credential_infos)
            for user, d in described.items()}


def test_scram_credentials_survive_restart(broker_factory):
    broker = broker_factory()
    admin = admin_for(broker)
    # One request may name a user once (Kafka answers DUPLICATE_RESOURCE otherwise).
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-pw"),
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"alice-pw"),
    ])
    with pytest.raises(KafkaException) as err:
        futures["alice"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.DUPLICATE_RESOURCE
    for upsertion in [
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-pw"),
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"alice-pw"),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000), b"bob-pw"),
    ]:
        admin.alter_user_scram_credentials([upsertion])[upsertion.user].result(timeout=30)
    expected = {"alice": [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)],
                "bob": [(ScramMechanism.SCRAM_SHA_512, 10000)]}
    assert describe_scram(admin) == expected
    with pytest.raises(KafkaException) as err:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "weak", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")])["weak"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL

    broker.restart()
    admin = admin_for(broker)
    assert describe_scram(admin) == expected
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)])[
        "bob"].result(timeout=30)
    with pytest.raises(KafkaException) as err:
        admin.describe_user_scram_credentials(["bob"])["bob"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    broker.restart()
    assert describe_scram(admin_for(broker)) == {"alice": expected["alice"]}


def test_acls_lifecycle_and_restart(broker_factory):
    broker = broker_factory(AUTHORIZER)
    admin = admin_for(broker)
    read = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)
    prefixed = AclBinding(ResourceType.GROUP, "app-", ResourcePatternType.PREFIXED, "User:*", "*",
                          AclOperation.ALL, AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:mallory", "10.0.0.1",
                      AclOperation.WRITE, AclPermissionType.DENY)
    for future in admin.create_acls([read, prefixed, deny]).values():
        assert future.result(timeout=30) is None
    # librdkafka calls the CLUSTER resource type (4) BROKER.
    bad = AclBinding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL, "User:x", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as err:
        admin.create_acls([bad])[bad].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.INVALID_REQUEST

    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    assert set(admin.describe_acls(everything).result(timeout=30)) == {read, prefixed, deny}
    match = AclBindingFilter(ResourceType.GROUP, "app-payments", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(match).result(timeout=30) == [prefixed]

    broker.restart()
    admin = admin_for(broker)
    assert set(admin.describe_acls(everything).result(timeout=30)) == {read, prefixed, deny}
    topic_acls = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([topic_acls])[topic_acls].result(timeout=30)
    assert set(deleted) == {read, deny}
    broker.restart()
    assert admin_for(broker).describe_acls(everything).result(timeout=30) == [prefixed]


def test_acl_apis_without_an_authorizer(broker):
    admin = admin_for(broker)
    acl = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*", AclOperation.READ,
                     AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as err:
        admin.create_acls([acl])[acl].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # librdkafka drops DescribeAcls' top-level error (it returns an empty list); kafka-python raises it.
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(kafka_errors.SecurityDisabledError, match="No Authorizer is configured on the broker"):
            client.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                           permission_type=ACLPermissionType.ANY,
                                           resource_pattern=ResourcePatternFilter(KafkaResourceType.ANY, None,
                                                                                  ACLResourcePatternType.ANY)))
    finally:
        client.close()


def test_cluster_authorization_for_security_admin(broker_factory):
    # The authorizer is on and ANONYMOUS is no super user: no ACL allows it to change ACLs or credentials.
    broker = broker_factory({"authorizer.class.name": AUTHORIZER["authorizer.class.name"]})
    admin = admin_for(broker)
    acl = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*", AclOperation.READ,
                     AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as err:
        admin.create_acls([acl])[acl].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as err:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "u", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")])["u"].result(timeout=30)
    assert err.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_acl_requests_with_unknown_codes_close_the_connection(broker_factory):
    """Kafka cannot parse an ACL request holding an UNKNOWN (0) code: the connection is closed. (Codes Kafka does
    not define are answered; tests/differential/test_security_admin.py compares those answers with Kafka's.)"""
    from tests.helpers.raw_client import RawClient

    broker = broker_factory(AUTHORIZER)
    creation = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:x",
                "host": "*", "operation": 3, "permission_type": 3}
    with RawClient(broker.port) as raw:
        assert raw.call(30, 3, {"creations": [creation]}).results[0].error_code == 0
    for bad in ({"resource_type": 0}, {"operation": 0}, {"permission_type": 0}, {"resource_pattern_type": 0}):
        with RawClient(broker.port) as raw, pytest.raises(ConnectionError):
            raw.call(30, 3, {"creations": [{**creation, **bad}]})
    with RawClient(broker.port) as raw, pytest.raises(ConnectionError):
        raw.call(29, 3, {"resource_type_filter": 2, "pattern_type_filter": 0, "operation": 1, "permission_type": 1})
    with RawClient(broker.port) as raw:  # the broker keeps serving
        described = raw.call(29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                                     "principal_filter": None, "host_filter": None, "operation": 1,
                                     "permission_type": 1})
        assert [(r.resource_name, [a.principal for a in r.acls]) for r in described.resources] == [("t", ["User:x"])]
        deleted = raw.call(31, 3, {"filters": [{"resource_type_filter": 2, "resource_name_filter": "t",
                                                "pattern_type_filter": 3, "principal_filter": None,
                                                "host_filter": None, "operation": 1, "permission_type": 1}]})
        assert [(m.resource_name, m.operation, m.error_code) for m in deleted.filter_results[0].matching_acls] == \
            [("t", 3, 0)]
