"""TLS settings: the config keys go together or not at all, and certificate,
key and CA files are read and checked at start, with errors that name the
key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortex.api.tls import client_tls, client_tls_from_env, node_tls
from cortex.config import NodeConfig, load_config
from cortex.errors import ConfigError
from scripts.make_certs import CertificateAuthority
from tests.tls import TlsFiles, write_tls_files


@pytest.fixture
def files(tmp_path: Path) -> TlsFiles:
    return write_tls_files(tmp_path / "certs")


def config_error(**flags: object) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(flags=flags, environ={})
    return str(caught.value)


def tls_config(files: TlsFiles, **changes: object) -> NodeConfig:
    values = {"tls_cert": str(files.cert), "tls_key": str(files.key), "tls_ca": str(files.ca)}
    return load_config(flags={**values, **changes}, environ={})


def test_cert_and_key_go_together() -> None:
    assert "config key tls_key: missing: tls_cert is set" in config_error(tls_cert="node.pem")
    error = config_error(tls_key="node-key.pem")
    assert "config key tls_key (from flag --tls-key): tls_cert is missing" in error


def test_client_auth_needs_tls_and_a_ca() -> None:
    assert "config key tls_client_auth" in config_error(tls_client_auth=True)
    error = config_error(tls_cert="c.pem", tls_key="k.pem", tls_client_auth=True)
    assert "config key tls_client_auth (from flag --tls-client-auth): needs tls_ca" in error


def test_keys_come_from_the_environment_and_empty_means_unset() -> None:
    env = {"CORTEX_TLS_CERT": "c.pem", "CORTEX_TLS_KEY": "k.pem", "CORTEX_TLS_CA": ""}
    config = load_config(environ=env)
    assert (config.tls_cert, config.tls_key, config.tls_ca) == ("c.pem", "k.pem", None)
    with pytest.raises(ConfigError, match="environment variable CORTEX_TLS_KEY"):
        load_config(environ={"CORTEX_TLS_KEY": "k.pem"})


def test_no_tls_without_a_certificate_even_with_a_ca(files: TlsFiles) -> None:
    assert node_tls(load_config(flags={"tls_ca": str(files.ca)}, environ={})) == (None, None)


def test_a_node_serves_and_dials_with_its_files(files: TlsFiles) -> None:
    server, client = node_tls(tls_config(files, tls_client_auth=True))
    assert server is not None and client is not None
    assert server.cert_pem == files.cert.read_bytes() == client.cert_pem
    assert server.client_ca_pem == files.ca.read_bytes() == client.ca_pem
    assert str(files.ca) in client.ca_source
    server, _ = node_tls(tls_config(files))
    assert server is not None and server.client_ca_pem is None


def test_without_a_ca_a_node_trusts_the_system_roots(files: TlsFiles) -> None:
    _, client = node_tls(tls_config(files, tls_ca=None))
    assert client is not None and client.ca_pem != files.ca.read_bytes()
    assert "roots" in client.ca_source


def test_unreadable_files_are_named(files: TlsFiles, tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    for key in ("tls_cert", "tls_key", "tls_ca"):
        with pytest.raises(ConfigError) as caught:
            node_tls(tls_config(files, **{key: str(missing)}))
        assert str(caught.value) == (
            f"config key {key}: cannot read {missing}: No such file or directory"
        )


def test_files_that_hold_the_wrong_thing_are_named(files: TlsFiles, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=f"config key tls_cert: {garbage} holds no PEM cert"):
        node_tls(tls_config(files, tls_cert=str(garbage)))
    with pytest.raises(ConfigError, match=f"config key tls_ca: {garbage} holds no PEM cert"):
        node_tls(tls_config(files, tls_ca=str(garbage)))
    with pytest.raises(ConfigError, match=f"config key tls_key: {garbage} holds no PEM private"):
        node_tls(tls_config(files, tls_key=str(garbage)))
    # A certificate where the key belongs.
    with pytest.raises(ConfigError, match="config key tls_key: .* holds no PEM private key"):
        node_tls(tls_config(files, tls_key=str(files.cert)))


def test_a_key_of_another_certificate_is_refused(files: TlsFiles, tmp_path: Path) -> None:
    other = write_tls_files(tmp_path / "other")
    with pytest.raises(ConfigError, match="does not belong to the certificate"):
        node_tls(tls_config(files, tls_key=str(other.key)))


def test_an_encrypted_key_is_refused(files: TlsFiles, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
    encrypted = tmp_path / "encrypted-key.pem"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase"),
        )
    )
    with pytest.raises(ConfigError, match="config key tls_key: .* is encrypted"):
        node_tls(tls_config(files, tls_key=str(encrypted)))


def test_client_settings_from_the_environment(files: TlsFiles, tmp_path: Path) -> None:
    assert client_tls_from_env({}) is None
    assert client_tls_from_env({"CORTEX_TLS_SERVER_NAME": "x"}) is None
    tls = client_tls_from_env({"CORTEX_TLS_CA": str(files.ca), "CORTEX_TLS_SERVER_NAME": "n1"})
    assert tls is not None and tls.ca_pem == files.ca.read_bytes() and tls.cert_pem is None
    assert tls.options() == [("grpc.ssl_target_name_override", "n1")]
    system = client_tls_from_env({"CORTEX_TLS_CA": "system"})
    assert system is not None and "roots" in system.ca_source
    with pytest.raises(ConfigError, match="CORTEX_TLS_KEY: must be set too"):
        client_tls_from_env({"CORTEX_TLS_CA": str(files.ca), "CORTEX_TLS_CERT": str(files.cert)})
    with pytest.raises(ConfigError) as caught:
        client_tls_from_env({"CORTEX_TLS_CA": str(tmp_path / "nope.pem")})
    assert str(caught.value).startswith(f"CORTEX_TLS_CA (--tls-ca): cannot read {tmp_path}/nope")
    with_cert = client_tls(str(files.ca), cert=str(files.cert), key=str(files.key))
    assert with_cert.key_pem == files.key.read_bytes()


def test_make_certs_reuses_its_ca(tmp_path: Path) -> None:
    from cryptography import x509

    from scripts.make_certs import main

    out = tmp_path / "certs"
    assert main(["--out", str(out), "--host", "10.0.0.5", "--host", "node1.lan"]) == 0
    ca_pem = (out / "ca.pem").read_bytes()
    assert main(["--out", str(out), "--host", "10.0.0.6", "--name", "node2"]) == 0
    assert (out / "ca.pem").read_bytes() == ca_pem
    ca = CertificateAuthority.load(out / "ca.pem", out / "ca-key.pem")
    for name, hosts in (("node", ["10.0.0.5", "node1.lan"]), ("node2", ["10.0.0.6"])):
        cert = x509.load_pem_x509_certificate((out / f"{name}.pem").read_bytes())
        cert.verify_directly_issued_by(ca.cert)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sorted(str(n.value) for n in names) == sorted(hosts)
        assert (out / f"{name}-key.pem").stat().st_mode & 0o077 == 0
    loaded = load_config(
        flags={"tls_cert": str(out / "node.pem"), "tls_key": str(out / "node-key.pem")},
        environ={},
    )
    assert node_tls(loaded)[0] is not None
