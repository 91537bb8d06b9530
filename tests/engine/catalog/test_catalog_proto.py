"""The committed generated code matches catalog.proto, and the wire format is versioned."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROTO = "engine/catalog/catalog.proto"
GENERATED = ROOT / "engine" / "catalog" / "catalog_pb2.py"


def test_generated_code_is_current(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools (a dev dependency) regenerates the code")
    (tmp_path / "engine" / "catalog").mkdir(parents=True)
    shutil.copy(ROOT / PROTO, tmp_path / PROTO)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.", PROTO], cwd=tmp_path, check=True)
    fresh = (tmp_path / "engine" / "catalog" / "catalog_pb2.py").read_text()
    assert GENERATED.read_text() == fresh, "engine/catalog/catalog_pb2.py is stale: run scripts/gen_proto.sh"


def test_script_regenerates_in_place(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    copy = tmp_path / "repo"
    (copy / "engine" / "catalog").mkdir(parents=True)
    (copy / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "gen_proto.sh", copy / "scripts" / "gen_proto.sh")
    shutil.copy(ROOT / PROTO, copy / PROTO)
    subprocess.run(
        ["bash", str(copy / "scripts" / "gen_proto.sh")], env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"}, check=True, capture_output=True
    )
    assert (copy / "engine" / "catalog" / "catalog_pb2.py").read_text() == GENERATED.read_text()


def test_package_and_messages() -> None:
    from engine.catalog import catalog_pb2 as pb

    assert pb.DESCRIPTOR.package == "metastore.catalog.v1"
    assert {"Transaction", "Checkpoint", "Action", "AddPartition", "RemovePartition", "TombstonePartition", "SetTableStatistics", "Upgrade"} <= set(
        pb.DESCRIPTOR.message_types_by_name
    )
    assert [f.name for f in pb.Action.DESCRIPTOR.oneofs_by_name["action"].fields] == [
        "add_partition",
        "remove_partition",
        "tombstone_partition",
        "set_table_statistics",
        "upgrade",
    ]


def test_unknown_fields_are_skipped_and_frames_checked() -> None:
    """A newer writer's extra fields do not stop an older reader; a damaged frame always does."""
    from engine.catalog import catalog_pb2 as pb
    from engine.catalog import codec

    msg = pb.Transaction(format_version=1, id=1, uuid=codec.ROOT_UUID, timeline="00000000-0000-4000-8000-000000000000", job_id="j")
    payload = msg.SerializeToString() + b"\xa2\x06\x03abc"  # field 100, a string this version does not know
    rec = codec.decode_transaction(codec.frame(payload))
    assert rec.job_id == "j" and rec.id == 1
    data = codec.frame(payload)
    for bad in (data[:-1], data + b"\x00", b"X" + data[1:], data[:12] + bytes([data[12] ^ 1]) + data[13:]):
        with pytest.raises(codec.FormatError):
            codec.decode_transaction(bad)
