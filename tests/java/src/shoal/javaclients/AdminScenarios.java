package shoal.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

/**
 * The Admin client's calls that Shoal serves, against a PLAINTEXT broker (the SASL-only ones are in
 * SecurityScenarios, share groups in ShareScenarios): each call's result or its exception, on resources the scenario
 * made (the brokers hold other tests' resources too, so listings are filtered to ours).
 */
final class AdminScenarios {
    private AdminScenarios() {}

    static Map<String, Scenario> all() {
        Map<String, Scenario> all = new LinkedHashMap<>();
        all.put("topics", AdminScenarios::topics);
        all.put("topic_configs", AdminScenarios::topicConfigs);
        all.put("broker_and_group_configs", AdminScenarios::brokerAndGroupConfigs);
        all.put("consumer_groups", AdminScenarios::consumerGroups);
        all.put("list_groups", AdminScenarios::listGroups);
        all.put("features", AdminScenarios::features);
        all.put("client_quotas", AdminScenarios::clientQuotas);
        all.put("client_metrics", AdminScenarios::clientMetrics);
        all.put("log_dirs", AdminScenarios::logDirs);
        all.put("elections_and_reassignments", AdminScenarios::electionsAndReassignments);
        all.put("records_and_offsets", AdminScenarios::recordsAndOffsets);
        all.put("cluster", AdminScenarios::cluster);
        all.put("transactions", AdminScenarios::transactions);
        return all;
    }

    static Object outcome(KafkaFuture<?> future) {
        return Json.outcome(future);
    }

    static Object attempt(ShareScenarios.ThrowingRunnable action) {
        return ShareScenarios.attempt(action);
    }

    static <T> T get(KafkaFuture<T> future) throws Exception {
        return future.get(60, TimeUnit.SECONDS);
    }

