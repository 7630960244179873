#!/usr/bin/env bash
# Install Apache Kafka, the referee the tests compare Shoal with: tools/kafka/install.sh
#
# Maven resolves the jars tools/kafka/pom.xml names (Kafka's broker, tools, clients and Streams with their
# dependencies) from Maven Central and copies them into .tools/kafka-VERSION/lib (git-ignored); the tests run
# Kafka's main classes on that classpath (tests/helpers/kafka_dist.py). A stamp holding the pom's checksum makes a
# rerun instant; a changed pom installs again. Maven itself comes from apt-get when missing. With CI set a failed
# install fails (exit 1); on a dev box it only warns, and the Kafka tests then fail saying `make kafka`.
set -euo pipefail
cd "$(dirname "$0")/../.."

pom=tools/kafka/pom.xml
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
home=.tools/kafka-$version
stamp=$home/.installed
want=$(sha256sum "$pom" | cut -d' ' -f1)

# The JDK's tools (javap, javac) too: the tests read Kafka's classes and compile Java programs against its jars.
if ! command -v javap >/dev/null 2>&1; then
  tools/apt_install.sh "the Kafka tests (a JDK)" openjdk-17-jdk-headless default-jdk-headless || true
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$home/lib/kafka_2.13-$version.jar" ]; then
  exit 0
fi

fail() {
  if [ -n "${CI:-}" ]; then
    echo "error: could not install Apache Kafka $version: $1 (required in CI: the Kafka tests)" >&2
    exit 1
  fi
  echo "warning: could not install Apache Kafka $version: $1; the Kafka tests will fail (make kafka)" >&2
  exit 0
}

if ! command -v mvn >/dev/null 2>&1; then
  tools/apt_install.sh "Apache Kafka for the tests" maven || true
  command -v mvn >/dev/null 2>&1 || fail "mvn is missing"
fi

echo "installing Apache Kafka $version into $home with mvn (from Maven Central)"
mkdir -p "$home"
rm -rf "$home/lib.new"
# Into lib.new, then renamed: an interrupted copy never leaves a half-filled lib behind the stamp.
# (jansi.noreset: Maven 3.8 prints colour resets even in batch mode.)
if ! MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn --batch-mode --no-transfer-progress --quiet \
    -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$PWD/$home/lib.new"; then
  rm -rf "$home/lib.new"
  fail "mvn dependency:copy-dependencies failed"
fi
[ -f "$home/lib.new/kafka_2.13-$version.jar" ] || fail "kafka_2.13-$version.jar is not among the copied jars"
rm -rf "$home/lib"
mv "$home/lib.new" "$home/lib"
echo "$want" > "$stamp"
echo "Apache Kafka $version: $(find "$home/lib" -name '*.jar' | wc -l) jars in $home/lib"
