#!/usr/bin/env bash
# Runs the shared conformance scenario with the Java client (clients/conformance/README.md):
#     bash clients/java/conformance.sh SCENARIO CONFIG
# Builds the client and the runner (module conformance/, which depends on the client as any
# application does) in one reactor when their sources changed — build output on stderr, offline
# when the local Maven repository already has everything, nothing installed — then prints one
# line per step on stdout.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: conformance.sh SCENARIO CONFIG" >&2; exit 2; }
SCENARIO="$(realpath "$1")"
CONFIG="$(realpath "$2")"
cd "$(dirname "${BASH_SOURCE[0]}")"
command -v mvn >/dev/null || { echo "conformance.sh: mvn is not installed" >&2; exit 1; }
command -v java >/dev/null || { echo "conformance.sh: java is not installed" >&2; exit 1; }

JAR=conformance/target/memoryd-conformance.jar
DEPS=conformance/target/deps
if [ ! -f "$JAR" ] || [ ! -d "$DEPS" ] \
    || [ -n "$(find pom.xml memoryd-client/pom.xml memoryd-client/src conformance/pom.xml conformance/src -newer "$JAR" -print -quit)" ]; then
  rm -rf "$DEPS"  # copy-dependencies never removes a jar the pom no longer names
  # The runner only needs the client's jar: skip its tests, javadoc and sources jar here.
  BUILD=(-B -q package -pl conformance -am -DskipTests -Dmaven.javadoc.skip=true -Dmaven.source.skip=true)
  mvn -o "${BUILD[@]}" >&2 || mvn "${BUILD[@]}" >&2
fi
# A run lasts seconds: the JVM flags Maven runs with here (.mvn/jvm.config: the quick compiler
# alone, the serial collector).
mapfile -t QUICK_JVM < .mvn/jvm.config
exec java "${QUICK_JVM[@]}" -cp "$JAR:$DEPS/*" dev.memoryd.conformance.Main "$SCENARIO" "$CONFIG"
