"""Throwaway certificates for TLS tests, made at test time with the
generator `scripts/make_certs.py` gives users."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scripts.make_certs import CertificateAuthority

LOOPBACK_HOSTS = ["127.0.0.1", "localhost"]


@dataclass(frozen=True)
class TlsFiles:
    """A CA and one certificate it signed, as PEM files."""

    ca: Path
    cert: Path
    key: Path

    def node_args(self) -> list[str]:
        """`cortex node start` flags that serve with this certificate and
        trust this CA."""
        return ["--tls-cert", str(self.cert), "--tls-key", str(self.key), "--tls-ca", str(self.ca)]


def write_tls_files(
    directory: Path, hosts: list[str] | None = None, name: str = "node"
) -> TlsFiles:
    """A new CA and a certificate for `hosts` (default 127.0.0.1 and
    localhost), usable by servers and clients, written under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.create(f"{name} test CA")
    issued = ca.issue(hosts or LOOPBACK_HOSTS)
    files = TlsFiles(directory / "ca.pem", directory / f"{name}.pem", directory / f"{name}-key.pem")
    files.ca.write_bytes(ca.cert_pem)
    files.cert.write_bytes(issued.cert_pem)
    files.key.write_bytes(issued.key_pem)
    return files
