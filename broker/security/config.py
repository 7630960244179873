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
