#!/usr/bin/env bash
# Builds the DocC catalog of the library (Sources/Norq/Norq.docc) with swift-docc-plugin and fails on any DocC
# warning (an unresolved symbol link, an undocumented parameter of a documented function, an ambiguous article).
# Compiler warnings of the build it does are not DocC's and are left to the build. Run by scripts/test.sh after the
# tests (skipped on a filtered run or with NORQ_SKIP_DOCS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
log="$(mktemp /tmp/norq-docc.XXXXXX)"
trap 'rm -f "$log"' EXIT
if ! swift package --disable-sandbox generate-documentation --target Norq >"$log" 2>&1; then
    cat "$log" >&2
    echo "scripts/docs.sh: generate-documentation failed" >&2
    exit 1
fi
# SwiftPM's notes on a dependency's files it does not build (swift-distributed-tracing's CMakeLists.txt, since the
# library links Tracing) are about that package, not this documentation: not counted.
if grep '^warning:' "$log" | grep -qv "which are unhandled; explicitly declare them as resources or exclude"; then
    grep -A6 '^warning:' "$log" | grep -v "which are unhandled" >&2
    echo "scripts/docs.sh: DocC warnings (above)" >&2
    exit 1
fi
echo "scripts/docs.sh: the Norq documentation builds without DocC warnings" >&2
