package shoal.tooltest;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs several of Kafka's command-line tools, one after the other, in one JVM: each by its main class, with its
 * own standard output, standard error and standard input, and its exit code taken where the tool exits (Kafka's
 * tools exit through org.apache.kafka.common.utils.internals.Exit, whose procedure is replaced here). A JVM start
 * costs seconds on a loaded machine; a tool's run in a warm JVM a fraction of that.
 *
 * Usage: ToolBatch COMMANDS.json, where the file holds [{"main": CLASS, "args": [...], "stdin": TEXT?,
 * "timeout_ms": N?}, ...]. Prints [{"exit": CODE, "stdout": TEXT, "stderr": TEXT, "timed_out": BOOL}, ...] as
 * JSON on the real standard output once all have run, then exits 0 (stopping what the tools left running, as
 * their own exit would have).
 */
public final class ToolBatch {
    /** Thrown where the tool would have exited; an Error so that a tool's catch (Exception) lets it through. */
    static final class ToolExit extends Error {
        final int code;

        ToolExit(int code) {
            super(null, null, false, false);
            this.code = code;
        }
    }

    /** Where System.out or System.err writes: the running tool's buffer. Installed once, before anything runs,
     * so that a stream a class kept (log4j's console appender, a static field) follows the tool running. */
    static final class Switch extends OutputStream {
        volatile OutputStream target = OutputStream.nullOutputStream();

        private OutputStream target() {
            return running() ? target : OutputStream.nullOutputStream();
        }

        @Override
        public void write(int b) throws IOException {
            target().write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            target().write(b, off, len);
        }
    }

    static final class SwitchIn extends InputStream {
        volatile InputStream source = InputStream.nullInputStream();

        @Override
        public int read() throws IOException {
            return source.read();
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            return source.read(b, off, len);
        }

        @Override
        public int available() throws IOException {
            return source.available();
        }
    }

    /** The running tool's exit code once it has exited (null before). */
    static volatile Integer exited;
    /** The threads of the running tool: its main thread and every thread it started. */
    static volatile ThreadGroup active;

    /** Whether the calling thread is the running tool's: what a tool run before it does late (its JVM would have
     * ended) is neither seen nor counted. */
    static boolean running() {
        ThreadGroup group = Thread.currentThread().getThreadGroup();
        return group == active || Thread.currentThread().getName().equals("ToolBatch");
    }

    /** Where the tool's JVM would have ended: the first exit counts, and nothing the tool does after it (a catch
     * block printing the ToolExit, a finally exiting again) is seen, as it would not have run. */
    static void exit(int code, String message) {
        synchronized (ToolBatch.class) {
            if (exited == null && Thread.currentThread().getThreadGroup() == active) {
                exited = code;
                System.out.flush();
                System.err.flush();
                OUT.target = OutputStream.nullOutputStream();
                ERR.target = OutputStream.nullOutputStream();
            }
        }
        throw new ToolExit(code);
    }

