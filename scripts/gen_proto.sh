#!/usr/bin/env bash
# Regenerates the committed protobuf modules from their .proto files:
#   engine/catalog/catalog_pb2.py        from engine/catalog/catalog.proto
#   flight_server/sql/flight_sql_pb2.py  from flight_server/sql/flight_sql.proto (our Flight SQL subset)
#
#   scripts/gen_proto.sh              uses .venv/bin/python (scripts/bootstrap.sh), else python3
#   PYTHON=/path/to/python scripts/gen_proto.sh
#
# Needs grpcio-tools (a dev dependency), which bundles protoc. The generated files
# are committed; tests/engine/catalog/test_catalog_proto.py and
# tests/flight_server/test_flight_sql.py check they are current.
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
if [[ -f flight_server/sql/flight_sql.proto ]]; then
  "$PYTHON" -m grpc_tools.protoc -I. --python_out=. flight_server/sql/flight_sql.proto
  # generated code is not linted (pyproject excludes catalog_pb2.py; this one says so itself)
  sed -i '1i # ruff: noqa' flight_server/sql/flight_sql_pb2.py
  echo "generated flight_server/sql/flight_sql_pb2.py"
fi
