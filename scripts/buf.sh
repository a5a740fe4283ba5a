#!/usr/bin/env bash
# Runs buf at the version the project pins, installing it from the npm
# registry (@bufbuild/buf) into .ci/buf on first use: `bash scripts/buf.sh lint`.
set -euo pipefail
BUF_VERSION=1.75.0
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$root/.ci/buf"
buf="$prefix/node_modules/.bin/buf"
if [[ ! -x "$buf" ]] || [[ "$("$buf" --version 2>/dev/null)" != "$BUF_VERSION" ]]; then
  if ! command -v npm >/dev/null; then
    echo "scripts/buf.sh: npm is needed to install buf (apt-get install nodejs npm)" >&2
    exit 1
  fi
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-save --ignore-scripts --no-audit --no-fund --loglevel=error \
    "@bufbuild/buf@$BUF_VERSION" >&2
fi
cd "$root"
exec "$buf" "$@"
