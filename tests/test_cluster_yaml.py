"""cluster.yaml is a valid Ray cluster-launcher file, in both its variants.

The file ships the `local` provider active and the AWS provider commented out;
its header says how to switch. These tests check both, the way `ray up` would:
defaults merged in (ray.autoscaler._private.util.prepare_config), then Ray's
JSON-schema and consistency checks (validate_config).
"""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

CLUSTER_YAML = Path(__file__).resolve().parent.parent / "cluster.yaml"

REQUIRED_KEYS = (
    "cluster_name",
    "provider",
    "auth",
    "file_mounts",
    "setup_commands",
    "head_start_ray_commands",
    "worker_start_ray_commands",
)


def _text() -> str:
    return CLUSTER_YAML.read_text()


def _block(text: str, name: str) -> tuple[int, int]:
    """Line indexes (start, end) of the '# >>> NAME' ... '# <<< NAME' markers."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# >>> {name}"))
    end = next(i for i, line in enumerate(lines) if line.startswith(f"# <<< {name}"))
    assert start < end
    return start, end


def local_variant() -> dict[str, Any]:
    return yaml.safe_load(_text())


def aws_variant() -> dict[str, Any]:
    """The file as its header says to edit it for AWS."""
    lines = _text().splitlines()
    local_start, local_end = _block(_text(), "local provider")
    aws_start, aws_end = _block(_text(), "aws provider")
    out: list[str] = []
    for i, line in enumerate(lines):
        if local_start <= i <= local_end:
            continue
        if aws_start < i < aws_end:
            assert line == "#" or line.startswith("# "), f"line {i + 1} of the AWS block is not commented: {line!r}"
            line = line[2:]
        out.append(line)
    return yaml.safe_load("\n".join(out))


def _validate_with_ray(config: dict[str, Any]) -> dict[str, Any]:
    util = pytest.importorskip("ray.autoscaler._private.util")
    if not hasattr(util, "validate_config") or not hasattr(util, "prepare_config"):
        pytest.skip("this Ray version has no cluster-config validator")
    prepared = util.prepare_config(copy.deepcopy(config))
    util.validate_config(prepared)
    return prepared


def test_parses_with_required_top_level_keys() -> None:
    config = local_variant()
    assert isinstance(config, dict)
    missing = [key for key in REQUIRED_KEYS if key not in config]
    assert not missing, f"cluster.yaml lacks {missing}"
    assert config["cluster_name"] == "metastore"
    assert config["provider"]["type"] == "local"
    assert isinstance(config["provider"]["head_ip"], str)
    assert isinstance(config["provider"]["worker_ips"], list) and config["provider"]["worker_ips"]
    assert config["auth"]["ssh_user"]
    # The local provider builds its own node type: it must not be given any.
    assert "available_node_types" not in config and "head_node_type" not in config


def test_local_variant_passes_ray_validation() -> None:
    prepared = _validate_with_ray(local_variant())
    # Ray kept every worker ip in the cluster.
    (node_type,) = prepared["available_node_types"].values()
    assert node_type["min_workers"] == node_type["max_workers"] == 2


def test_aws_variant_parses_and_passes_ray_validation() -> None:
    config = aws_variant()
    assert config["provider"]["type"] == "aws"
    assert config["head_node_type"] in config["available_node_types"]
    for key in REQUIRED_KEYS:
        assert key in config
    _validate_with_ray(config)


def test_setup_installs_the_project_and_ray_starts_from_its_venv() -> None:
    config = local_variant()
    assert config["file_mounts"] == {"~/metastore": "."}
    setup = "\n".join(config["setup_commands"])
    assert "scripts/bootstrap.sh" in setup
    assert "redis-server" in setup
    head = " ".join(config["head_start_ray_commands"])
    worker = " ".join(config["worker_start_ray_commands"])
    assert "~/metastore/.venv/bin/ray start --head --port=6379" in head
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head
    assert "--address=$RAY_HEAD_IP:6379" in worker
    assert "RAY_ADDRESS" in _text()


def test_shell_commands_are_valid_bash() -> None:
    config = local_variant()
    commands = [
        *config["setup_commands"],
        *config["head_start_ray_commands"],
        *config["worker_start_ray_commands"],
    ]
    for command in commands:
        assert "\n" not in command.strip(), f"a folded command kept a newline: {command!r}"
        result = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        assert result.returncode == 0, f"{command!r}: {result.stderr}"


def test_no_real_addresses_or_secrets() -> None:
    text = _text()
    addresses = [m.group(0) for m in re.finditer(r"\b\d{1,3}(?:\.\d{1,3}){3}\b", text)]
    assert all(a.startswith("127.") for a in addresses), f"cluster.yaml should hold placeholders, not {addresses}"
    assert "BEGIN" not in text and "PRIVATE KEY" not in text
