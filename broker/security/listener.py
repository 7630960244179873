"""How one listener secures its connections: the TLS context, the SASL authenticator factory, the certificate
principal and the SASL limits. Built by `broker.security.manager`, read by `broker.server`."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.context import ConnectionInfo
from broker.security.config import SecurityConfig


@dataclass
class ListenerSecurity:
    """How one listener secures its connections (built by broker.security.manager)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    # SASL listeners: a new per-connection authenticator (broker.security.sasl.SaslAuthenticator).
    authenticator: Callable[[ConnectionInfo], Any] | None = None
    # TLS listeners without SASL: the principal of a verified client certificate (getpeercert() dict).
    certificate_principal: Callable[[Any], str] | None = None
    # connection.failed.authentication.delay.ms and sasl.server.max.receive.size (SASL listeners)
    failed_authentication_delay_s: float = SecurityConfig().failed_authentication_delay_ms / 1000
    max_unauthenticated_frame: int = SecurityConfig().sasl_server_max_receive_size
    ssl_handshake_timeout_s: float = 10.0
