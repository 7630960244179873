"""The security settings the broker reads once at start (Kafka's names; defaults from the broker's config
table). Per-listener settings (TLS material, SASL mechanisms, JAAS): BrokerConfig.listener_value."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config.components import ComponentConfig, setting


@dataclass(frozen=True)
class SecurityConfig(ComponentConfig):
    # Authorization (empty class name: none).
    authorizer_class_name: str = setting("authorizer.class.name")
    super_users: str = setting("super.users")
    allow_everyone_if_no_acl_found: bool = setting("allow.everyone.if.no.acl.found")
    # Authentication.
    failed_authentication_delay_ms: int = setting("connection.failed.authentication.delay.ms")
    sasl_server_max_receive_size: int = setting("sasl.server.max.receive.size")
    # Delegation tokens (an unset or empty secret disables them).
    delegation_token_secret_key: str | None = setting("delegation.token.secret.key")
    delegation_token_max_lifetime_ms: int = setting("delegation.token.max.lifetime.ms")
    delegation_token_expiry_time_ms: int = setting("delegation.token.expiry.time.ms")
    delegation_token_expiry_check_interval_ms: int = setting("delegation.token.expiry.check.interval.ms")


@dataclass(frozen=True)
class ListenerConfig(ComponentConfig):
    """A listener's SASL and TLS settings: `listener.name.<listener>.<key>` where set, else the broker's
    (built with `ListenerConfig.read(lambda key: config.listener_value(listener, key))`)."""

    sasl_enabled_mechanisms: tuple[str, ...] = setting("sasl.enabled.mechanisms")
    connections_max_reauth_ms: int = setting("connections.max.reauth.ms")
    ssl_enabled_protocols: tuple[str, ...] = setting("ssl.enabled.protocols")
    ssl_cipher_suites: tuple[str, ...] = setting("ssl.cipher.suites")  # empty: OpenSSL's defaults
    ssl_client_auth: str = setting("ssl.client.auth")
    # PEM key and certificate chain: a file, or both inline; an encrypted key's password
    ssl_keystore_location: str | None = setting("ssl.keystore.location")
    ssl_keystore_certificate_chain: str | None = setting("ssl.keystore.certificate.chain")
    ssl_keystore_key: str | None = setting("ssl.keystore.key")
    ssl_keystore_password: str | None = setting("ssl.keystore.password")
    ssl_key_password: str | None = setting("ssl.key.password")
    # CAs trusted for client certificates: a file, or inline
    ssl_truststore_location: str | None = setting("ssl.truststore.location")
    ssl_truststore_certificates: str | None = setting("ssl.truststore.certificates")
