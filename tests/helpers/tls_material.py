"""A throw-away CA, a broker certificate for 127.0.0.1/localhost and client certificates, made at test time."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class TlsFiles:
    ca: Path  # CA certificate (PEM): the clients' trust store and the broker's for client certificates
    broker_keystore: Path  # broker private key + certificate chain (PEM), for ssl.keystore.location
    directory: Path

    def client(self, common_name: str) -> tuple[Path, Path]:
        """(certificate, key) PEM files for a client certificate with subject CN=<common_name>,O=Shoal Tests."""
        return _client_files(self, common_name)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Shoal Tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _issue(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool = False, san=None):
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("Shoal Test CA")
    ca_cert = _issue(ca_name, ca_key, ca_name, ca_key, ca=True)
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker_cert = _issue(_name("localhost"), broker_key, ca_name, ca_key,
                         san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    keystore = directory / "broker.pem"
    keystore.write_bytes(_pem_key(broker_key) + broker_cert.public_bytes(serialization.Encoding.PEM))
    (directory / "ca.key").write_bytes(_pem_key(ca_key))
    return TlsFiles(ca_path, keystore, directory)


def _client_files(files: TlsFiles, common_name: str) -> tuple[Path, Path]:
    ca_key = serialization.load_pem_private_key((files.directory / "ca.key").read_bytes(), None)
    ca_cert = x509.load_pem_x509_certificate(files.ca.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _issue(_name(common_name), key, ca_cert.subject, ca_key)
    cert_path = files.directory / f"{common_name}.crt"
    key_path = files.directory / f"{common_name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(_pem_key(key))
    return cert_path, key_path
