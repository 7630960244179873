#!/usr/bin/env bash
# Install Spark's own Kafka source for bench/spark_yardstick.py: tools/spark-kafka/install.sh (`make spark-kafka`)
#
# Maven resolves the jars tools/spark-kafka/pom.xml names (spark-sql-kafka-0-10 and what it needs beyond
# PySpark's own jars) from Maven Central into .tools/spark-kafka-VERSION/lib (tools/maven_jars.sh); the bench
# passes them to Spark with spark.jars, so Spark itself fetches nothing when it starts.
set -euo pipefail
cd "$(dirname "$0")/../.."

pom=tools/spark-kafka/pom.xml
version=$(sed -n 's:.*<spark.kafka.version>\(.*\)</spark.kafka.version>.*:\1:p' "$pom")
exec tools/maven_jars.sh "$pom" ".tools/spark-kafka-$version" "spark-sql-kafka-0-10_2.13-$version.jar" \
  "Spark's Kafka source $version" "bench/spark_yardstick.py (make spark-kafka)"
