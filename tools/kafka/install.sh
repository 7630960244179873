#!/usr/bin/env bash
# Install Apache Kafka, the referee the tests compare Shoal with: tools/kafka/install.sh (`make kafka`)
#
# Maven resolves the jars tools/kafka/pom.xml names (Kafka's broker, tools, clients and Streams with their
# dependencies) from Maven Central into .tools/kafka-VERSION/lib (tools/maven_jars.sh); the tests run Kafka's main
# classes on that classpath (bench/kafka_dist.py). With CI set a failed install fails; on a dev box it only warns,
# and the Kafka tests then fail saying `make kafka`.
set -euo pipefail
cd "$(dirname "$0")/../.."

pom=tools/kafka/pom.xml
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")

# The JDK's tools (javap, javac) too: the tests read Kafka's classes and compile Java programs against its jars.
if ! command -v javap >/dev/null 2>&1; then
  tools/apt_install.sh "the Kafka tests (a JDK)" openjdk-17-jdk-headless default-jdk-headless || true
fi

exec tools/maven_jars.sh "$pom" ".tools/kafka-$version" "kafka_2.13-$version.jar" "Apache Kafka $version" \
  "the Kafka tests (make kafka)"
