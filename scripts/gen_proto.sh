#!/usr/bin/env bash
# Regenerates engine/catalog/catalog_pb2.py from engine/catalog/catalog.proto.
#
#   scripts/gen_proto.sh              uses .venv/bin/python (scripts/bootstrap.sh), else python3
#   PYTHON=/path/to/python scripts/gen_proto.sh
#
# Needs grpcio-tools (a dev dependency), which bundles protoc. The generated file
# is committed; tests/engine/catalog/test_catalog_proto.py checks it is current.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
cd "$ROOT"
# -I. with the path relative to the root: the file registers as
# "engine/catalog/catalog.proto" and the module as engine.catalog.catalog_pb2.
"$PYTHON" -m grpc_tools.protoc -I. --python_out=. engine/catalog/catalog.proto
echo "generated engine/catalog/catalog_pb2.py"
