"""How a SASL exchange fails, mirroring Kafka's two exception kinds.

`SaslAuthenticationError` carries a message meant for the client (Kafka's SaslAuthenticationException);
`SaslFailure` carries a detail for the broker log only, and the client gets the standard message
"Authentication failed during authentication due to invalid credentials with SASL mechanism X" (Kafka's
SaslException), so a client cannot tell an unknown user from a wrong password.
"""

from __future__ import annotations


class SaslAuthenticationError(Exception):
    """Authentication failed; str(self) is sent to the client."""


class SaslFailure(Exception):
    """Authentication failed; str(self) is logged, the client gets the standard message."""


def standard_failure_message(mechanism: str, reauthenticating: bool = False) -> str:
    what = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"
