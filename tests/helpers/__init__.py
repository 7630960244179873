"""Helpers shared by the test folders; no tests here. Test modules import from these, never from each other.

broker_process     a broker as a child process (the `broker`, `broker_module`, `broker_factory` fixtures of
                   tests/conftest.py use it), free_port, restart
waiting            wait_until / async_wait_until: poll a condition with a deadline instead of sleeping
raw_client         RawClient: one request at a time over a socket, for any (api, version)
raw_requests       raw Produce, Metadata topic id, Fetch bodies, CreateTopics, classic JoinGroup
share_raw          raw ShareGroupHeartbeat / ShareFetch / ShareAcknowledge, and readers of their responses
confluent_clients  confluent-kafka: admin_client, create_topic, produce_all, consume_all, group configs, offsets
share_consumers    confluent-kafka ShareConsumer: make one, poll, drain, poll until every member was served
bounded_close      close a ShareConsumer within a deadline (librdkafka's close can hang)
group_members      consumer-group members in threads that record what they read and committed
share_state        MemoryShareState: an in-memory share-state store for share-partition unit tests
record_batches     record batches for log tests
sasl, tls_material SASL users and listeners; TLS files made on the fly
kcat, proc_stats   the kcat CLI; a process's RSS and open files
kafka_dist         Apache Kafka 4.4's jars (make kafka): java_command, run_tool and the table of its tools' main classes
kafka_process      KafkaNode / KafkaCluster: KRaft Kafka JVMs on loopback ports, formatted by Kafka's storage tool
kafka_fixtures     the `kafka`, `kafka_sasl`, `kafka_cluster` fixtures (a pytest plugin, listed by tests/conftest.py)
kafka_run          one Kafka per test run across xdist workers; pid_registry and kafka_watchdog stop it by PID
mirror_maker       MirrorMaker 2's dedicated mode (connect-mirror 4.3.1, make kafka-mirror) as a JVM stopped by PID
differential       Target / Pair / normalize / assert_same / known_difference: a scenario against Kafka and Shoal
java_clients       the Java programs of tests/java (Kafka's own clients) compiled on first use and run per broker
"""
