package shoal.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * KafkaConsumer with group.protocol classic and consumer (subscribe, poll, commitSync, committed, a second member
 * joining and leaving, seek, position, offsetsForTimes, close) and KafkaProducer idempotent and transactional
 * (init/begin/send/commit/abort, sendOffsetsToTransaction with a live group's metadata, fencing, what
 * read_committed and read_uncommitted consumers see).
 */
final class ClientScenarios {
    private ClientScenarios() {}

    static Map<String, Scenario> all() {
        Map<String, Scenario> all = new LinkedHashMap<>();
        all.put("consumer_classic", env -> consumer(env, "classic"));
        all.put("consumer_consumer", env -> consumer(env, "consumer"));
        all.put("producer_idempotent", ClientScenarios::idempotent);
        all.put("producer_transactional", ClientScenarios::transactional);
        return all;
    }

    // -- helpers --------------------------------------------------------------------------------------------------

    /** Records as compared; timestamps relative to `base` (they were set by the producer). */
    static List<Object> records(Collection<ConsumerRecord<String, String>> records, long base) {
        List<ConsumerRecord<String, String>> sorted = new ArrayList<>(records);
        sorted.sort((a, b) -> a.partition() != b.partition() ? a.partition() - b.partition()
            : Long.compare(a.offset(), b.offset()));
        List<Object> out = new ArrayList<>();
        for (ConsumerRecord<String, String> r : sorted) {
            out.add(Json.obj("partition", r.partition(), "offset", r.offset(), "key", r.key(), "value", r.value(),
                "ts_after_base", base < 0 ? null : r.timestamp() - base, "timestamp_type", r.timestampType(),
                "leader_epoch", r.leaderEpoch()));
        }
        return out;
    }

