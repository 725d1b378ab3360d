#!/usr/bin/env bash
# Regenerates the Swift code of docs/openapi.yaml with apple/swift-openapi-generator (run as a tool, so that no build
# of the package compiles the generator or its plugin): the request and response types shared by the server and the
# client (Sources/NorqAPI) and the client (Sources/NorqClient). The generated files are committed;
# Sources/NorqAPI/Generated/openapi.yaml.sha256 records the spec they came from, and a test
# (OpenAPIGeneratedCodeTests) fails when docs/openapi.yaml changed without running this script.
#
#   NORQ_OPENAPI_GENERATOR_DIR=DIR   where the throwaway package that builds the generator lives
#                                    (default: $TMPDIR/norq-openapi-generator; kept between runs)
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=1.14.3
TOOL_DIR="${NORQ_OPENAPI_GENERATOR_DIR:-${TMPDIR:-/tmp}/norq-openapi-generator}"
mkdir -p "$TOOL_DIR"
cat > "$TOOL_DIR/Package.swift" <<MANIFEST
// swift-tools-version: 6.1
import PackageDescription
let package = Package(
    name: "norq-openapi-generator",
    dependencies: [.package(url: "https://github.com/apple/swift-openapi-generator", exact: "$VERSION")]
)
MANIFEST
swift build --package-path "$TOOL_DIR" -j 2 --product swift-openapi-generator >&2
GENERATOR="$(swift build --package-path "$TOOL_DIR" --show-bin-path)/swift-openapi-generator"

generate() {  # config, output directory
    "$GENERATOR" generate docs/openapi.yaml --config "scripts/openapi/$1" --output-directory "$2" >&2
}
generate types.yaml Sources/NorqAPI/Generated
generate client.yaml Sources/NorqClient/Generated
# The generator writes every mode's file names (empty ones for the modes not asked): keep each mode's.
rm -f Sources/NorqAPI/Generated/{Client,Server}.swift Sources/NorqClient/Generated/{Types,Server}.swift \
    Sources/NorqClient/Generated/Types+*.swift
# The types come in several files that each import everything; Swift 6 warns about each `public import` a file does
# not use publicly. Joined into one Types.swift (one header, every body), every import is used.
python3 - Sources/NorqAPI/Generated <<'PY'
import os, re, sys
folder = sys.argv[1]
names = sorted(n for n in os.listdir(folder) if n.startswith("Types") and n.endswith(".swift"))
names.sort(key=lambda n: (n != "Types.swift", n))
header_line = re.compile(r"^(//(?!/)|#if|#endif|#else|@diagnose|@_spi|public import|package import|import)")
header, bodies = None, []
for name in names:
    lines = open(os.path.join(folder, name)).read().split("\n")
    i = 0
    while i < len(lines) and header_line.match(lines[i]):
        i += 1
    if header is None:
        header = lines[:i]
    bodies.append("\n".join(lines[i:]).strip("\n"))
    os.remove(os.path.join(folder, name))
with open(os.path.join(folder, "Types.swift"), "w") as out:
    out.write("\n".join(header) + "\n" + "\n\n".join(bodies) + "\n")
PY
sha256sum docs/openapi.yaml | cut -d ' ' -f 1 > Sources/NorqAPI/Generated/openapi.yaml.sha256
echo "generated from docs/openapi.yaml ($(cat Sources/NorqAPI/Generated/openapi.yaml.sha256))" >&2
