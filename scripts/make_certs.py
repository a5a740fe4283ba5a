"""Writes a throwaway certificate authority and certificates signed by it, for
trying Cortex with TLS on your own machines:

    python scripts/make_certs.py --out certs --host 10.0.0.5 --host node1.lan

gives certs/ca.pem (give it to every node with --tls-ca and to clients with
CORTEX_TLS_CA), certs/node.pem and certs/node-key.pem (--tls-cert and
--tls-key; valid for every --host given, as a server and as a client, so the
same pair works with --tls-client-auth). An existing ca.pem/ca-key.pem in
--out is reused, so running it again per machine gives certificates one CA
signs. Keep ca-key.pem somewhere safe, or delete it once the certificates are
made. For production, use certificates from your own PKI instead."""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import sys
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID_FOR = datetime.timedelta(days=365)


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _subject_names(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


class CertificateAuthority:
    """A self-signed CA that issues certificates for host names and IPs."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self.cert = cert
        self.key = key

    @classmethod
    def create(cls, name: str = "Cortex test CA") -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @classmethod
    def load(cls, cert_path: Path, key_path: Path) -> CertificateAuthority:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path} is not an EC private key made by this script")
        return cls(cert, key)

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.key)

    def issue(self, hosts: list[str], common_name: str | None = None) -> Issued:
        """A certificate naming every host (IP or DNS name) as a subject
        alternative name, usable by a server and by a client."""
        if not hosts:
            raise ValueError("a certificate needs at least one host name or IP")
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or hosts[0])])
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(_subject_names(hosts)), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False
            )
            .sign(self.key, hashes.SHA256())
        )
        return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="certs", help="directory to write into (default certs)")
    parser.add_argument("--host", action="append", default=[], metavar="NAME_OR_IP",
                        help="a host name or IP the certificate is valid for (repeatable; "
                        "default 127.0.0.1 and localhost)")  # fmt: skip
    parser.add_argument("--name", default="node", help="file name stem (default node)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = out / "ca.pem", out / "ca-key.pem"
    if ca_cert.exists() and ca_key.exists():
        ca = CertificateAuthority.load(ca_cert, ca_key)
    else:
        ca = CertificateAuthority.create()
        _write(ca_cert, ca.cert_pem)
        _write(ca_key, ca.key_pem, private=True)
    issued = ca.issue(args.host or ["127.0.0.1", "localhost"])
    _write(out / f"{args.name}.pem", issued.cert_pem)
    _write(out / f"{args.name}-key.pem", issued.key_pem, private=True)
    print(f"wrote {ca_cert}, {out / f'{args.name}.pem'} and {out / f'{args.name}-key.pem'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
