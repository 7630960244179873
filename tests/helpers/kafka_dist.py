"""Apache Kafka's jars and main classes for the tests: bench/kafka_dist.py, which the bench's Kafka peer shares
(the bench must not import tests/), re-exported under the name the test helpers use."""

from bench.kafka_dist import (
    POM,
    REPO,
    SERVER_JVM_OPTS,
    SERVER_LOG4J,
    TOOL_JVM_OPTS,
    TOOLS,
    TOOLS_LOG4J,
    WORKLOAD_JVM_OPTS,
    WORKLOAD_TOOLS,
    KafkaNotInstalled,
    classpath,
    java,
    java_command,
    kafka_home,
    kafka_version,
    lib_dir,
    pom_property,
    run_tool,
    tool_command,
)

__all__ = ["POM", "REPO", "SERVER_JVM_OPTS", "SERVER_LOG4J", "TOOLS", "TOOLS_LOG4J", "TOOL_JVM_OPTS",
           "WORKLOAD_JVM_OPTS", "WORKLOAD_TOOLS", "KafkaNotInstalled", "classpath", "java", "java_command",
           "kafka_home", "kafka_version", "lib_dir", "pom_property", "run_tool", "tool_command"]
