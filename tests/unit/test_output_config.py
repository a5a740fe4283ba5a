"""The output streaming config keys: sizes with units, limits, and errors
that name the key and where the bad value came from."""

from __future__ import annotations

import pytest

from cortex.config import load_config, parse_byte_size
from cortex.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "size"),
    [("4096", 4096), ("64KiB", 65536), ("256 MiB", 256 << 20), ("2GB", 2_000_000_000),
     ("1.5GiB", 3 << 29), ("10k", 10_000)],
)  # fmt: skip
def test_sizes_take_units(text: str, size: int) -> None:
    assert parse_byte_size(text) == size


@pytest.mark.parametrize("text", ["", "MiB", "ten", "5 XB", "-1", "1e6"])
def test_sizes_without_a_number_and_unit_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_byte_size(text)


def test_output_keys_from_file_environment_and_defaults(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "node.yaml"
    path.write_text("output-max-total-bytes: 8GiB\nmax-streams: 8\n")
    config = load_config(str(path), environ={"CORTEX_OUTPUT_MAX_BYTES_PER_ATTEMPT": "32MiB"})
    assert config.output_max_total_bytes == 8 << 30
    assert config.output_max_bytes_per_attempt == 32 << 20
    assert config.max_streams == 8
    assert load_config(environ={}).output_max_bytes_per_attempt == 256 << 20


def test_bad_output_values_name_the_key_and_source() -> None:
    with pytest.raises(ConfigError, match=r"output_max_total_bytes \(from environment variable"):
        load_config(environ={"CORTEX_OUTPUT_MAX_TOTAL_BYTES": "lots"})
    with pytest.raises(ConfigError, match="output_max_bytes_per_attempt .* greater than or equal"):
        load_config(environ={"CORTEX_OUTPUT_MAX_BYTES_PER_ATTEMPT": "4KiB"})
    with pytest.raises(ConfigError, match="max_streams"):
        load_config(flags={"max_streams": 0}, environ={})
