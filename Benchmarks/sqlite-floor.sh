#!/usr/bin/env bash
# The SQLite floor of the durable store phase (Benchmarks/README.md, "SQLite store CPU, stop 24"): sqlite_floor.c runs
# the store's claim and completion statements of stop 23, 24 and 25 in C, against the amalgamation that
# sqlite-nio vendors (compiled with sqlite-nio's defines for a release build), and prints CPU s per 10,000 rows.
# The store phase's figure minus this one is what the Swift side (SQLiteNIO, the store, the thread hops) costs.
#
# Environment (defaults in brackets): ROWS [100000]  ROUNDS [3] interleaved runs of each mode
#   MODES ["stop23 stop24 stop25"] (also cell26: a claim read as one cell, tried at stop 26)
#   WORK [/tmp/norq-bench-sqlite-floor]  SQLITE_NIO [the .build checkout of sqlite-nio]
# Each run holds the shared benchmark lock (/tmp/norq-bench.lock); the compilation does not.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ROWS="${ROWS:-100000}"; ROUNDS="${ROUNDS:-3}"; WORK="${WORK:-/tmp/norq-bench-sqlite-floor}"
SQLITE_NIO="${SQLITE_NIO:-$ROOT/.build/checkouts/sqlite-nio}"
SOURCE="$SQLITE_NIO/Sources/VaporCSQLite"
if [ ! -f "$SOURCE/sqlite_nio_sqlite3.c" ]; then
    echo "no sqlite-nio checkout at $SQLITE_NIO: run 'swift package resolve' (or set SQLITE_NIO)" >&2; exit 1
fi
command -v cc >/dev/null || { echo "missing a C compiler: install it with 'apt-get install gcc'" >&2; exit 1; }
mkdir -p "$WORK"
# sqlite-nio's cSettings (Package.swift) of a release build.
DEFINES=(-DSQLITE_DEFAULT_MEMSTATUS=0 -DSQLITE_DISABLE_PAGECACHE_OVERFLOW_STATS -DSQLITE_DQS=0
    -DSQLITE_ENABLE_COLUMN_METADATA -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ENABLE_FTS3 -DSQLITE_ENABLE_FTS3_PARENTHESIS
    -DSQLITE_ENABLE_FTS3_TOKENIZER -DSQLITE_ENABLE_FTS4 -DSQLITE_ENABLE_FTS5 -DSQLITE_ENABLE_NULL_TRIM
    -DSQLITE_ENABLE_RTREE -DSQLITE_ENABLE_SESSION -DSQLITE_ENABLE_STMTVTAB -DSQLITE_ENABLE_UNKNOWN_SQL_FUNCTION
    -DSQLITE_ENABLE_UNLOCK_NOTIFY -DSQLITE_MAX_VARIABLE_NUMBER=250000 -DSQLITE_LIKE_DOESNT_MATCH_BLOBS
    -DSQLITE_OMIT_COMPLETE -DSQLITE_OMIT_DEPRECATED -DSQLITE_OMIT_DESERIALIZE -DSQLITE_OMIT_GET_TABLE
    -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_OMIT_PROGRESS_CALLBACK -DSQLITE_OMIT_SHARED_CACHE -DSQLITE_OMIT_TCL_VARIABLE
    -DSQLITE_OMIT_TRACE -DSQLITE_SECURE_DELETE -DSQLITE_THREADSAFE=1 -DSQLITE_UNTESTABLE -DSQLITE_USE_URI)
if [ ! -f "$WORK/sqlite.o" ] || [ "$SOURCE/sqlite_nio_sqlite3.c" -nt "$WORK/sqlite.o" ]; then
    echo "compiling the amalgamation (about a minute)" >&2
    nice cc -O2 "${DEFINES[@]}" -I "$SOURCE/include" -c "$SOURCE/sqlite_nio_sqlite3.c" -o "$WORK/sqlite.o"
fi
nice cc -O2 "${DEFINES[@]}" -I "$SOURCE/include" "$ROOT/Benchmarks/sqlite_floor.c" "$WORK/sqlite.o" \
    -o "$WORK/sqlite_floor" -lpthread -lm
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
    for mode in ${MODES:-stop23 stop24 stop25}; do
        rm -f "$WORK/floor.db" "$WORK/floor.db-wal" "$WORK/floor.db-shm"
        flock /tmp/norq-bench.lock "$WORK/sqlite_floor" "$mode" "$ROWS" "$WORK/floor.db"
    done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