    /**
     * A step of a batch between two tools: until the broker's metadata has every change its controller made before
     * now. A Kafka broker applies its controller's metadata log in order (moments after the controller answered),
     * so once a topic created now has a leader in the broker's metadata, the changes before it are visible there
     * too; Shoal applies a change before it answers. Arguments: BOOTSTRAP TOPIC [COMMAND-CONFIG]; exits 1 after
     * 60 s.
     */
    public static final class Barrier {
        public static void main(String[] args) throws Exception {
            Properties props = new Properties();
            if (args.length > 2) {
                try (var in = Files.newInputStream(Path.of(args[2]))) {
                    props.load(in);
                }
            }
            props.put("bootstrap.servers", args[0]);
            String topic = args[1];
            try (Admin admin = Admin.create(props)) {
                admin.createTopics(List.of(new NewTopic(topic, Optional.of(1), Optional.empty()))).all().get();
                long deadline = System.nanoTime() + 60_000_000_000L;
                while (true) {
                    try {
                        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                        if (d.partitions().get(0).leader() != null) {
                            return;
                        }
                    } catch (ExecutionException e) {
                        if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                            throw e;
                        }
                    }
                    if (System.nanoTime() > deadline) {
                        System.err.println("the barrier topic " + topic + " was not listed within 60 s");
                        Exit.exit(1);
                    }
                    Thread.sleep(20);
                }
            }
        }
    }

    static final Switch OUT = new Switch();
    static final Switch ERR = new Switch();
    static final SwitchIn IN = new SwitchIn();

    public static void main(String[] argv) throws Exception {
        Thread.currentThread().setName("ToolBatch");
        ObjectMapper json = new ObjectMapper();
        JsonNode commands = json.readTree(new File(argv[0]));
        PrintStream realOut = System.out;
        System.setOut(new PrintStream(OUT, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(ERR, true, StandardCharsets.UTF_8));
        System.setIn(IN);
        Exit.setExitProcedure(ToolBatch::exit);
        Exit.setHaltProcedure(ToolBatch::exit);
        // A tool's shutdown hooks would run when its JVM exits; here they would pile up across the batch.
        Exit.setShutdownHookAdder((name, runnable) -> { });
        ArrayNode results = json.createArrayNode();
        for (JsonNode command : commands) {
            results.add(run(json, command));
        }
        realOut.println(json.writeValueAsString(results));
        realOut.flush();
        Runtime.getRuntime().halt(0);
    }

    private static ObjectNode run(ObjectMapper json, JsonNode command) throws Exception {
        String mainClass = command.get("main").asText();
        List<String> args = new ArrayList<>();
        command.get("args").forEach(a -> args.add(a.asText()));
        String stdin = command.hasNonNull("stdin") ? command.get("stdin").asText() : "";
        long timeoutMs = command.hasNonNull("timeout_ms") ? command.get("timeout_ms").asLong() : 120_000L;

        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream toolErr = System.err;
        OUT.target = out;
        ERR.target = err;
        IN.source = new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8));

        Method main = Class.forName(mainClass).getMethod("main", String[].class);
        AtomicInteger exit = new AtomicInteger(0);
        ThreadGroup group = new ThreadGroup("tool-" + mainClass);
        synchronized (ToolBatch.class) {
            exited = null;
            active = group;
        }
        Thread thread = new Thread(group, () -> {
            try {
                main.invoke(null, (Object) args.toArray(new String[0]));
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (cause instanceof ToolExit) {
                    exit.set(((ToolExit) cause).code);
                } else {
                    // what the JVM does with an exception escaping main
                    toolErr.print("Exception in thread \"main\" ");
                    cause.printStackTrace(toolErr);
                    exit.set(1);
                }
            } catch (ToolExit e) {
                exit.set(e.code);
            } catch (ReflectiveOperationException e) {
                e.printStackTrace(toolErr);
                exit.set(1);
            }
        }, "main");
        thread.start();
        // until the tool returns from main or exits (its JVM would end there, whatever its threads were doing)
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        while (thread.isAlive() && exited == null && System.nanoTime() < deadline) {
            thread.join(5);
        }
        Integer code = exited;
        boolean timedOut = code == null && thread.isAlive();
        if (code != null) {
            thread.join(2_000);  // what it does after exiting is not seen; let it end before the next tool starts
        }
        System.out.flush();
        System.err.flush();
        synchronized (ToolBatch.class) {
            active = null;  // what threads the tool left behind do from now on is nobody's
        }
        ObjectNode result = json.createObjectNode();
        result.put("exit", code != null ? code : timedOut ? -1 : exit.get());
        result.put("stdout", out.toString(StandardCharsets.UTF_8));
        result.put("stderr", err.toString(StandardCharsets.UTF_8));
        result.put("timed_out", timedOut);
        return result;
    }
}
