"""Security properties: protocol map, listener-prefixed keys, JAAS users, --add-scram, DN principals."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig, ConfigError, split_listener_key
from broker.security.jaas import JaasError, plain_users
from broker.security.manager import parse_add_scram
from broker.security.tls import certificate_principal


def test_protocol_map_and_listeners() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"})
    assert config.security_protocol("SASL_PLAINTEXT") == "SASL_PLAINTEXT"
    config = BrokerConfig({"listeners": "CLIENT://127.0.0.1:0",
                           "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT"})
    assert config.security_protocol("CLIENT") == "SASL_PLAINTEXT"
    with pytest.raises(ConfigError, match="No security protocol defined for listener CLIENT"):
        BrokerConfig({"listeners": "CLIENT://127.0.0.1:0"})
    with pytest.raises(ConfigError, match="needs ssl.keystore.location"):
        BrokerConfig({"listeners": "SSL://127.0.0.1:0"})
    with pytest.raises(ConfigError):
        BrokerConfig({"listener.security.protocol.map": "X:KERBEROS"})
    with pytest.raises(ConfigError):
        BrokerConfig({"sasl.enabled.mechanisms": "GSSAPI"})


def test_listener_prefixed_values() -> None:
    config = BrokerConfig({
        "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.name.sasl_ssl.ssl.keystore.location": "/a.pem",
        "listener.name.ssl.ssl.keystore.location": "/b.pem",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": "jaas",
        "listener.name.sasl_ssl.connections.max.reauth.ms": "60000",
    })
    assert config.listener_value("SASL_SSL", "ssl.keystore.location") == "/a.pem"
    assert config.listener_value("SSL", "ssl.keystore.location") == "/b.pem"
    assert config.listener_value("SSL", "sasl.enabled.mechanisms") == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert config.listener_value("SASL_SSL", "sasl.enabled.mechanisms") == ["SCRAM-SHA-512"]
    assert config.listener_value("SASL_SSL", "sasl.jaas.config", "PLAIN") == "jaas"
    assert config.listener_value("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-256") is None
    assert config.listener_value("SASL_SSL", "connections.max.reauth.ms") == 60000
    assert not config.unknown
    assert split_listener_key("listener.name.x.unknown.key") is None
    with pytest.raises(ConfigError):
        BrokerConfig({"listener.name.x.ssl.client.auth": "sometimes"})


def test_plain_users_from_jaas() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="a \\"quoted\\" secret" user_bob=bare;')
    assert plain_users(jaas) == {"admin": "admin-secret", "alice": 'a "quoted" secret', "bob": "bare"}
    assert plain_users(None) == {}
    for bad in ("org.x.Module required", "org.x.Module sometimes;", "org.x.Module required a=;"):
        with pytest.raises(JaasError):
            plain_users(bad)


def test_add_scram_syntax() -> None:
    assert parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]") == \
        ("SCRAM-SHA-256", "alice", "alice-secret", 4096)
    assert parse_add_scram('SCRAM-SHA-512=[name="admin",password="a,b\\"c",iterations=8192]') == \
        ("SCRAM-SHA-512", "admin", 'a,b"c', 8192)
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[name=a]", "nonsense",
                "SCRAM-SHA-256=[name=a,password=b,iterations=10]", "SCRAM-SHA-256=[name=a,password=b,iterations=x]"):
        with pytest.raises(ConfigError):
            parse_add_scram(bad)


def test_certificate_principal_is_the_rfc2253_subject() -> None:
    cert = {"subject": ((("countryName", "US"),), (("organizationName", "Acme, Inc."),),
                        (("commonName", "alice"), ("userId", "7")))}
    assert certificate_principal(cert) == "User:CN=alice+UID=7,O=Acme\\, Inc.,C=US"
    assert certificate_principal(None) == "User:ANONYMOUS" == certificate_principal({})
