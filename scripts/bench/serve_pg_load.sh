#!/usr/bin/env bash
# `lookout serve` searching a PostgreSQL index under load (BENCHMARKS.md): a throwaway PostgreSQL (Debian's,
# scripts/pg-test-server), the example scenes indexed into it, then scripts/bench/serve_load.py's search
# endpoint at concurrency 1, 4 and 16 with the server's connections counted meanwhile.
#   scripts/bench/serve_pg_load.sh [SECONDS [DB_CONNECTIONS]]   (defaults: 30 and 4)
set -euo pipefail
cd "$(dirname "$0")/../.."
swift build -c release --product lookout >/dev/null
release=$(swift build -c release --show-bin-path)
work=$(mktemp -d /tmp/lookout-serve-pg.XXXXXX)
chmod a+rx "$work"
trap 'scripts/pg-test-server kill "$work/server" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
url=$(scripts/pg-test-server start "$work/server" "$((20000 + RANDOM % 20000))")
bin=$(cat "$work/server/.bindir")
"$release/lookout" index examples/scenes --db "$url" --plain 2>&1 | tail -1
echo "PostgreSQL $("$bin/psql" "$url" -qAtX -c 'SHOW server_version'), $("$bin/psql" "$url" -qAtX -c 'SELECT count(*) FROM lookout.images') photos indexed; serve --db-connections ${2:-4}"
python3 scripts/bench/serve_load.py "$release/lookout" --endpoints search --seconds "${1:-30}" \
    --pg "$url" --psql "$bin/psql" -- --db "$url" --db-connections "${2:-4}"
