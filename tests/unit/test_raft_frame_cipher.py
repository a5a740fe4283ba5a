"""The Raft port's frame cipher: what it seals opens only with the same
secret, untouched; anything else is refused."""

from __future__ import annotations

import pysyncobj.syncobj
import pytest
from cryptography.fernet import Fernet

import cortex.raft.group  # noqa: F401  (installs the cipher into pysyncobj)
from cortex.raft.frame_cipher import FrameCipher, FrameRefused, derive_key, frame_cipher

SECRET = "s3cret-of-the-cluster"


@pytest.fixture(scope="module")
def key() -> bytes:
    return derive_key(SECRET)


def test_a_frame_opens_with_the_same_secret_and_keeps_its_timestamp(key: bytes) -> None:
    sealed = FrameCipher(key).encrypt_at_time(b"append entries", 1234)
    opener = FrameCipher(key)
    assert opener.extract_timestamp(sealed) == 1234
    assert opener.decrypt(sealed) == b"append entries"
    assert b"append entries" not in sealed


def test_the_key_depends_on_the_secret_and_is_not_fernets(key: bytes) -> None:
    assert derive_key(SECRET) == key
    assert derive_key(SECRET + "x") != key
    sealed = FrameCipher(derive_key("another secret")).encrypt_at_time(b"x", 1)
    with pytest.raises(FrameRefused, match="not sealed with the cluster secret"):
        FrameCipher(key).decrypt(sealed)


@pytest.mark.parametrize("where", [0, 7, 8, 19, 20, -1])
def test_a_changed_byte_anywhere_refuses_the_frame(key: bytes, where: int) -> None:
    """Timestamp, nonce, data and tag are all covered."""
    sealed = bytearray(FrameCipher(key).encrypt_at_time(b"payload bytes", 99))
    sealed[where] ^= 0x01
    with pytest.raises(FrameRefused):
        FrameCipher(key).decrypt(bytes(sealed))


def test_short_frames_and_fernet_tokens_are_refused(key: bytes) -> None:
    cipher = FrameCipher(key)
    with pytest.raises(FrameRefused, match="too short"):
        cipher.extract_timestamp(b"\x00" * 10)
    with pytest.raises(FrameRefused, match="too short"):
        cipher.decrypt(b"\x00" * 35)
    token = Fernet(Fernet.generate_key()).encrypt_at_time(b"old style frame", 5)
    with pytest.raises(FrameRefused):
        cipher.decrypt(token)


def test_nonces_do_not_repeat(key: bytes) -> None:
    cipher = FrameCipher(key)
    nonces = {cipher.encrypt_at_time(b"", 0)[8:20] for _ in range(10_000)}
    assert len(nonces) == 10_000


def test_pysyncobj_makes_this_cipher_from_the_password() -> None:
    made = pysyncobj.syncobj.getEncryptor(SECRET)
    assert isinstance(made, FrameCipher)
    assert frame_cipher(SECRET).decrypt(made.encrypt_at_time(b"ok", 3)) == b"ok"
