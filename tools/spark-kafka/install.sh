#!/usr/bin/env bash
# Install Spark's own Kafka source for bench/spark_yardstick.py: tools/spark-kafka/install.sh (`make spark-kafka`)
#
# Maven resolves the jars tools/spark-kafka/pom.xml names (spark-sql-kafka-0-10 and what it needs beyond
# PySpark's own jars) from Maven Central and copies them into .tools/spark-kafka-VERSION/lib (git-ignored); the
# bench passes them to Spark with spark.jars, so Spark itself fetches nothing when it starts. A stamp holding the
# pom's checksum makes a rerun instant; a changed pom installs again. Maven comes from apt-get when missing. A
# failure only warns (the bench then says to run `make spark-kafka`), unless CI is set.
set -euo pipefail
cd "$(dirname "$0")/../.."

pom=tools/spark-kafka/pom.xml
version=$(sed -n 's:.*<spark.kafka.version>\(.*\)</spark.kafka.version>.*:\1:p' "$pom")
home=.tools/spark-kafka-$version
stamp=$home/.installed
want=$(sha256sum "$pom" | cut -d' ' -f1)
jar=spark-sql-kafka-0-10_2.13-$version.jar

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$home/lib/$jar" ]; then
  exit 0
fi

fail() {
  if [ -n "${CI:-}" ]; then
    echo "error: could not install Spark's Kafka source $version: $1" >&2
    exit 1
  fi
  echo "warning: could not install Spark's Kafka source $version: $1; bench/spark_yardstick.py needs it" >&2
  exit 0
}

if ! command -v mvn >/dev/null 2>&1; then
  tools/apt_install.sh "Spark's Kafka source for the bench" maven || true
  command -v mvn >/dev/null 2>&1 || fail "mvn is missing"
fi

echo "installing Spark's Kafka source $version into $home with mvn (from Maven Central)"
mkdir -p "$home"
rm -rf "$home/lib.new"
# Into lib.new, then renamed: an interrupted copy never leaves a half-filled lib behind the stamp.
if ! MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn --batch-mode --no-transfer-progress --quiet \
    -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$PWD/$home/lib.new"; then
  rm -rf "$home/lib.new"
  fail "mvn dependency:copy-dependencies failed"
fi
[ -f "$home/lib.new/$jar" ] || fail "$jar is not among the copied jars"
rm -rf "$home/lib"
mv "$home/lib.new" "$home/lib"
echo "$want" > "$stamp"
echo "Spark's Kafka source $version: $(find "$home/lib" -name '*.jar' | wc -l) jars in $home/lib"
