#!/usr/bin/env bash
# Regenerates the committed gRPC code (cortex/v1, cortex/internal/v1) from
# proto/, and the descriptor set with comments that reflection serves.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. \
  proto/cortex/v1/*.proto proto/cortex/internal/v1/*.proto
touch cortex/v1/__init__.py cortex/internal/__init__.py cortex/internal/v1/__init__.py
