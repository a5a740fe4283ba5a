#!/usr/bin/env bash
# Regenerates everything made from proto/, in one go: the gRPC code
# (cortex/v1, cortex/internal/v1), the public contract's descriptor set with
# comments that reflection serves (cortex/v1/cortex_descriptor.binpb), and
# docs/api.md.
#
# `--accept-contract` also records proto/cortex/v1 as the accepted public
# contract (proto/cortex-v1-accepted.binpb), the image CI's `buf breaking`
# compares against. Run it when a change to the contract is agreed (a breaking
# one, or additions now promised to clients), never just to quiet the check.
set -euo pipefail
cd "$(dirname "$0")/.."
accept=false
case "${1-}" in
  "") ;;
  --accept-contract) accept=true ;;
  *) echo "usage: scripts/gen_proto.sh [--accept-contract]" >&2; exit 2 ;;
esac
python -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. \
  proto/cortex/v1/*.proto proto/cortex/internal/v1/*.proto
touch cortex/v1/__init__.py cortex/internal/__init__.py cortex/internal/v1/__init__.py
python -m grpc_tools.protoc -Iproto --include_imports --include_source_info \
  --descriptor_set_out=cortex/v1/cortex_descriptor.binpb proto/cortex/v1/*.proto
python scripts/gen_api_docs.py
if "$accept"; then
  bash scripts/buf.sh lint
  bash scripts/buf.sh build --path proto/cortex/v1 --exclude-source-info \
    -o proto/cortex-v1-accepted.binpb
  echo "recorded proto/cortex/v1 as the accepted contract: commit proto/cortex-v1-accepted.binpb"
fi
