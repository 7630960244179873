#!/usr/bin/env bash
# Install MirrorMaker 2 for the test that runs it between Shoal and a Kafka cluster:
# tools/kafka-mirror/install.sh (`make kafka-mirror`)
#
# Maven resolves the jars tools/kafka-mirror/pom.xml names (connect-mirror, connect-mirror-client and
# connect-runtime with their dependencies) from Maven Central into .tools/kafka-mirror-VERSION/lib
# (tools/maven_jars.sh); tests/helpers/mirror_maker.py runs MirrorMaker's main class on that classpath. With CI set
# a failed install fails; on a dev box it only warns, and the MirrorMaker test then fails saying
# `make kafka-mirror`.
set -euo pipefail
cd "$(dirname "$0")/../.."

pom=tools/kafka-mirror/pom.xml
version=$(sed -n 's:.*<mirror.version>\(.*\)</mirror.version>.*:\1:p' "$pom")
exec tools/maven_jars.sh "$pom" ".tools/kafka-mirror-$version" "connect-mirror-$version.jar" \
  "MirrorMaker 2 (connect-mirror $version)" "the MirrorMaker 2 test (make kafka-mirror)"
