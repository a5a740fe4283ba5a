"""TLS material for the gRPC API: a node's certificate and key, the CA it and
its clients verify against, read from PEM files and checked once at start so a
bad file is a config error naming the key and the file, not a failed
handshake later."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from cortex.errors import ConfigError

if TYPE_CHECKING:
    from cryptography import x509

    from cortex.config import NodeConfig

TLS_CA_ENV = "CORTEX_TLS_CA"
TLS_SERVER_NAME_ENV = "CORTEX_TLS_SERVER_NAME"
TLS_CERT_ENV = "CORTEX_TLS_CERT"
TLS_KEY_ENV = "CORTEX_TLS_KEY"
# A CA setting of this value means the system roots rather than a file.
SYSTEM_ROOTS = "system"


@dataclass(frozen=True)
class ServerTls:
    """What a node serves gRPC with; `client_ca_pem` set means callers must
    present a certificate it signed (mutual TLS)."""

    cert_pem: bytes
    key_pem: bytes
    client_ca_pem: bytes | None = None

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key_pem, self.cert_pem)],
            root_certificates=self.client_ca_pem,
            require_client_auth=self.client_ca_pem is not None,
        )


@dataclass(frozen=True)
class ClientTls:
    """How a client verifies the nodes it connects to and, when it has a
    certificate, proves who it is. `ca_source` says where the trusted roots
    came from, for error messages."""

    ca_pem: bytes | None
    ca_source: str
    server_name: str | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca_pem,
            private_key=self.key_pem,
            certificate_chain=self.cert_pem,
        )

    def options(self) -> list[tuple[str, Any]]:
        if not self.server_name:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]


def _read(path: str, name: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise ConfigError(f"{name}: cannot read {path}: {err.strerror}") from None


def read_certificates(path: str, name: str) -> tuple[bytes, list[x509.Certificate]]:
    """The file's bytes and the certificates in it; ConfigError when it cannot
    be read or holds no PEM certificate."""
    # Imported here: every client and CLI command imports this module, and
    # only a TLS setting needs cryptography (a tenth of the CLI's start).
    from cryptography import x509

    data = _read(path, name)
    try:
        return data, x509.load_pem_x509_certificates(data)
    except ValueError:
        raise ConfigError(f"{name}: {path} holds no PEM certificate") from None


def read_key_pair(
    cert_path: str, key_path: str, cert_name: str, key_name: str
) -> tuple[bytes, bytes]:
    """A certificate chain and the unencrypted private key that belongs to its
    first certificate, both PEM."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    cert_pem, certs = read_certificates(cert_path, cert_name)
    key_pem = _read(key_path, key_name)
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise ConfigError(
            f"{key_name}: the private key in {key_path} is encrypted; give it unencrypted"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError(f"{key_name}: {key_path} holds no PEM private key") from None
    if certs[0].public_key() != key.public_key():
        raise ConfigError(
            f"{key_name}: the private key in {key_path} does not belong to the certificate "
            f"in {cert_path}"
        )
    return cert_pem, key_pem


def system_roots() -> tuple[bytes | None, str]:
    """The OpenSSL default CA file (honouring SSL_CERT_FILE); None, meaning
    gRPC's bundled roots, when there is none."""
    cafile = ssl.get_default_verify_paths().cafile
    if cafile:
        try:
            return Path(cafile).read_bytes(), f"the system roots ({cafile})"
        except OSError:
            pass
    return None, "gRPC's bundled roots"


def _trusted_roots(ca_path: str | None, name: str) -> tuple[bytes | None, str]:
    if ca_path and ca_path != SYSTEM_ROOTS:
        return read_certificates(ca_path, name)[0], f"the CA in {ca_path}"
    return system_roots()


def node_tls(config: NodeConfig) -> tuple[ServerTls | None, ClientTls | None]:
    """What a node serves with and how it dials other nodes: both None when
    the node has no certificate, since a cluster speaks TLS on every node or
    on none. The node presents its own certificate to the nodes it calls,
    which lets them require client certificates."""
    if not (config.tls_cert and config.tls_key):
        return None, None
    cert_pem, key_pem = read_key_pair(
        config.tls_cert, config.tls_key, "config key tls_cert", "config key tls_key"
    )
    ca_pem, ca_source = _trusted_roots(config.tls_ca, "config key tls_ca")
    server = ServerTls(cert_pem, key_pem, ca_pem if config.tls_client_auth else None)
    return server, ClientTls(ca_pem, ca_source, cert_pem=cert_pem, key_pem=key_pem)


def client_tls(
    ca: str,
    server_name: str | None = None,
    cert: str | None = None,
    key: str | None = None,
) -> ClientTls:
    """A client's TLS settings from files: the CA bundle it trusts (`system`
    for the system roots), the host name node certificates must hold when it
    differs from the address dialled, and a certificate with its key for nodes
    that require client certificates. Errors name the environment variable
    that sets each."""
    if bool(cert) != bool(key):
        missing = TLS_KEY_ENV if cert else TLS_CERT_ENV
        raise ConfigError(f"{missing}: must be set too: a client certificate needs its key")
    cert_pem = key_pem = None
    if cert and key:
        cert_pem, key_pem = read_key_pair(cert, key, TLS_CERT_ENV, TLS_KEY_ENV)
    ca_pem, ca_source = _trusted_roots(ca, f"{TLS_CA_ENV} (--tls-ca)")
    return ClientTls(ca_pem, ca_source, server_name or None, cert_pem, key_pem)


def client_tls_from_env(environ: Mapping[str, str] | None = None) -> ClientTls | None:
    """`client_tls` from CORTEX_TLS_CA (setting it turns TLS on),
    CORTEX_TLS_SERVER_NAME, CORTEX_TLS_CERT and CORTEX_TLS_KEY; None, meaning
    plain text, without CORTEX_TLS_CA."""
    env = os.environ if environ is None else environ
    ca = env.get(TLS_CA_ENV, "").strip()
    if not ca:
        return None
    return client_tls(
        ca,
        env.get(TLS_SERVER_NAME_ENV, "").strip() or None,
        env.get(TLS_CERT_ENV, "").strip() or None,
        env.get(TLS_KEY_ENV, "").strip() or None,
    )
