#!/usr/bin/env bash
# Runs the shared conformance scenario with the Java client (clients/conformance/README.md):
#     bash clients/java/conformance.sh SCENARIO CONFIG
# Builds the client when its sources changed (build output on stderr; offline when the local
# Maven repository already has everything), then prints one line per step on stdout.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: conformance.sh SCENARIO CONFIG" >&2; exit 2; }
SCENARIO="$(realpath "$1")"
CONFIG="$(realpath "$2")"
cd "$(dirname "${BASH_SOURCE[0]}")"
command -v mvn >/dev/null || { echo "conformance.sh: mvn is not installed" >&2; exit 1; }
command -v java >/dev/null || { echo "conformance.sh: java is not installed" >&2; exit 1; }

JAR=target/memoryd-client.jar
if [ ! -f "$JAR" ] || [ ! -d target/deps ] || [ -n "$(find pom.xml src -newer "$JAR" -print -quit)" ]; then
  rm -rf target/deps  # copy-dependencies never removes a jar the pom no longer names
  mvn -B -q -o package -DskipTests >&2 || mvn -B -q package -DskipTests >&2
fi
exec java -cp "$JAR:target/deps/*" dev.memoryd.client.conformance.Main "$SCENARIO" "$CONFIG"
