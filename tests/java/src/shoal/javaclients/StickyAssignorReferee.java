package shoal.javaclients;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.AssignmentConfigsImpl;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.MemberMetadataAndStateImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;

/**
 * Kafka 4.4's streams `sticky` task assignor as a referee for Shoal's (tests/differential/test_streams_assignor.py):
 * reads cases as JSON on standard input, a list of {"subtopologies": [{"id", "partitions", "stateful"}],
 * "standbys": n, "members": [{"id", "process", "active": {sid: [p]}, "standby": {sid: [p]},
 * "offsets": [[sid, p, offset]]}]}, and prints each case's assignment, {member: {"active": {sid: [p]},
 * "standby": {sid: [p]}}}. The group spec is built as the broker's TargetAssignmentBuilder builds it (a HashMap of
 * the members filled in their order).
 */
public final class StickyAssignorReferee {
    private StickyAssignorReferee() {}

    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        JsonNode cases = mapper.readTree(System.in);
        ArrayNode out = mapper.createArrayNode();
        for (JsonNode c : cases) {
            out.add(assign(mapper, c));
        }
        System.out.println(mapper.writeValueAsString(out));
    }

    private static Map<String, Set<Integer>> tasks(JsonNode node) {
        Map<String, Set<Integer>> out = new HashMap<>();
        node.properties().forEach(e -> {
            Set<Integer> partitions = new HashSet<>();
            e.getValue().forEach(p -> partitions.add(p.asInt()));
            out.put(e.getKey(), partitions);
        });
        return out;
    }

    private static ObjectNode assign(ObjectMapper mapper, JsonNode c) {
        Map<String, MemberMetadataAndStateImpl> members = new HashMap<>();
        for (JsonNode m : c.get("members")) {
            Map<String, Map<Integer, Long>> offsets = new HashMap<>();
            for (JsonNode o : m.get("offsets")) {
                offsets.computeIfAbsent(o.get(0).asText(), k -> new HashMap<>()).put(o.get(1).asInt(), o.get(2).asLong());
            }
            members.put(m.get("id").asText(), new MemberMetadataAndStateImpl(Optional.empty(), Optional.empty(),
                m.get("process").asText(), Map.of(), tasks(m.get("active")), tasks(m.get("standby")), Map.of(),
                offsets, Map.of()));
        }
        Map<String, int[]> subtopologies = new TreeMap<>();
        for (JsonNode s : c.get("subtopologies")) {
            subtopologies.put(s.get("id").asText(), new int[] {s.get("partitions").asInt(),
                s.get("stateful").asBoolean() ? 1 : 0});
        }
        TopologyDescriber topology = new TopologyDescriber() {
            @Override
            public List<String> subtopologies() {
                return new ArrayList<>(subtopologies.keySet());
            }

            @Override
            public int maxNumInputPartitions(String id) {
                return subtopologies.get(id)[0];
            }

            @Override
            public boolean isStateful(String id) {
                return subtopologies.get(id)[1] == 1;
            }
        };
        GroupSpecImpl spec = new GroupSpecImpl(members, new AssignmentConfigsImpl(c.get("standbys").asInt(), List.of()));
        GroupAssignment assignment = new StickyTaskAssignor().assign(spec, topology);
        ObjectNode out = mapper.createObjectNode();
        for (Map.Entry<String, MemberAssignment> e : assignment.members().entrySet()) {
            ObjectNode member = out.putObject(e.getKey());
            member.set("active", sorted(mapper, e.getValue().activeTasks()));
            member.set("standby", sorted(mapper, e.getValue().standbyTasks()));
        }
        return out;
    }

    private static ObjectNode sorted(ObjectMapper mapper, Map<String, Set<Integer>> tasks) {
        ObjectNode out = mapper.createObjectNode();
        new TreeMap<>(tasks).forEach((id, partitions) -> {
            if (!partitions.isEmpty()) {
                ArrayNode list = out.putArray(id);
                new TreeSet<>(partitions).forEach(list::add);
            }
        });
        return out;
    }
}