    static AlterConfigOp op(String name, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(name, value), type);
    }

    /** A config's entries by name: value, source, sensitivity, read-only, type. */
    static Object entries(Config config, Collection<String> only) {
        Map<String, Object> out = new TreeMap<>();
        for (ConfigEntry e : config.entries()) {
            if (only == null || only.contains(e.name())) {
                out.put(e.name(), Json.obj("value", e.value(), "source", e.source(), "sensitive", e.isSensitive(),
                    "read_only", e.isReadOnly(), "type", e.type()));
            }
        }
        return out;
    }

    /** The entries a describeConfigs of one resource shows that are not defaults. */
    static Object nonDefault(Admin admin, ConfigResource resource) {
        try {
            Config config = get(admin.describeConfigs(List.of(resource)).values().get(resource));
            Map<String, Object> out = new TreeMap<>();
            for (ConfigEntry e : config.entries()) {
                if (e.source() != ConfigEntry.ConfigSource.DEFAULT_CONFIG) {
                    out.put(e.name(), Json.obj("value", e.value(), "source", e.source()));
                }
            }
            return out;
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    static Object describe(Admin admin, ConfigResource resource, Collection<String> only) {
        try {
            return entries(get(admin.describeConfigs(List.of(resource)).values().get(resource)), only);
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    static Object alter(Admin admin, ConfigResource resource, boolean validateOnly, AlterConfigOp... ops) {
        Object outcome = outcome(admin.incrementalAlterConfigs(Map.of(resource, List.of(ops)),
            new AlterConfigsOptions().validateOnly(validateOnly)).values().get(resource));
        if (outcome.equals("ok") && !validateOnly) {
            settle(admin, resource, ops);
        }
        return outcome;
    }

    /**
     * Waits (up to 15 s, then goes on) until a describe shows what `ops` set and deleted: Kafka's broker answers
     * from its metadata image, which follows the controller's commit by a moment.
     */
    static void settle(Admin admin, ConfigResource resource, AlterConfigOp... ops) {
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (System.nanoTime() < deadline) {
            try {
                Config config = get(admin.describeConfigs(List.of(resource)).values().get(resource));
                boolean settled = true;
                for (AlterConfigOp op : ops) {
                    ConfigEntry entry = config.get(op.configEntry().name());
                    if (op.opType() == AlterConfigOp.OpType.SET) {
                        settled &= entry != null && op.configEntry().value().equals(entry.value());
                    } else if (op.opType() == AlterConfigOp.OpType.DELETE) {
                        settled &= entry == null || entry.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG
                            || entry.source() == ConfigEntry.ConfigSource.STATIC_BROKER_CONFIG
                            || entry.source() == ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG;
                    }
                }
                if (settled) {
                    return;
                }
                Thread.sleep(20);
            } catch (Exception e) {
                return;
            }
        }
    }

    // -- topics ---------------------------------------------------------------------------------------------------

    static Object topics(Env env) throws Exception {
        Admin admin = env.admin();
        String t1 = env.name("admin-topic");
        String t2 = env.name("admin-topic-assigned");
        String t3 = env.name("admin-topic-validated");
        Map<String, Object> out = new LinkedHashMap<>();
        var created = admin.createTopics(List.of(
            new NewTopic(t1, 3, (short) 1).configs(Map.of("cleanup.policy", "compact", "retention.ms", "3600000")),
            new NewTopic(t2, Map.of(0, List.of(1), 1, List.of(1)))));
        out.put("create", Json.of(created.values()));
        out.put("created_partitions", outcome(created.numPartitions(t1)));
        out.put("created_replication_factor", outcome(created.replicationFactor(t1)));
        out.put("created_topic_id_known", outcome(created.topicId(t1).thenApply(id -> id != null)));
        Config createdConfig = get(created.config(t1));
        out.put("created_config", entries(createdConfig, null));
        env.awaitTopics(t1, t2);
        out.put("create_again", outcome(admin.createTopics(List.of(new NewTopic(t1, 1, (short) 1))).all()));
        out.put("create_validate_only", outcome(admin.createTopics(List.of(new NewTopic(t3, 2, (short) 1)),
            new CreateTopicsOptions().validateOnly(true)).all()));
        Map<String, NewTopic> bad = new LinkedHashMap<>();
        bad.put("replication_factor_2", new NewTopic(env.name("admin-bad-rf"), 1, (short) 2));
        bad.put("slash_in_name", new NewTopic(env.name("admin-bad") + "/x", 1, (short) 1));
        bad.put("name_too_long", new NewTopic("x".repeat(250), 1, (short) 1));
        bad.put("bad_config_value", new NewTopic(env.name("admin-bad-value"), 1, (short) 1)
            .configs(Map.of("retention.ms", "soon")));
        bad.put("unknown_config", new NewTopic(env.name("admin-bad-config"), 1, (short) 1)
            .configs(Map.of("no.such.config", "1")));
        bad.put("zero_partitions", new NewTopic(env.name("admin-bad-partitions"), 0, (short) 1));
        bad.put("assignment_to_missing_broker", new NewTopic(env.name("admin-bad-assignment"),
            Map.of(0, List.of(7))));
        Map<String, Object> badOut = new TreeMap<>();
        for (var e : bad.entrySet()) {
            badOut.put(e.getKey(), outcome(admin.createTopics(List.of(e.getValue())).all()));
        }
        out.put("create_invalid", badOut);
        out.put("describe", Json.of(get(admin.describeTopics(List.of(t1, t2),
            new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames())));
        Uuid t1Id = get(admin.describeTopics(List.of(t1)).allTopicNames()).get(t1).topicId();
        out.put("describe_by_id", outcome(admin.describeTopics(TopicCollection.ofTopicIds(List.of(t1Id)))
            .allTopicIds().thenApply(m -> m.get(t1Id).name())));
        out.put("describe_unknown", outcome(admin.describeTopics(List.of(env.name("admin-missing"))).allTopicNames()));
        out.put("describe_unknown_id", outcome(admin.describeTopics(TopicCollection.ofTopicIds(
            List.of(Uuid.randomUuid()))).allTopicIds()));
        out.put("listed", listed(admin, t1, t2, t3));
        out.put("add_partitions", outcome(admin.createPartitions(Map.of(t1, NewPartitions.increaseTo(5))).all()));
        out.put("add_partitions_validate_only", outcome(admin.createPartitions(
            Map.of(t1, NewPartitions.increaseTo(8)), new CreatePartitionsOptions().validateOnly(true)).all()));
        out.put("shrink_partitions", outcome(admin.createPartitions(Map.of(t1, NewPartitions.increaseTo(4))).all()));
        out.put("same_partitions", outcome(admin.createPartitions(Map.of(t1, NewPartitions.increaseTo(5))).all()));
        out.put("add_partitions_assigned", outcome(admin.createPartitions(
            Map.of(t2, NewPartitions.increaseTo(3, List.of(List.of(1))))).all()));
        out.put("add_partitions_bad_assignment", outcome(admin.createPartitions(
            Map.of(t2, NewPartitions.increaseTo(4, List.of(List.of(7))))).all()));
        out.put("add_partitions_unknown_topic", outcome(admin.createPartitions(
            Map.of(env.name("admin-missing"), NewPartitions.increaseTo(2))).all()));
        SecurityScenarios.settle(() -> {
            try {
                var topics = get(admin.describeTopics(List.of(t1, t2)).allTopicNames());
                return topics.get(t1).partitions().size() == 5 && topics.get(t2).partitions().size() == 3;
            } catch (Exception e) {
                return false;
            }
        });
        out.put("partitions_after", Json.of(get(admin.describeTopics(List.of(t1, t2)).allTopicNames())
            .entrySet().stream().collect(java.util.stream.Collectors.toMap(e -> e.getKey(),
                e -> e.getValue().partitions().size()))));
        out.put("delete", outcome(admin.deleteTopics(List.of(t2)).all()));
        out.put("delete_unknown", outcome(admin.deleteTopics(List.of(env.name("admin-missing"))).all()));
        out.put("delete_by_id", outcome(admin.deleteTopics(TopicCollection.ofTopicIds(List.of(t1Id))).all()));
        Env.await("the deleted topics to be gone", Env.DEADLINE, () -> {
            try {
                return get(admin.listTopics().names()).stream().noneMatch(n -> n.equals(t1) || n.equals(t2));
            } catch (Exception e) {
                return false;
            }
        });
        out.put("describe_deleted", outcome(admin.describeTopics(List.of(t2)).allTopicNames()));
        out.put("listed_after_delete", listed(admin, t1, t2, t3));
        return out;
    }

    static Object listed(Admin admin, String... names) throws Exception {
        List<String> out = new ArrayList<>();
        for (String name : get(admin.listTopics().names())) {
            if (List.of(names).contains(name)) {
                out.add(name);
            }
        }
        out.sort(Json.ORDER);
        return out;
    }

    // -- configs --------------------------------------------------------------------------------------------------

    static Object topicConfigs(Env env) throws Exception {
        Admin admin = env.admin();
        String topic = env.name("admin-configs");
        env.createTopic(topic, 1, Map.of("retention.ms", "86400000"));
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("describe", describe(admin, resource, null));
        out.put("set", alter(admin, resource, false, op("retention.ms", "1000000", AlterConfigOp.OpType.SET),
            op("max.message.bytes", "2000000", AlterConfigOp.OpType.SET)));
        out.put("append", alter(admin, resource, false, op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND)));
        out.put("after_set_append", nonDefault(admin, resource));
        out.put("subtract", alter(admin, resource, false, op("cleanup.policy", "delete",
            AlterConfigOp.OpType.SUBTRACT)));
        out.put("delete", alter(admin, resource, false, op("retention.ms", null, AlterConfigOp.OpType.DELETE)));
        out.put("after_subtract_delete", nonDefault(admin, resource));
        out.put("validate_only", alter(admin, resource, true, op("segment.bytes", "1048576",
            AlterConfigOp.OpType.SET)));
        Map<String, Object> bad = new TreeMap<>();
        bad.put("value_not_a_number", alter(admin, resource, false, op("retention.ms", "soon",
            AlterConfigOp.OpType.SET)));
        bad.put("unknown_config", alter(admin, resource, false, op("no.such.config", "1",
            AlterConfigOp.OpType.SET)));
        bad.put("append_to_a_number", alter(admin, resource, false, op("retention.ms", "5",
            AlterConfigOp.OpType.APPEND)));
        bad.put("below_minimum", alter(admin, resource, false, op("segment.bytes", "10",
            AlterConfigOp.OpType.SET)));
        bad.put("not_in_list", alter(admin, resource, false, op("cleanup.policy", "sometimes",
            AlterConfigOp.OpType.SET)));
        bad.put("same_config_twice", alter(admin, resource, false, op("retention.ms", "1",
            AlterConfigOp.OpType.SET), op("retention.ms", "2", AlterConfigOp.OpType.SET)));
        bad.put("unknown_topic", alter(admin, new ConfigResource(ConfigResource.Type.TOPIC,
            env.name("admin-missing")), false, op("retention.ms", "1", AlterConfigOp.OpType.SET)));
        out.put("invalid", bad);
        out.put("after_invalid", nonDefault(admin, resource));
        out.put("describe_unknown_topic", describe(admin, new ConfigResource(ConfigResource.Type.TOPIC,
            env.name("admin-missing")), null));
        return out;
    }

    static final List<String> BROKER_KEYS = List.of("num.partitions", "default.replication.factor",
        "auto.create.topics.enable", "message.max.bytes", "log.retention.hours", "log.retention.ms",
        "log.cleanup.policy", "compression.type", "min.insync.replicas", "group.share.record.lock.duration.ms",
        "group.share.delivery.count.limit", "group.consumer.session.timeout.ms", "unclean.leader.election.enable",
        "log.message.timestamp.type", "delete.topic.enable", "transaction.max.timeout.ms");

    static Object brokerAndGroupConfigs(Env env) throws Exception {
        Admin admin = env.admin();
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("broker", describe(admin, broker, BROKER_KEYS));
        // validateOnly: the shared Kafka is never reconfigured broker-wide
        out.put("validate_dynamic", alter(admin, broker, true, op("log.cleaner.threads", "2",
            AlterConfigOp.OpType.SET)));
        out.put("validate_read_only", alter(admin, broker, true, op("log.dirs", "/tmp/x", AlterConfigOp.OpType.SET)));
        out.put("validate_unknown", alter(admin, broker, true, op("no.such.config", "1", AlterConfigOp.OpType.SET)));
        out.put("validate_bad_value", alter(admin, broker, true, op("log.cleaner.threads", "many",
            AlterConfigOp.OpType.SET)));
        String group = env.name("admin-group-configs");
        ConfigResource groupResource = new ConfigResource(ConfigResource.Type.GROUP, group);
        out.put("group_set", alter(admin, groupResource, false,
            op("consumer.session.timeout.ms", "50000", AlterConfigOp.OpType.SET),
            op("share.record.lock.duration.ms", "20000", AlterConfigOp.OpType.SET)));
        out.put("group_describe", describe(admin, groupResource, null));
        out.put("group_bad_value", alter(admin, groupResource, false,
            op("share.record.lock.duration.ms", "10", AlterConfigOp.OpType.SET)));
        out.put("group_unknown_config", alter(admin, groupResource, false,
            op("no.such.config", "1", AlterConfigOp.OpType.SET)));
        out.put("group_delete", alter(admin, groupResource, false,
            op("consumer.session.timeout.ms", null, AlterConfigOp.OpType.DELETE)));
        out.put("group_after_delete", nonDefault(admin, groupResource));
        return out;
    }

    // -- consumer groups ------------------------------------------------------------------------------------------

    static Object consumerGroups(Env env) throws Exception {
        Admin admin = env.admin();
        String topic = env.name("admin-groups");
        String classic = env.name("admin-classic");
        String modern = env.name("admin-consumer");
        String unknown = env.name("admin-unknown-group");
        env.createTopic(topic, 2);
        env.produceBatch(topic, 0, 0, 2);
        env.produceBatch(topic, 1, 0, 2);
        env.groupConfig(modern, Map.of("consumer.heartbeat.interval.ms", "500"));
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        KafkaConsumer<String, String> c = env.consumer("group.id", classic, "group.protocol", "classic",
            "client.id", "classic-member", "auto.offset.reset", "earliest", "enable.auto.commit", "false",
            "heartbeat.interval.ms", "500", "group.instance.id", "static-1");
        KafkaConsumer<String, String> m = env.consumer("group.id", modern, "group.protocol", "consumer",
            "client.id", "consumer-member", "auto.offset.reset", "earliest", "enable.auto.commit", "false");
        c.subscribe(List.of(topic));
        m.subscribe(List.of(topic));
        ClientScenarios.pollUntil(c, 4);
        ClientScenarios.pollUntil(m, 4);
        c.commitSync(Map.of(p0, new OffsetAndMetadata(2, "classic-meta"), p1, new OffsetAndMetadata(1)));
        m.commitSync();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("describe_active", Json.of(admin.describeConsumerGroups(List.of(classic, modern, unknown),
            new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).describedGroups()));
        out.put("describe_classic", Json.of(admin.describeClassicGroups(List.of(classic, modern, unknown))
            .describedGroups()));
        Map<String, ListConsumerGroupOffsetsSpec> specs = new HashMap<>();
        specs.put(classic, new ListConsumerGroupOffsetsSpec());
        specs.put(modern, new ListConsumerGroupOffsetsSpec().topicPartitions(List.of(p0, p1,
            new TopicPartition(topic, 5))));
        specs.put(unknown, new ListConsumerGroupOffsetsSpec());
        out.put("offsets", Json.of(admin.listConsumerGroupOffsets(specs).all()));
        out.put("alter_offsets_active", outcome(admin.alterConsumerGroupOffsets(modern,
            Map.of(p0, new OffsetAndMetadata(0))).all()));
        out.put("alter_offsets_active_classic", outcome(admin.alterConsumerGroupOffsets(classic,
            Map.of(p0, new OffsetAndMetadata(0))).all()));
        out.put("delete_offsets_subscribed", outcome(admin.deleteConsumerGroupOffsets(classic, Set.of(p0)).all()));
        out.put("delete_group_active", Json.of(admin.deleteConsumerGroups(List.of(classic, modern)).deletedGroups()));
        out.put("remove_unknown_static_member", outcome(admin.removeMembersFromConsumerGroup(classic,
            new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove("no-such-instance")))).all()));
        out.put("remove_static_member", outcome(admin.removeMembersFromConsumerGroup(classic,
            new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove("static-1")))).all()));
        out.put("remove_all_members_consumer", outcome(admin.removeMembersFromConsumerGroup(modern,
            new RemoveMembersFromConsumerGroupOptions()).all()));
        out.put("describe_after_remove", Json.of(admin.describeConsumerGroups(List.of(classic)).describedGroups()));
        c.close();
        m.close();
        Env.await("the groups to be empty", Env.DEADLINE, () -> {
            try {
                var groups = get(admin.describeConsumerGroups(List.of(classic, modern)).all());
                return groups.values().stream().allMatch(g -> g.members().isEmpty());
            } catch (Exception e) {
                return false;
            }
        });
        // the consumer group's epochs depend on how often its member, removed above, rejoined before it closed
        out.put("describe_empty", without(Json.of(admin.describeConsumerGroups(List.of(classic, modern))
            .describedGroups()), "group_epoch", "target_assignment_epoch"));
        out.put("alter_offsets", outcome(admin.alterConsumerGroupOffsets(modern,
            Map.of(p0, new OffsetAndMetadata(1, "altered"), p1, new OffsetAndMetadata(0))).all()));
        out.put("alter_offsets_unknown_partition", outcome(admin.alterConsumerGroupOffsets(modern,
            Map.of(new TopicPartition(topic, 7), new OffsetAndMetadata(0))).all()));
        out.put("alter_offsets_new_group", outcome(admin.alterConsumerGroupOffsets(unknown,
            Map.of(p0, new OffsetAndMetadata(1))).all()));
        out.put("delete_offsets", outcome(admin.deleteConsumerGroupOffsets(modern, Set.of(p1)).all()));
        out.put("delete_offsets_unknown_group", outcome(admin.deleteConsumerGroupOffsets(
            env.name("admin-never-group"), Set.of(p1)).all()));
        out.put("offsets_after", Json.of(admin.listConsumerGroupOffsets(Map.of(modern,
            new ListConsumerGroupOffsetsSpec(), unknown, new ListConsumerGroupOffsetsSpec())).all()));
        out.put("delete_groups", Json.of(admin.deleteConsumerGroups(List.of(classic, modern,
            env.name("admin-never-group"))).deletedGroups()));
        out.put("describe_deleted", Json.of(admin.describeConsumerGroups(List.of(classic, modern)).describedGroups()));
        return out;
    }

    /** `value` (JSON data) without the fields named `keys`, at any depth. */
    @SuppressWarnings("unchecked")
    static Object without(Object value, String... keys) {
        if (value instanceof Map<?, ?> map) {
            Map<String, Object> out = new TreeMap<>();
            ((Map<String, Object>) map).forEach((k, v) -> {
                if (!List.of(keys).contains(k)) {
                    out.put(k, without(v, keys));
                }
            });
            return out;
        }
        if (value instanceof List<?> list) {
            List<Object> out = new ArrayList<>();
            list.forEach(v -> out.add(without(v, keys)));
            return out;
        }
        return value;
    }

    static Object listGroups(Env env) throws Exception {
        Admin admin = env.admin();
        String topic = env.name("admin-list-groups");
        String classic = env.name("list-classic");
        String simple = env.name("list-simple");
        String modern = env.name("list-consumer");
        String share = env.name("list-share");
        env.createTopic(topic, 1);
        env.produceBatch(topic, 0, 0, 1);
        env.groupConfig(modern, Map.of("consumer.heartbeat.interval.ms", "500"));
        env.groupConfig(share, Map.of("share.heartbeat.interval.ms", "500", "share.auto.offset.reset", "earliest"));
        TopicPartition p0 = new TopicPartition(topic, 0);
        // an empty classic group (its member left), a simple one (offsets committed without joining), an active
        // consumer group and an active share group
        try (KafkaConsumer<String, String> c = env.consumer("group.id", classic, "group.protocol", "classic",
                "auto.offset.reset", "earliest", "enable.auto.commit", "false")) {
            c.subscribe(List.of(topic));
            ClientScenarios.pollUntil(c, 1);
            c.commitSync();
        }
        try (KafkaConsumer<String, String> s = env.consumer("group.id", simple, "enable.auto.commit", "false")) {
            s.assign(List.of(p0));
            s.commitSync(Map.of(p0, new OffsetAndMetadata(1)));
        }
        KafkaConsumer<String, String> m = env.consumer("group.id", modern, "group.protocol", "consumer",
            "auto.offset.reset", "earliest", "enable.auto.commit", "false");
        m.subscribe(List.of(topic));
        ClientScenarios.pollUntil(m, 1);
        KafkaShareConsumer<String, String> sc = ShareScenarios.subscribed(env, share, topic);
        ShareScenarios.poll(sc, 1, null);
        Env.await("the consumer group to be stable", Env.DEADLINE, () -> {
            m.poll(Duration.ofMillis(20));
            try {
                return get(admin.describeConsumerGroups(List.of(modern)).all()).get(modern).groupState()
                    == GroupState.STABLE;
            } catch (Exception e) {
                return false;
            }
        });
        String[] mine = {classic, simple, modern, share};
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("all", ShareScenarios.listGroups(admin, new ListGroupsOptions(), mine));
        out.put("classic", ShareScenarios.listGroups(admin, new ListGroupsOptions().withTypes(Set.of(GroupType.CLASSIC)),
            mine));
        out.put("consumer_type", ShareScenarios.listGroups(admin,
            new ListGroupsOptions().withTypes(Set.of(GroupType.CONSUMER)), mine));
        out.put("share_type", ShareScenarios.listGroups(admin,
            new ListGroupsOptions().withTypes(Set.of(GroupType.SHARE)), mine));
        out.put("for_consumer_groups", ShareScenarios.listGroups(admin, ListGroupsOptions.forConsumerGroups(), mine));
        out.put("for_share_groups", ShareScenarios.listGroups(admin, ListGroupsOptions.forShareGroups(), mine));
        out.put("stable", ShareScenarios.listGroups(admin,
            new ListGroupsOptions().inGroupStates(Set.of(GroupState.STABLE)), mine));
        out.put("empty", ShareScenarios.listGroups(admin,
            new ListGroupsOptions().inGroupStates(Set.of(GroupState.EMPTY)), mine));
        out.put("protocol_consumer", ShareScenarios.listGroups(admin,
            new ListGroupsOptions().withProtocolTypes(Set.of("consumer")), mine));
        out.put("protocol_none", ShareScenarios.listGroups(admin,
            new ListGroupsOptions().withProtocolTypes(Set.of("")), mine));
        out.put("list_consumer_groups", listConsumerGroups(admin, mine));
        ShareScenarios.close(env, sc);
        return out;
    }

    @SuppressWarnings({"removal", "deprecation"})
    static Object listConsumerGroups(Admin admin, String... groups) throws Exception {
        List<Object> out = new ArrayList<>();
        for (var listing : get(admin.listConsumerGroups().all())) {
            if (List.of(groups).contains(listing.groupId())) {
                out.add(Json.of(listing));
            }
        }
        out.sort(Json.ORDER);
        return out;
    }

    // -- features, quotas, client metrics ---------------------------------------------------------------------------

    static Object features(Env env) throws Exception {
        Admin admin = env.admin();
        Map<String, Object> out = new LinkedHashMap<>();
        var metadata = get(admin.describeFeatures().featureMetadata());
        out.put("supported", Json.of(metadata.supportedFeatures()));
        out.put("finalized", Json.of(metadata.finalizedFeatures()));
        out.put("finalized_epoch_present", metadata.finalizedFeaturesEpoch().isPresent());
        short groupVersion = metadata.finalizedFeatures().get("group.version").maxVersionLevel();
        short metadataVersion = metadata.finalizedFeatures().get("metadata.version").maxVersionLevel();
        UpdateFeaturesOptions validate = new UpdateFeaturesOptions().validateOnly(true);
        Map<String, Object> updates = new TreeMap<>();
        updates.put("same_level", Json.of(admin.updateFeatures(Map.of("group.version",
            new FeatureUpdate(groupVersion, FeatureUpdate.UpgradeType.UPGRADE)), validate).values()));
        updates.put("unknown_feature", Json.of(admin.updateFeatures(Map.of("no.such.feature",
            new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)), validate).values()));
        updates.put("beyond_supported", Json.of(admin.updateFeatures(Map.of("group.version",
            new FeatureUpdate((short) 99, FeatureUpdate.UpgradeType.UPGRADE)), validate).values()));
        updates.put("metadata_version_safe_downgrade", Json.of(admin.updateFeatures(Map.of("metadata.version",
            new FeatureUpdate((short) (metadataVersion - 1), FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)), validate)
            .values()));
        updates.put("group_version_safe_downgrade", Json.of(admin.updateFeatures(Map.of("group.version",
            new FeatureUpdate((short) 0, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)), validate).values()));
        out.put("validate_only_updates", updates);
        return out;
    }

    static Object clientQuotas(Env env) throws Exception {
        Admin admin = env.admin();
        String user = env.name("quota-user");
        String client = env.name("quota-client");
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user,
            ClientQuotaEntity.CLIENT_ID, client));
        ClientQuotaEntity userOnly = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user));
        ClientQuotaEntity ip = new ClientQuotaEntity(Map.of(ClientQuotaEntity.IP, "127.0.0.99"));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("alter", Json.of(admin.alterClientQuotas(List.of(
            new ClientQuotaAlteration(entity, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0),
                new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0),
                new ClientQuotaAlteration.Op("request_percentage", 50.0))),
            new ClientQuotaAlteration(userOnly, List.of(new ClientQuotaAlteration.Op("producer_byte_rate",
                4096.0))),
            new ClientQuotaAlteration(ip, List.of(new ClientQuotaAlteration.Op("connection_creation_rate",
                10.0))))).values()));
        ClientQuotaFilter ofUser = ClientQuotaFilter.contains(List.of(
            ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
        // Kafka's brokers learn quotas from the metadata log, a moment after the controller answered
        awaitQuotas(admin, ofUser, 2);
        out.put("describe_user", quotas(admin, ofUser));
        out.put("describe_user_only", quotas(admin, ClientQuotaFilter.containsOnly(List.of(
            ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)))));
        out.put("describe_ip", quotas(admin, ClientQuotaFilter.containsOnly(List.of(
            ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.IP, "127.0.0.99")))));
        Map<String, Object> bad = new TreeMap<>();
        bad.put("unknown_key", Json.of(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
            List.of(new ClientQuotaAlteration.Op("no_such_quota", 1.0))))).values()));
        bad.put("negative", Json.of(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
            List.of(new ClientQuotaAlteration.Op("producer_byte_rate", -5.0))))).values()));
        bad.put("byte_rate_on_ip", Json.of(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(ip,
            List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 5.0))))).values()));
        bad.put("connection_rate_on_user", Json.of(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(
            userOnly, List.of(new ClientQuotaAlteration.Op("connection_creation_rate", 5.0))))).values()));
        bad.put("bad_ip", Json.of(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(
            new ClientQuotaEntity(Map.of(ClientQuotaEntity.IP, "not-an-ip")),
            List.of(new ClientQuotaAlteration.Op("connection_creation_rate", 5.0))))).values()));
        bad.put("percentage_not_whole", Json.of(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
            List.of(new ClientQuotaAlteration.Op("controller_mutation_rate", 0.5))))).values()));
        out.put("invalid", bad);
        out.put("remove", Json.of(admin.alterClientQuotas(List.of(
            new ClientQuotaAlteration(entity, List.of(new ClientQuotaAlteration.Op("consumer_byte_rate", null))),
            new ClientQuotaAlteration(userOnly, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", null))),
            new ClientQuotaAlteration(ip, List.of(new ClientQuotaAlteration.Op("connection_creation_rate",
                null))))).values()));
        awaitQuotas(admin, ofUser, 1);
        out.put("describe_after_remove", quotas(admin, ofUser));
        out.put("describe_ip_after_remove", quotas(admin, ClientQuotaFilter.containsOnly(List.of(
            ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.IP, "127.0.0.99")))));
        out.put("remove_rest", Json.of(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
            new ClientQuotaAlteration.Op("producer_byte_rate", null),
            new ClientQuotaAlteration.Op("request_percentage", null))))).values()));
        return out;
    }

    /** Waits until `filter` matches `entities` entities with quotas (Kafka's describe follows its metadata log). */
    static void awaitQuotas(Admin admin, ClientQuotaFilter filter, int entities) throws InterruptedException {
        Env.await(entities + " quota entities", Env.DEADLINE, () -> {
            try {
                return get(admin.describeClientQuotas(filter).entities()).size() == entities;
            } catch (Exception e) {
                return false;
            }
        });
    }

    static Object quotas(Admin admin, ClientQuotaFilter filter) {
        try {
            Map<String, Object> out = new TreeMap<>();
            get(admin.describeClientQuotas(filter).entities()).forEach((entity, values) ->
                out.put(new TreeMap<>(entity.entries()).toString(), Json.of(values)));
            return out;
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    @SuppressWarnings({"removal", "deprecation"})
    static Object clientMetrics(Env env) throws Exception {
        Admin admin = env.admin();
        String name = env.name("admin-metrics");
        ConfigResource resource = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, name);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("describe_never_created", describe(admin, resource, null));
        out.put("create_metrics_only", alter(admin, resource, false,
            op("metrics", "org.apache.kafka.producer.", AlterConfigOp.OpType.SET)));
        out.put("describe_metrics_only", describe(admin, resource, null));
        out.put("set_interval_and_match", alter(admin, resource, false,
            op("interval.ms", "5000", AlterConfigOp.OpType.SET),
            op("match", "client_id=admin-.*", AlterConfigOp.OpType.SET)));
        out.put("describe", describe(admin, resource, null));
        awaitListed(admin, name, true);
        out.put("listed", configResources(admin, Set.of(ConfigResource.Type.CLIENT_METRICS), name));
        List<String> legacy = new ArrayList<>();
        for (var listing : get(admin.listClientMetricsResources().all())) {
            if (listing.name().equals(name)) {
                legacy.add(listing.name());
            }
        }
        out.put("listed_legacy", legacy);
        Map<String, Object> bad = new TreeMap<>();
        bad.put("interval_too_small", alter(admin, resource, false, op("interval.ms", "10",
            AlterConfigOp.OpType.SET)));
        bad.put("bad_match", alter(admin, resource, false, op("match", "nonsense", AlterConfigOp.OpType.SET)));
        bad.put("unknown_match_key", alter(admin, resource, false, op("match", "colour=red",
            AlterConfigOp.OpType.SET)));
        bad.put("unknown_config", alter(admin, resource, false, op("no.such.config", "1", AlterConfigOp.OpType.SET)));
        out.put("invalid", bad);
        out.put("append_metric", alter(admin, resource, false, op("metrics", "org.apache.kafka.consumer.",
            AlterConfigOp.OpType.APPEND)));
        out.put("subtract_metric", alter(admin, resource, false, op("metrics", "org.apache.kafka.producer.",
            AlterConfigOp.OpType.SUBTRACT)));
        out.put("describe_after_append", describe(admin, resource, null));
        out.put("delete", alter(admin, resource, false, op("metrics", null, AlterConfigOp.OpType.DELETE),
            op("interval.ms", null, AlterConfigOp.OpType.DELETE), op("match", null, AlterConfigOp.OpType.DELETE)));
        awaitListed(admin, name, false);
        out.put("listed_after_delete", configResources(admin, Set.of(ConfigResource.Type.CLIENT_METRICS), name));
        out.put("describe_after_delete", describe(admin, resource, null));
        // GetTelemetrySubscriptions: the client instance id a client gets from the broker
        Admin pushing = env.admin(env.props("enable.metrics.push", "true", "default.api.timeout.ms", "15000",
            "request.timeout.ms", "10000"));
        try {
            out.put("client_instance_id", Json.of(pushing.clientInstanceId(Duration.ofSeconds(3)) != null));
        } catch (Exception e) {
            out.put("client_instance_id", Json.error(e));
        }
        return out;
    }

    /** Waits (up to 15 s, then goes on) until the client-metrics resource `name` is listed, or is no longer. */
    static void awaitListed(Admin admin, String name, boolean listed) {
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (System.nanoTime() < deadline) {
            Object found = configResources(admin, Set.of(ConfigResource.Type.CLIENT_METRICS), name);
            if (found instanceof List<?> l && l.isEmpty() != listed) {
                return;
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    static Object configResources(Admin admin, Set<ConfigResource.Type> types, String... names) {
        try {
            List<String> out = new ArrayList<>();
            for (ConfigResource r : get(admin.listConfigResources(types,
                    new org.apache.kafka.clients.admin.ListConfigResourcesOptions()).all())) {
                if (List.of(names).contains(r.name())) {
                    out.add(r.type() + ":" + r.name());
                }
            }
            out.sort(Json.ORDER);
            return out;
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    // -- log dirs, elections, reassignments ---------------------------------------------------------------------------

    static Object logDirs(Env env) throws Exception {
        Admin admin = env.admin();
        String topic = env.name("admin-log-dirs");
        env.createTopic(topic, 2);
        env.produceBatch(topic, 0, 0, 3);
        Map<String, Object> out = new LinkedHashMap<>();
        // Kafka's broker makes a new partition's log as it applies the metadata, a moment after describing it
        Env.await("the topic's logs", Env.DEADLINE, () -> {
            try {
                return get(admin.describeLogDirs(List.of(1)).allDescriptions()).get(1).values().stream()
                    .flatMap(d -> d.replicaInfos().keySet().stream()).filter(tp -> tp.topic().equals(topic))
                    .count() == 2;
            } catch (Exception e) {
                return false;
            }
        });
        Map<String, LogDirDescription> dirs = get(admin.describeLogDirs(List.of(1)).allDescriptions()).get(1);
        List<Object> described = new ArrayList<>();
        String dir = null;
        for (var e : dirs.entrySet()) {
            Map<String, Object> replicas = new TreeMap<>();
            e.getValue().replicaInfos().forEach((tp, info) -> {
                if (tp.topic().equals(topic)) {
                    replicas.put(Json.key(tp), Json.of(info));
                }
            });
            if (!replicas.isEmpty()) {
                dir = e.getKey();
            }
            described.add(Json.obj("error", e.getValue().error(), "replicas", replicas,
                "total_bytes_known", e.getValue().totalBytes().isPresent(),
                "usable_bytes_known", e.getValue().usableBytes().isPresent(), "cordoned", e.getValue().isCordoned()));
        }
        out.put("describe", described);
        TopicPartitionReplica replica = new TopicPartitionReplica(topic, 0, 1);
        TopicPartitionReplica missing = new TopicPartitionReplica(topic, 9, 1);
        Map<String, Object> replicaDirs = new TreeMap<>();
        String theDir = dir;
        admin.describeReplicaLogDirs(List.of(replica, missing)).values().forEach((r, f) -> {
            try {
                var info = get(f);
                replicaDirs.put(Json.key(r), Json.obj(
                    "current_dir", info.getCurrentReplicaLogDir() == null ? null
                        : info.getCurrentReplicaLogDir().equals(theDir) ? "<the dir>" : "<another dir>",
                    "current_lag", info.getCurrentReplicaOffsetLag(),
                    "future_dir", info.getFutureReplicaLogDir(), "future_lag", info.getFutureReplicaOffsetLag()));
            } catch (Exception e) {
                replicaDirs.put(Json.key(r), Json.error(e));
            }
        });
        out.put("describe_replica_dirs", replicaDirs);
        out.put("alter_to_missing_dir", Json.of(admin.alterReplicaLogDirs(Map.of(replica, "/no/such/dir")).values()));
        out.put("alter_to_same_dir", Json.of(admin.alterReplicaLogDirs(Map.of(replica, dir)).values()));
        out.put("alter_missing_partition", Json.of(admin.alterReplicaLogDirs(Map.of(missing, dir)).values()));
        return out;
    }

    static Object electionsAndReassignments(Env env) throws Exception {
        Admin admin = env.admin();
        String topic = env.name("admin-elections");
        env.createTopic(topic, 2);
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition missing = new TopicPartition(topic, 9);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("preferred", outcome(admin.electLeaders(ElectionType.PREFERRED, Set.of(p0)).partitions()));
        out.put("unclean", outcome(admin.electLeaders(ElectionType.UNCLEAN, Set.of(p0)).partitions()));
        out.put("unknown_partition", outcome(admin.electLeaders(ElectionType.PREFERRED, Set.of(missing))
            .partitions()));
        try {
            Map<TopicPartition, java.util.Optional<Throwable>> all =
                get(admin.electLeaders(ElectionType.PREFERRED, null).partitions());
            Map<String, Object> ours = new TreeMap<>();
            all.forEach((tp, error) -> {
                if (tp.topic().equals(topic)) {
                    ours.put(Json.key(tp), Json.of(error));
                }
            });
            out.put("all_partitions_ours", ours);
        } catch (Exception e) {
            out.put("all_partitions_ours", Json.error(e));
        }
        out.put("reassignments_listed", outcome(admin.listPartitionReassignments(Set.of(p0)).reassignments()));
        out.put("reassign_to_same", Json.of(admin.alterPartitionReassignments(Map.of(p0,
            java.util.Optional.of(new NewPartitionReassignment(List.of(1))))).values()));
        out.put("reassign_to_missing_broker", Json.of(admin.alterPartitionReassignments(Map.of(p0,
            java.util.Optional.of(new NewPartitionReassignment(List.of(7))))).values()));
        out.put("cancel_none_in_progress", Json.of(admin.alterPartitionReassignments(Map.of(p0,
            java.util.Optional.empty())).values()));
        out.put("reassign_unknown_partition", Json.of(admin.alterPartitionReassignments(Map.of(missing,
            java.util.Optional.of(new NewPartitionReassignment(List.of(1))))).values()));
        out.put("reassignments_after", outcome(admin.listPartitionReassignments(Set.of(p0)).reassignments()));
        return out;
    }

    // -- records and offsets ------------------------------------------------------------------------------------------

    static Object recordsAndOffsets(Env env) throws Exception {
        Admin admin = env.admin();
        String topic = env.name("admin-records");
        env.createTopic(topic, 2);
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        long base = (System.currentTimeMillis() / 1000) * 1000 - 60_000;
        try (KafkaProducer<String, String> producer = env.producer("linger.ms", "5000")) {
            long[] at = {0, 1000, 4000, 2000, 3000};  // the greatest timestamp is not the last record's
            for (int i = 0; i < at.length; i++) {
                producer.send(new ProducerRecord<>(topic, 0, base + at[i], "k" + i, "v" + i));
            }
            producer.flush();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("max_timestamp", OffsetSpec.maxTimestamp());
        specs.put("for_timestamp", OffsetSpec.forTimestamp(base + 1500));
        specs.put("for_timestamp_after_all", OffsetSpec.forTimestamp(base + 99_000));
        specs.put("earliest_local", OffsetSpec.earliestLocal());
        specs.put("latest_tiered", OffsetSpec.latestTiered());
        specs.put("earliest_pending_upload", OffsetSpec.earliestPendingUpload());
        out.put("list_offsets", listOffsets(admin, specs, base, p0, p1));
        out.put("list_offsets_read_committed", outcome(admin.listOffsets(Map.of(p0, OffsetSpec.latest()),
            new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(p0).thenApply(i -> i.offset())));
        out.put("delete_records", Json.of(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(2),
            p1, RecordsToDelete.beforeOffset(0))).lowWatermarks()));
        out.put("delete_records_past_end", Json.of(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(10)))
            .lowWatermarks()));
        out.put("delete_records_behind_low_watermark", Json.of(admin.deleteRecords(Map.of(p0,
            RecordsToDelete.beforeOffset(1))).lowWatermarks()));
        out.put("list_offsets_after_delete", listOffsets(admin, specs, base, p0));
        out.put("delete_records_to_high_watermark", Json.of(admin.deleteRecords(Map.of(p0,
            RecordsToDelete.beforeOffset(-1))).lowWatermarks()));
        Map<String, OffsetSpec> ends = new LinkedHashMap<>();
        ends.put("earliest", OffsetSpec.earliest());
        ends.put("latest", OffsetSpec.latest());
        ends.put("max_timestamp", OffsetSpec.maxTimestamp());
        out.put("list_offsets_emptied", listOffsets(admin, ends, base, p0));
        return out;
    }

    /** listOffsets per spec and partition: offset, timestamp (relative to `base` when it is a record's), epoch. */
    static Object listOffsets(Admin admin, Map<String, OffsetSpec> specs, long base, TopicPartition... partitions) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (var spec : specs.entrySet()) {
            Map<String, Object> per = new TreeMap<>();
            for (TopicPartition tp : partitions) {
                try {
                    var info = get(admin.listOffsets(Map.of(tp, spec.getValue())).partitionResult(tp));
                    per.put(Json.key(tp), Json.obj("offset", info.offset(),
                        "ts", info.timestamp() >= base ? "base+" + (info.timestamp() - base) : info.timestamp(),
                        "leader_epoch", info.leaderEpoch()));
                } catch (Exception e) {
                    per.put(Json.key(tp), Json.error(e));
                }
            }
            out.put(spec.getKey(), per);
        }
        return out;
    }

    // -- cluster --------------------------------------------------------------------------------------------------

    static Object cluster(Env env) throws Exception {
        Admin admin = env.admin();
        Map<String, Object> out = new LinkedHashMap<>();
        var cluster = admin.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true));
        out.put("nodes", outcome(cluster.nodes()));
        out.put("controller", outcome(cluster.controller()));
        out.put("cluster_id", outcome(cluster.clusterId()));
        out.put("authorized_operations", outcome(cluster.authorizedOperations()));
        out.put("without_operations", outcome(admin.describeCluster().authorizedOperations()));
        QuorumInfo quorum = get(admin.describeMetadataQuorum().quorumInfo());
        // the quorum's offsets, epochs and timestamps are the metadata log's, which Shoal's journal is not
        List<Object> voters = new ArrayList<>();
        for (QuorumInfo.ReplicaState voter : quorum.voters()) {
            voters.add(Json.obj("replica_id", voter.replicaId(), "directory_id_set",
                !voter.replicaDirectoryId().equals(Uuid.ZERO_UUID), "log_end_offset_known", voter.logEndOffset() >= 0,
                "caught_up", voter.lastCaughtUpTimestamp().isPresent()));
        }
        Map<String, Object> nodes = new TreeMap<>();
        quorum.nodes().forEach((id, node) -> {
            List<String> listeners = new ArrayList<>();
            node.endpoints().forEach(endpoint -> listeners.add(endpoint.listener()));
            nodes.put(String.valueOf(id), listeners);
        });
        out.put("quorum", Json.obj("leader_id", quorum.leaderId(), "leader_epoch_positive", quorum.leaderEpoch() > 0,
            "high_watermark_positive", quorum.highWatermark() > 0, "voters", voters,
            "observers", quorum.observers().size(), "nodes", nodes));
        return out;
    }

    // -- transactions ---------------------------------------------------------------------------------------------

    static Object transactions(Env env) throws Exception {
        Admin admin = env.admin();
        String topic = env.name("admin-txn");
        String fenced = env.name("admin-txn-fenced");
        String hanging = env.name("admin-txn-hanging");
        String terminated = env.name("admin-txn-terminated");
        String unknown = env.name("admin-txn-unknown");
        env.createTopic(topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> out = new LinkedHashMap<>();

        // an ongoing transaction: listed, described, its producer's state; then fenced by the admin
        KafkaProducer<String, String> first = openTransaction(env, fenced, topic, "k0");
        out.put("listed", transactionsListed(admin, new ListTransactionsOptions(), fenced));
        out.put("listed_ongoing", transactionsListed(admin,
            new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING)), fenced));
        out.put("listed_complete_commit", transactionsListed(admin,
            new ListTransactionsOptions().filterStates(List.of(TransactionState.COMPLETE_COMMIT)), fenced));
        out.put("listed_by_pattern", transactionsListed(admin,
            new ListTransactionsOptions().filterOnTransactionalIdPattern("admin-txn-fenced-.*"), fenced));
        out.put("listed_bad_pattern", transactionsListed(admin,
            new ListTransactionsOptions().filterOnTransactionalIdPattern("(unclosed"), fenced));
        out.put("listed_running_an_hour", transactionsListed(admin,
            new ListTransactionsOptions().filterOnDuration(3_600_000), fenced));
        out.put("describe", transactionsDescribed(admin, fenced, unknown));
        out.put("producers", outcome(admin.describeProducers(List.of(tp)).partitionResult(tp)));
        long firstId = get(admin.describeTransactions(List.of(fenced)).description(fenced)).producerId();
        out.put("fence", outcome(admin.fenceProducers(List.of(fenced)).all()));
        out.put("fence_unknown", outcome(admin.fenceProducers(List.of(unknown)).all()));
        out.put("send_after_fence", attempt(() ->
            first.send(new ProducerRecord<>(topic, 0, "k1", "fenced")).get(60, TimeUnit.SECONDS)));
        out.put("commit_after_fence", attempt(first::commitTransaction));
        awaitSettled(admin, fenced);
        out.put("describe_fenced", transactionsDescribed(admin, fenced));

        // a hanging transaction aborted by the admin at the partition (its coordinator is not told)
        KafkaProducer<String, String> second = openTransaction(env, hanging, topic, "k2");
        ProducerState state = get(admin.describeProducers(List.of(tp)).partitionResult(tp)).activeProducers()
            .stream().filter(p -> p.currentTransactionStartOffset().isPresent()).findFirst().orElseThrow();
        out.put("hanging_producer", Json.of(state));
        out.put("last_stable_offset_while_hanging", lastStableOffset(admin, tp));
        out.put("abort_hanging", outcome(admin.abortTransaction(new AbortTransactionSpec(tp, state.producerId(),
            (short) state.producerEpoch(), state.coordinatorEpoch().orElse(-1))).all()));
        out.put("last_stable_offset_after_abort", lastStableOffset(admin, tp));
        out.put("abort_again", outcome(admin.abortTransaction(new AbortTransactionSpec(tp, state.producerId(),
            (short) state.producerEpoch(), state.coordinatorEpoch().orElse(-1))).all()));
        Map<String, Object> producers = new TreeMap<>();
        for (ProducerState p : get(admin.describeProducers(List.of(tp)).partitionResult(tp)).activeProducers()) {
            producers.put(p.producerId() == state.producerId() ? "hanging" : p.producerId() == firstId ? "fenced"
                : "other", Json.of(p));
        }
        out.put("producers_after_abort", producers);
        out.put("producer_abort_after_admin_abort", attempt(second::abortTransaction));
        awaitSettled(admin, hanging);
        out.put("describe_hanging_after", transactionsDescribed(admin, hanging));

        // forceTerminateTransaction (KIP-939) of an ongoing transaction
        KafkaProducer<String, String> third = openTransaction(env, terminated, topic, "k3");
        out.put("force_terminate", outcome(admin.forceTerminateTransaction(terminated).result()));
        out.put("commit_after_terminate", attempt(third::commitTransaction));
        awaitSettled(admin, terminated);
        out.put("describe_terminated", transactionsDescribed(admin, terminated));
        out.put("force_terminate_unknown", outcome(admin.forceTerminateTransaction(unknown).result()));
        out.put("last_stable_offset_at_end", lastStableOffset(admin, tp));
        out.put("high_watermark_at_end", outcome(admin.listOffsets(Map.of(tp, OffsetSpec.latest()))
            .partitionResult(tp).thenApply(i -> i.offset())));
        return out;
    }

    static KafkaProducer<String, String> openTransaction(Env env, String tid, String topic, String key)
            throws Exception {
        KafkaProducer<String, String> producer = env.producer("transactional.id", tid, "client.id", tid,
            "transaction.timeout.ms", "60000");
        producer.initTransactions();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, 0, key, "open-" + key)).get(60, TimeUnit.SECONDS);
        return producer;
    }

    static Object lastStableOffset(Admin admin, TopicPartition tp) {
        return outcome(admin.listOffsets(Map.of(tp, OffsetSpec.latest()),
            new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(tp).thenApply(i -> i.offset()));
    }

    /** Waits (up to 15 s, then goes on) until transaction `tid` is in no transient state (PREPARE_*, ONGOING). */
    static void awaitSettled(Admin admin, String tid) {
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (System.nanoTime() < deadline) {
            try {
                TransactionState state = get(admin.describeTransactions(List.of(tid)).description(tid)).state();
                if (state != TransactionState.PREPARE_ABORT && state != TransactionState.PREPARE_COMMIT
                        && state != TransactionState.ONGOING) {
                    return;
                }
                Thread.sleep(20);
            } catch (Exception e) {
                return;
            }
        }
    }

    static Object transactionsDescribed(Admin admin, String... ids) {
        var described = admin.describeTransactions(List.of(ids));
        Map<String, Object> out = new TreeMap<>();
        for (String id : ids) {
            out.put(id, Json.outcome(described.description(id)));
        }
        return out;
    }

    static Object transactionsListed(Admin admin, ListTransactionsOptions options, String... ids) {
        try {
            List<Object> out = new ArrayList<>();
            for (TransactionListing listing : get(admin.listTransactions(options).all())) {
                if (List.of(ids).contains(listing.transactionalId())) {
                    out.add(Json.of(listing));
                }
            }
            return out;
        } catch (Exception e) {
            return Json.error(e);
        }
    }
}
