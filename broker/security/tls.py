"""TLS for SSL and SASL_SSL listeners: an `ssl.SSLContext` from Kafka's `ssl.*` properties, and the principal of a
client certificate.

Keys and certificates are PEM (`ssl.keystore.type=PEM`): `ssl.keystore.location` names one file holding the
private key and the certificate chain, or `ssl.keystore.key` and `ssl.keystore.certificate.chain` carry them
inline; `ssl.key.password` decrypts an encrypted key. Trusted CAs for client certificates come from
`ssl.truststore.location` or `ssl.truststore.certificates`. `ssl.client.auth` is none, requested or required.
"""

from __future__ import annotations

import os
import ssl
import tempfile

from broker.config import ConfigError
from broker.security.config import ListenerConfig

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# RFC 2253 attribute keywords (as Java's X500Principal.getName() prints them) for getpeercert()'s long names.
_RDN_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                 "organizationName": "O", "organizationalUnitName": "OU", "domainComponent": "DC",
                 "streetAddress": "STREET", "userId": "UID"}


def server_context(settings: ListenerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of a listener with these (its effective) settings."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    enabled = [_VERSIONS[v] for v in settings.ssl_enabled_protocols]
    context.minimum_version = min(enabled)
    context.maximum_version = max(enabled)
    password = settings.ssl_key_password or settings.ssl_keystore_password
    trust_location = settings.ssl_truststore_location
    trust_inline = settings.ssl_truststore_certificates
    try:
        if settings.ssl_keystore_location:
            context.load_cert_chain(settings.ssl_keystore_location, password=password)
        else:
            _load_inline_chain(context, settings.ssl_keystore_certificate_chain, settings.ssl_keystore_key,
                               password)
        if trust_location:
            context.load_verify_locations(cafile=trust_location)
        elif trust_inline:
            context.load_verify_locations(cadata=trust_inline)
        if settings.ssl_cipher_suites:
            context.set_ciphers(":".join(settings.ssl_cipher_suites))
    except (OSError, ssl.SSLError, ValueError) as err:
        raise ConfigError(f"listener {listener}: cannot set up TLS: {err}") from None
    context.verify_mode = _CLIENT_AUTH[settings.ssl_client_auth]
    if context.verify_mode != ssl.CERT_NONE and not (trust_location or trust_inline):
        raise ConfigError(f"listener {listener}: ssl.client.auth={settings.ssl_client_auth} needs "
                          "ssl.truststore.location or ssl.truststore.certificates")
    return context


def _load_inline_chain(context: ssl.SSLContext, chain: str | None, key: str | None, password: str | None) -> None:
    if not chain or not key:
        raise ValueError("ssl.keystore.certificate.chain and ssl.keystore.key must both be set")
    # load_cert_chain reads files only: write both to a private temporary file, load, remove.
    fd, path = tempfile.mkstemp(prefix="shoal-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def certificate_principal(cert: dict | None) -> str:
    """Kafka's default TLS principal: `User:` + the subject DN in RFC 2253 form (most specific RDN first), or
    User:ANONYMOUS without a verified client certificate."""
    if not cert or not cert.get("subject"):
        return "User:ANONYMOUS"
    rdns = []
    for rdn in reversed(cert["subject"]):
        rdns.append("+".join(f"{_RDN_KEYWORDS.get(name, name)}={_escape(value)}" for name, value in rdn))
    return "User:" + ",".join(rdns)


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
