package shoal.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;

/**
 * KafkaShareConsumer (KIP-932, KIP-1222 RENEW, record_limit acquisition) and the share-group admin calls. Each
 * scenario produces its records in one batch, polls with deadlines until the records it expects arrived,
 * acknowledges deterministically, and observes delivery counts, commit results and the group's start offsets.
 * "Nothing more arrives" is observed with a sentinel record produced afterwards: what is polled before it.
 */
final class ShareScenarios {
    private ShareScenarios() {}

    static Map<String, Scenario> all() {
        Map<String, Scenario> all = new LinkedHashMap<>();
        all.put("implicit", ShareScenarios::implicit);
        all.put("explicit", ShareScenarios::explicit);
        all.put("renew", ShareScenarios::renew);
        all.put("lock_expiry_callbacks", ShareScenarios::lockExpiryCallbacks);
        all.put("record_limit", ShareScenarios::recordLimit);
        all.put("delivery_limit", ShareScenarios::deliveryLimit);
        all.put("admin", ShareScenarios::admin);
        return all;
    }

    // -- helpers --------------------------------------------------------------------------------------------------

    /**
     * Polls until `want` records arrived (failing after the deadline); in explicit mode `ack` says how each polled
     * record is acknowledged (before the next poll, as explicit mode requires).
     */
    static List<ConsumerRecord<String, String>> poll(KafkaShareConsumer<String, String> consumer, int want,
                                                     Function<ConsumerRecord<String, String>, AcknowledgeType> ack) {
        Env.log("polling for " + want + " records");
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + Env.DEADLINE.toNanos();
        while (got.size() < want) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out: " + got.size() + " of " + want + " records");
            }
            // A poll that times out while a fetch is in flight leaves the consumer fetching in the background
            // (it would acquire records the scenario means for others, or re-acquire expired ones): polls wait
            // well past the brokers' fetch wait (100 ms, subscribed) and return as soon as records come.
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofSeconds(3))) {
                got.add(r);
                if (ack != null) {
                    consumer.acknowledge(r, ack.apply(r));
                }
            }
        }
        Env.log("polled " + got.size() + " records");
        return got;
    }

    static List<Object> records(List<ConsumerRecord<String, String>> records) {
        List<Object> out = new ArrayList<>();
        records.stream().sorted((a, b) -> a.partition() != b.partition() ? a.partition() - b.partition()
            : Long.compare(a.offset(), b.offset())).forEach(r -> out.add(Env.record(r)));
        return out;
    }

    static Object commitResult(Map<TopicIdPartition, Optional<KafkaException>> result) {
        Map<String, Object> out = new TreeMap<>();
        result.forEach((tip, error) -> out.put(Json.key(tip), error.map(e -> (Object) Json.error(e)).orElse("ok")));
        return out;
    }

    static Object commitSync(KafkaShareConsumer<String, String> consumer) {
        Env.log("commitSync");
        try {
            return commitResult(consumer.commitSync(Duration.ofSeconds(30)));
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    static Object attempt(ThrowingRunnable action) {
        long start = System.nanoTime();
        try {
            action.run();
            return "ok";
        } catch (Exception e) {
            return Json.error(e);
        } finally {
            Env.slow(start);
        }
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    static Object startOffsets(Admin admin, String group) {
        try {
            var info = admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(group).get(60, TimeUnit.SECONDS);
            return Json.of(info);
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    static KafkaShareConsumer<String, String> subscribed(Env env, String group, String topic, Object... extra) {
        Object[] props = new Object[extra.length + 4];
        props[0] = "group.id";
        props[1] = group;
        props[2] = "fetch.max.wait.ms";
        props[3] = "100";
        System.arraycopy(extra, 0, props, 4, extra.length);
        KafkaShareConsumer<String, String> consumer = env.shareConsumer(props);
        consumer.subscribe(List.of(topic));
        return consumer;
    }

    /** A topic of `partitions` and a share group reading it from the earliest offset, with `groupConfigs`. */
    static void setUp(Env env, String topic, int partitions, String group, Map<String, String> groupConfigs)
            throws Exception {
        env.createTopic(topic, partitions);
        Map<String, String> configs = new TreeMap<>(groupConfigs);
        configs.put("share.auto.offset.reset", "earliest");
        configs.put("share.heartbeat.interval.ms", "500");  // a new member gets its assignment sooner
        env.groupConfig(group, configs);
    }

    static void close(Env env, KafkaShareConsumer<String, String> consumer) {
        consumer.close(Duration.ofSeconds(30));
    }

    // -- scenarios ------------------------------------------------------------------------------------------------

    /** Implicit acknowledgement: commitSync accepts what the last poll delivered; nothing is delivered again. */
    static Object implicit(Env env) throws Exception {
        String topic = env.name("share-implicit");
        String group = env.name("share-implicit-group");
        setUp(env, topic, 1, group, Map.of());
        env.produceBatch(topic, 0, 0, 5);
        KafkaShareConsumer<String, String> first = subscribed(env, group, topic, "client.id", "implicit-1");
        var delivered = poll(first, 5, null);
        Object commit = commitSync(first);
        Object offsetsAfterCommit = startOffsets(env.admin(), group);
        Object lockTimeout = first.acquisitionLockTimeoutMs().orElse(null);
        Object acknowledgeInImplicitMode = attempt(() -> first.acknowledge(delivered.get(0), AcknowledgeType.ACCEPT));
        close(env, first);
        Object offsetsAfterClose = startOffsets(env.admin(), group);
        env.produceBatch(topic, 0, 5, 1);
        KafkaShareConsumer<String, String> second = subscribed(env, group, topic, "client.id", "implicit-2");
        var afterSentinel = poll(second, 1, null);
        Object secondCommit = commitSync(second);
        close(env, second);
        return Json.obj("delivered", records(delivered), "commit", commit,
            "start_offsets_after_commit", offsetsAfterCommit, "start_offsets_after_close", offsetsAfterClose,
            "lock_timeout_ms", lockTimeout,
            "acknowledge_in_implicit_mode", acknowledgeInImplicitMode, "then_delivered", records(afterSentinel),
            "then_commit", secondCommit, "start_offsets", startOffsets(env.admin(), group));
    }

    /** Explicit acknowledgement: ACCEPT, RELEASE (redelivered with a higher delivery count), REJECT (archived). */
    static Object explicit(Env env) throws Exception {
        String topic = env.name("share-explicit");
        String group = env.name("share-explicit-group");
        setUp(env, topic, 1, group, Map.of());
        env.produceBatch(topic, 0, 0, 5);
        KafkaShareConsumer<String, String> consumer = subscribed(env, group, topic,
            "client.id", "explicit-1", "share.acknowledgement.mode", "explicit");
        Map<Long, AcknowledgeType> plan = Map.of(0L, AcknowledgeType.ACCEPT, 1L, AcknowledgeType.RELEASE,
            2L, AcknowledgeType.REJECT, 3L, AcknowledgeType.RELEASE, 4L, AcknowledgeType.ACCEPT);
        var round1 = poll(consumer, 5, r -> plan.get(r.offset()));
        Object commit1 = commitSync(consumer);
        Map<Long, AcknowledgeType> plan2 = Map.of(1L, AcknowledgeType.RELEASE, 3L, AcknowledgeType.ACCEPT);
        var round2 = poll(consumer, 2, r -> plan2.getOrDefault(r.offset(), AcknowledgeType.ACCEPT));
        Object commit2 = commitSync(consumer);
        var round3 = poll(consumer, 1, r -> AcknowledgeType.ACCEPT);
        Object commit3 = commitSync(consumer);
        Object offsetsBefore = startOffsets(env.admin(), group);
        env.produceBatch(topic, 0, 5, 1);
        var round4 = poll(consumer, 1, r -> AcknowledgeType.ACCEPT);
        Object commit4 = commitSync(consumer);
        Object emptyCommit = commitSync(consumer);
        close(env, consumer);
        return Json.obj("round1", records(round1), "commit1", commit1, "round2", records(round2),
            "commit2", commit2, "round3", records(round3), "commit3", commit3,
            "start_offsets_before_sentinel", offsetsBefore, "after_sentinel", records(round4), "commit4", commit4,
            "commit_with_nothing_acknowledged", emptyCommit, "start_offsets", startOffsets(env.admin(), group));
    }

    /**
     * RENEW (KIP-1222) extends a record's acquisition lock (6 s). Two groups read the same record: the renewing
     * member renews at 3 s, the next poll hands the record back to it, and its ACCEPT at 7.5 s succeeds; the
     * control member's ACCEPT at 7.5 s fails (its lock expired), and the record is delivered to it again. The
     * margins (1.5 s either side) allow for a loaded machine.
     */
    static Object renew(Env env) throws Exception {
        String topic = env.name("share-renew");
        String renewing = env.name("share-renew-group");
        String control = env.name("share-renew-control");
        env.createTopic(topic, 1);
        for (String group : List.of(renewing, control)) {
            env.groupConfig(group, Map.of("share.auto.offset.reset", "earliest", "share.heartbeat.interval.ms", "500",
                "share.record.lock.duration.ms", "6000"));
        }
        env.produceBatch(topic, 0, 0, 1);
        KafkaShareConsumer<String, String> r = subscribed(env, renewing, topic,
            "client.id", "renewing", "share.acknowledgement.mode", "explicit");
        KafkaShareConsumer<String, String> c = subscribed(env, control, topic,
            "client.id", "control", "share.acknowledgement.mode", "explicit");
        var rGot = poll(r, 1, null);
        var cGot = poll(c, 1, null);
        Object lockTimeout = r.acquisitionLockTimeoutMs().orElse(null);
        Thread.sleep(3000);  // half the lock duration: what the scenario is about, not a synchronisation
        Object renew = attempt(() -> r.acknowledge(rGot.get(0), AcknowledgeType.RENEW));
        Object renewCommit = commitSync(r);
        Object acceptBeforePoll = attempt(() -> r.acknowledge(rGot.get(0), AcknowledgeType.ACCEPT));
        Thread.sleep(4500);  // past the first lock's end, within the renewed one
        var handedBack = poll(r, 1, x -> AcknowledgeType.ACCEPT);
        Object acceptRenewedCommit = commitSync(r);
        Object acceptExpired = attempt(() -> c.acknowledge(cGot.get(0), AcknowledgeType.ACCEPT));
        Object acceptExpiredCommit = commitSync(c);
        var redelivered = poll(c, 1, x -> AcknowledgeType.ACCEPT);
        Object redeliveredCommit = commitSync(c);
        close(env, r);
        close(env, c);
        return Json.obj("delivered", records(rGot), "control_delivered", records(cGot),
            "lock_timeout_ms", lockTimeout, "renew", renew, "renew_commit", renewCommit,
            "accept_before_next_poll", acceptBeforePoll, "handed_back", records(handedBack),
            "accept_renewed_commit", acceptRenewedCommit, "control_accept", acceptExpired,
            "control_accept_commit", acceptExpiredCommit, "control_redelivered", records(redelivered),
            "control_redelivered_commit", redeliveredCommit);
    }

    /**
     * Acknowledgement commit callbacks: consumer A's lock (3 s) expires, consumer B of the same group gets the
     * records again (delivery count 2) and accepts them with commitAsync (callback without exception); A's late
     * ACCEPT reaches its callback with the offsets and InvalidRecordStateException.
     */
    static Object lockExpiryCallbacks(Env env) throws Exception {
        String topic = env.name("share-callbacks");
        String group = env.name("share-callbacks-group");
        setUp(env, topic, 1, group, Map.of("share.record.lock.duration.ms", "3000"));
        env.produceBatch(topic, 0, 0, 3);
        KafkaShareConsumer<String, String> a = subscribed(env, group, topic,
            "client.id", "callbacks-a", "share.acknowledgement.mode", "explicit");
        var aGot = poll(a, 3, null);
        KafkaShareConsumer<String, String> b = subscribed(env, group, topic,
            "client.id", "callbacks-b", "share.acknowledgement.mode", "explicit");
        AtomicReference<Object> bCallback = new AtomicReference<>();
        b.setAcknowledgementCommitCallback((offsets, exception) ->
            bCallback.set(Json.obj("offsets", offsets, "exception", exception)));
        var bGot = poll(b, 3, r -> AcknowledgeType.ACCEPT);
        b.commitAsync();
        long deadline = System.nanoTime() + Env.DEADLINE.toNanos();
        while (bCallback.get() == null && System.nanoTime() < deadline) {
            b.poll(Duration.ofMillis(100));
        }
        AtomicReference<Object> aCallback = new AtomicReference<>();
        a.setAcknowledgementCommitCallback((offsets, exception) ->
            aCallback.set(Json.obj("offsets", offsets, "exception", exception)));
        for (ConsumerRecord<String, String> r : aGot) {
            a.acknowledge(r, AcknowledgeType.ACCEPT);
        }
        a.commitAsync();
        deadline = System.nanoTime() + Env.DEADLINE.toNanos();
        while (aCallback.get() == null && System.nanoTime() < deadline) {
            a.poll(Duration.ofMillis(100));
        }
        close(env, a);
        close(env, b);
        return Json.obj("a_delivered", records(aGot), "b_delivered", records(bGot), "b_callback", bCallback.get(),
            "a_callback", aCallback.get(), "start_offsets", startOffsets(env.admin(), group));
    }

    /**
     * share.acquire.mode=record_limit: a consumer with max.poll.records=2 acquires two records of a five-record
     * batch, leaving the other three to another member of the group.
     */
    static Object recordLimit(Env env) throws Exception {
        String topic = env.name("share-record-limit");
        String group = env.name("share-record-limit-group");
        setUp(env, topic, 1, group, Map.of());
        env.produceBatch(topic, 0, 0, 5);
        KafkaShareConsumer<String, String> limited = subscribed(env, group, topic, "client.id", "limited",
            "share.acquire.mode", "record_limit", "max.poll.records", "2");
        var first = poll(limited, 1, null);
        KafkaShareConsumer<String, String> other = subscribed(env, group, topic, "client.id", "other");
        var rest = poll(other, 5 - first.size(), null);
        Object otherCommit = commitSync(other);
        Object limitedCommit = commitSync(limited);
        close(env, other);
        close(env, limited);
        return Json.obj("limited_delivered", records(first), "other_delivered", records(rest),
            "limited_commit", limitedCommit, "other_commit", otherCommit,
            "start_offsets", startOffsets(env.admin(), group));
    }

    /** share.delivery.count.limit=2: a record released twice is archived, never delivered a third time. */
    static Object deliveryLimit(Env env) throws Exception {
        String topic = env.name("share-delivery-limit");
        String group = env.name("share-delivery-limit-group");
        setUp(env, topic, 1, group, Map.of("share.delivery.count.limit", "2"));
        env.produceBatch(topic, 0, 0, 2);
        KafkaShareConsumer<String, String> consumer = subscribed(env, group, topic,
            "client.id", "limit-1", "share.acknowledgement.mode", "explicit");
        var first = poll(consumer, 2, r -> r.offset() == 0 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
        Object commit1 = commitSync(consumer);
        var second = poll(consumer, 1, r -> AcknowledgeType.RELEASE);
        Object commit2 = commitSync(consumer);
        env.produceBatch(topic, 0, 2, 1);
        var third = poll(consumer, 1, r -> AcknowledgeType.ACCEPT);
        Object commit3 = commitSync(consumer);
        close(env, consumer);
        return Json.obj("first", records(first), "commit1", commit1, "second", records(second),
            "commit2", commit2, "after_sentinel", records(third), "commit3", commit3,
            "start_offsets", startOffsets(env.admin(), group));
    }

    /**
     * The share-group admin calls around a group with one member and without: describeShareGroups,
     * listShareGroupOffsets, alterShareGroupOffsets, deleteShareGroupOffsets, deleteShareGroups, listGroups.
     */
    static Object admin(Env env) throws Exception {
        String topic = env.name("share-admin");
        String group = env.name("share-admin-group");
        String unknown = env.name("share-admin-unknown");
        Admin admin = env.admin();
        setUp(env, topic, 2, group, Map.of());
        env.produceBatch(topic, 0, 0, 2);
        env.produceBatch(topic, 1, 0, 2);
        KafkaShareConsumer<String, String> consumer = subscribed(env, group, topic, "client.id", "admin-member");
        var delivered = poll(consumer, 4, null);
        commitSync(consumer);  // not compared: how four records split over polls differs from run to run
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("delivered", records(delivered));
        out.put("describe_active", describe(admin, List.of(group, unknown)));
        out.put("offsets_active", startOffsets(admin, group));
        TopicPartition p0 = new TopicPartition(topic, 0);
        out.put("alter_while_active", Json.outcome(admin.alterShareGroupOffsets(group, Map.of(p0, 0L)).all()));
        out.put("delete_offsets_while_active",
            Json.outcome(admin.deleteShareGroupOffsets(group, java.util.Set.of(topic)).all()));
        out.put("delete_group_while_active", Json.outcome(admin.deleteShareGroups(List.of(group)).all()));
        out.put("list_share_groups", listGroups(admin, ListGroupsOptions.forShareGroups(), group, unknown));
        close(env, consumer);
        Env.await("the share group to be empty", Env.DEADLINE, () -> {
            try {
                return admin.describeShareGroups(List.of(group)).describedGroups().get(group).get()
                    .members().isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
        out.put("describe_empty", describe(admin, List.of(group)));
        out.put("alter", Json.outcome(admin.alterShareGroupOffsets(group, Map.of(p0, 1L)).all()));
        out.put("offsets_altered", startOffsets(admin, group));
        out.put("alter_past_end",
            Json.outcome(admin.alterShareGroupOffsets(group, Map.of(new TopicPartition(topic, 1), 100L)).all()));
        out.put("alter_unknown_partition",
            Json.outcome(admin.alterShareGroupOffsets(group, Map.of(new TopicPartition(topic, 7), 0L)).all()));
        out.put("offsets_after_alters", startOffsets(admin, group));
        KafkaShareConsumer<String, String> again = subscribed(env, group, topic, "client.id", "admin-again");
        var redelivered = poll(again, 1, null);
        out.put("delivered_after_alter", records(redelivered));
        out.put("commit_after_alter", commitSync(again));
        close(env, again);
        Env.await("the share group to be empty again", Env.DEADLINE, () -> {
            try {
                return admin.describeShareGroups(List.of(group)).describedGroups().get(group).get()
                    .members().isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
        out.put("delete_offsets_unknown_topic",
            Json.outcome(admin.deleteShareGroupOffsets(group, java.util.Set.of(topic + "-missing")).all()));
        out.put("delete_offsets", Json.outcome(admin.deleteShareGroupOffsets(group, java.util.Set.of(topic)).all()));
        out.put("offsets_after_delete", startOffsets(admin, group));
        out.put("delete_group", Json.of(admin.deleteShareGroups(List.of(group, unknown)).deletedGroups()));
        out.put("describe_deleted", describe(admin, List.of(group)));
        out.put("list_after_delete", listGroups(admin, ListGroupsOptions.forShareGroups(), group, unknown));
        return out;
    }

    static Object describe(Admin admin, List<String> groups) {
        Map<String, Object> out = new TreeMap<>();
        var described = admin.describeShareGroups(groups,
            new org.apache.kafka.clients.admin.DescribeShareGroupsOptions().includeAuthorizedOperations(true))
            .describedGroups();
        for (String group : groups) {
            out.put(group, Json.outcome(described.get(group)));
        }
        return out;
    }

    /** listGroups with `options`, only the groups named (the brokers hold other tests' groups too). */
    static Object listGroups(Admin admin, ListGroupsOptions options, String... groups) {
        try {
            var listed = admin.listGroups(options).all().get(60, TimeUnit.SECONDS);
            List<Object> out = new ArrayList<>();
            for (var listing : listed) {
                if (List.of(groups).contains(listing.groupId())) {
                    out.add(Json.of(listing));
                }
            }
            out.sort(Json.ORDER);
            return out;
        } catch (Exception e) {
            return Json.error(e);
        }
    }
}
