#!/usr/bin/env bash
# Regenerates the committed gRPC code in cortex/v1 from proto/cortex/v1.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. proto/cortex/v1/*.proto
touch cortex/v1/__init__.py