    static List<ConsumerRecord<String, String>> pollUntil(KafkaConsumer<String, String> consumer, int want) {
        Env.log("polling for " + want + " records");
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + Env.DEADLINE.toNanos();
        while (got.size() < want) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out: " + got.size() + " of " + want + " records");
            }
            consumer.poll(Duration.ofMillis(100)).forEach(got::add);
        }
        Env.log("polled " + got.size());
        return got;
    }

    /** Everything from the beginning of `tp` up to the consumer's end offset (its isolation level's). */
    static List<ConsumerRecord<String, String>> readAll(KafkaConsumer<String, String> consumer, TopicPartition tp) {
        consumer.assign(List.of(tp));
        consumer.seekToBeginning(List.of(tp));
        long end = consumer.endOffsets(List.of(tp)).get(tp);
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + Env.DEADLINE.toNanos();
        while (consumer.position(tp) < end) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out reading to " + end);
            }
            consumer.poll(Duration.ofMillis(100)).forEach(got::add);
        }
        return got;
    }

    static Object assignment(KafkaConsumer<String, String> consumer) {
        return Json.of(new HashSet<>(consumer.assignment()));
    }

    static Object attempt(ShareScenarios.ThrowingRunnable action) {
        return ShareScenarios.attempt(action);
    }

    static Object committed(KafkaConsumer<String, String> consumer, Set<TopicPartition> partitions) {
        try {
            return Json.of(consumer.committed(partitions, Duration.ofSeconds(30)));
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    /** The producer epoch of transactional id `tid` as describeTransactions shows it. */
    static Object epoch(Env env, String tid) {
        try {
            return env.admin().describeTransactions(List.of(tid)).description(tid).get(60, TimeUnit.SECONDS)
                .producerEpoch();
        } catch (Exception e) {
            return Json.error(e);
        }
    }

    // -- consumers ------------------------------------------------------------------------------------------------

    static Object consumer(Env env, String protocol) throws Exception {
        String topic = env.name("consumer-" + protocol);
        String group = env.name("consumer-" + protocol + "-group");
        env.createTopic(topic, 2);
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        Set<TopicPartition> both = Set.of(p0, p1);
        long base = (System.currentTimeMillis() / 1000) * 1000 - 60_000;
        try (KafkaProducer<String, String> producer = env.producer("linger.ms", "5000")) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int p = 0; p < 2; p++) {
                for (int i = 0; i < 3; i++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, p, base + i * 1000L, "k" + i, "p" + p + "v" + i)));
                }
            }
            producer.flush();
            for (var f : sent) {
                f.get(60, TimeUnit.SECONDS);
            }
        }
        List<Object> settings = new ArrayList<>(List.of("group.id", group, "group.protocol", protocol,
            "auto.offset.reset", "earliest", "enable.auto.commit", "false"));
        if (protocol.equals("classic")) {
            settings.addAll(List.of("heartbeat.interval.ms", "500", "session.timeout.ms", "10000"));
        } else {
            env.groupConfig(group, Map.of("consumer.heartbeat.interval.ms", "500"));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        KafkaConsumer<String, String> a = env.consumer(with(settings, "client.id", "member-a"));
        a.subscribe(List.of(topic));
        out.put("polled", records(pollUntil(a, 6), base));
        out.put("assignment", assignment(a));
        out.put("commit", attempt(a::commitSync));
        out.put("committed", committed(a, both));
        out.put("positions", Json.obj("p0", a.position(p0), "p1", a.position(p1)));
        out.put("generation_alone", a.groupMetadata().generationId());
        KafkaConsumer<String, String> b = env.consumer(with(settings, "client.id", "member-b"));
        b.subscribe(List.of(topic));
        Env.await("two members sharing the partitions", Env.DEADLINE, () -> {
            a.poll(Duration.ofMillis(50));
            b.poll(Duration.ofMillis(50));
            Set<TopicPartition> union = new HashSet<>(a.assignment());
            union.addAll(b.assignment());
            return a.assignment().size() == 1 && b.assignment().size() == 1 && union.equals(both);
        });
        out.put("generations_shared", List.of(a.groupMetadata().generationId(), b.groupMetadata().generationId()));
        out.put("commit_by_b", attempt(b::commitSync));
        b.close();
        Env.await("member a to get both partitions back", Env.DEADLINE, () -> {
            a.poll(Duration.ofMillis(50));
            return a.assignment().equals(both);
        });
        out.put("generation_after_leave", a.groupMetadata().generationId());
        a.seek(p0, 1);
        out.put("position_after_seek", a.position(p0));
        out.put("polled_after_seek", records(pollUntil(a, 2), base));
        Map<String, Object> forTimes = new TreeMap<>();
        a.offsetsForTimes(Map.of(p0, base + 1000, p1, base + 100_000)).forEach((tp, found) ->
            forTimes.put(Json.key(tp), found == null ? null : Json.obj("offset", found.offset(),
                "ts_after_base", found.timestamp() - base, "leader_epoch", found.leaderEpoch())));
        out.put("offsets_for_times", forTimes);
        out.put("beginning_offsets", Json.of(a.beginningOffsets(both)));
        out.put("end_offsets", Json.of(a.endOffsets(both)));
        out.put("commit_with_metadata", attempt(() ->
            a.commitSync(Map.of(p0, new OffsetAndMetadata(2, "meta")))));
        out.put("committed_with_metadata", committed(a, both));
        a.close();
        KafkaConsumer<String, String> viewer = env.consumer("group.id", group, "group.protocol", protocol);
        out.put("committed_after_close", committed(viewer, both));
        return out;
    }

    static Object[] with(List<Object> settings, Object... more) {
        List<Object> all = new ArrayList<>(settings);
        all.addAll(List.of(more));
        return all.toArray();
    }

    // -- producers ------------------------------------------------------------------------------------------------

    static Object idempotent(Env env) throws Exception {
        String topic = env.name("producer-idempotent");
        env.createTopic(topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        KafkaProducer<String, String> producer = env.producer("enable.idempotence", "true", "acks", "all",
            "client.id", "idempotent");
        List<Object> sent = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            RecordMetadata m = producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get(60, TimeUnit.SECONDS);
            sent.add(Json.obj("partition", m.partition(), "offset", m.offset(), "key_size", m.serializedKeySize(),
                "value_size", m.serializedValueSize()));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", sent);
        out.put("producers", Json.outcome(env.admin().describeProducers(List.of(tp)).partitionResult(tp)));
        KafkaConsumer<String, String> consumer = env.consumer();
        out.put("read", records(readAll(consumer, tp), -1));
        return out;
    }

    static Object transactional(Env env) throws Exception {
        String topic = env.name("producer-txn");
        String source = env.name("producer-txn-source");
        String group = env.name("producer-txn-group");
        String tid = env.name("producer-txn-id");
        env.createTopic(topic, 1);
        env.createTopic(source, 1);
        env.groupConfig(group, Map.of("consumer.heartbeat.interval.ms", "500"));
        TopicPartition tp = new TopicPartition(topic, 0);
        TopicPartition src = new TopicPartition(source, 0);
        env.produceBatch(source, 0, 0, 2);
        Map<String, Object> out = new LinkedHashMap<>();

        // a live consumer-protocol group whose metadata goes with the transaction's offsets
        KafkaConsumer<String, String> member = env.consumer("group.id", group, "group.protocol", "consumer",
            "auto.offset.reset", "earliest", "enable.auto.commit", "false", "client.id", "txn-member");
        member.subscribe(List.of(source));
        pollUntil(member, 2);
        ConsumerGroupMetadata metadata = member.groupMetadata();

        KafkaProducer<String, String> producer = env.producer("transactional.id", tid, "client.id", "txn-1");
        List<Object> epochs = new ArrayList<>();  // the transaction's producer epoch after each step
        Runnable epoch = () -> epochs.add(epoch(env, tid));
        out.put("init", attempt(producer::initTransactions));
        epoch.run();
        out.put("commit_1", attempt(() -> {
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k0", "committed-0"));
            producer.send(new ProducerRecord<>(topic, 0, "k1", "committed-1"));
            producer.commitTransaction();
        }));
        epoch.run();
        out.put("abort", attempt(() -> {
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k2", "aborted-2"));
            producer.send(new ProducerRecord<>(topic, 0, "k3", "aborted-3"));
            producer.flush();
            producer.abortTransaction();
        }));
        epoch.run();
        out.put("commit_with_offsets", attempt(() -> {
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k4", "committed-4"));
            producer.sendOffsetsToTransaction(Map.of(src, new OffsetAndMetadata(1, "txn")), metadata);
            producer.commitTransaction();
        }));
        epoch.run();
        out.put("group_committed", committed(member, Set.of(src)));

        // an open transaction holds back the last stable offset
        out.put("open", attempt(() -> {
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k5", "open-5")).get(60, TimeUnit.SECONDS);
        }));
        KafkaConsumer<String, String> committed = env.consumer("isolation.level", "read_committed");
        KafkaConsumer<String, String> uncommitted = env.consumer("isolation.level", "read_uncommitted");
        out.put("end_offsets_while_open", Json.obj(
            "read_committed", committed.endOffsets(List.of(tp)).get(tp),
            "read_uncommitted", uncommitted.endOffsets(List.of(tp)).get(tp)));
        out.put("producers_while_open", Json.outcome(env.admin().describeProducers(List.of(tp)).partitionResult(tp)));

        // a second producer with the same transactional id fences the first, aborting its open transaction
        KafkaProducer<String, String> successor = env.producer("transactional.id", tid, "client.id", "txn-2");
        out.put("successor_init", attempt(successor::initTransactions));
        epoch.run();
        out.put("fenced_send", attempt(() ->
            producer.send(new ProducerRecord<>(topic, 0, "k6", "fenced-6")).get(60, TimeUnit.SECONDS)));
        out.put("fenced_commit", attempt(producer::commitTransaction));
        out.put("successor_commit", attempt(() -> {
            successor.beginTransaction();
            successor.send(new ProducerRecord<>(topic, 0, "k7", "committed-7"));
            successor.commitTransaction();
        }));

        // offsets sent with the metadata of a member that has left the group
        member.close();
        epoch.run();
        out.put("stale_group_metadata", attempt(() -> {
            successor.beginTransaction();
            successor.send(new ProducerRecord<>(topic, 0, "k8", "stale-8")).get(60, TimeUnit.SECONDS);
            successor.sendOffsetsToTransaction(Map.of(src, new OffsetAndMetadata(2)), metadata);
            successor.commitTransaction();
        }));
        out.put("after_stale", attempt(successor::abortTransaction));
        epoch.run();

        out.put("read_committed", records(readAll(committed, tp), -1));
        out.put("read_uncommitted", records(readAll(uncommitted, tp), -1));
        out.put("end_offsets", Json.obj(
            "read_committed", committed.endOffsets(List.of(tp)).get(tp),
            "read_uncommitted", uncommitted.endOffsets(List.of(tp)).get(tp)));
        KafkaConsumer<String, String> viewer = env.consumer("group.id", group, "group.protocol", "consumer");
        out.put("group_committed_at_end", committed(viewer, Set.of(src)));
        out.put("transaction", Json.outcome(env.admin().describeTransactions(List.of(tid)).description(tid)));
        out.put("epochs", epochs);
        return out;
    }
}
