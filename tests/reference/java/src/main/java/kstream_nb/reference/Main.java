package kstream_nb.reference;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The Java reference runner of tests/reference/SPEC.md.
 *
 * <pre>
 * java -jar reference-runner.jar [--vocabulary PATH] [--describe] [--trace] &lt; cases.jsonl &gt; results.jsonl
 * </pre>
 *
 * One case per input line (a JSON object), one result per output line, flushed after each. {@code --vocabulary}
 * defaults to tests/reference/vocabulary.json relative to the working directory; {@code --state-dir} is where the
 * stores' files go (default /dev/shm if writable, else java.io.tmpdir; a fresh folder per run, deleted at exit). {@code --describe} adds SPEC's
 * {@code describe} object. {@code --trace} (for checkers, not part of SPEC's result) adds
 * {@code "trace": {"steps": [{"output_counts": {node: n}, "stores": {...}}], "dropped_inputs": [i, ...]}}: per step,
 * how many records each output node had produced by its end and the stores then; and the 0-based indexes of the
 * inputs that incremented the dropped-records metric.
 */
public final class Main {

    private Main() {}

    private static final String PREFIX = "kstream-ref-";

    /** The vocabulary: as given; by default tests/reference/vocabulary.json of the working directory, else the one
     * next to this jar's project (the jar is tests/reference/java/target/reference-runner.jar). */
    private static File vocabularyFile(final String path, final boolean given) {
        final File file = new File(path);
        if (given || file.isFile()) {
            return file;
        }
        try {
            final File jar = new File(Main.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            final File beside = new File(jar.getParentFile(), "../../vocabulary.json");
            if (beside.isFile()) {
                return beside;
            }
        } catch (final Exception ignored) {
            // fall through to the default path (and its error)
        }
        return file;
    }

    /** Removes the state folders of runners that are gone (killed before their exit hook ran). */
    private static void removeStale(final Path parent) {
        try (java.util.stream.Stream<Path> entries = Files.list(parent)) {
            entries.filter(p -> p.getFileName().toString().startsWith(PREFIX)).forEach(p -> {
                final String[] parts = p.getFileName().toString().substring(PREFIX.length()).split("-");
                try {
                    if (parts.length == 2 && ProcessHandle.of(Long.parseLong(parts[0])).isEmpty()) {
                        CaseRunner.deleteTree(p);
                    }
                } catch (final NumberFormatException ignored) {
                    // not one of ours
                }
            });
        } catch (final java.io.IOException | RuntimeException ignored) {
            // best effort
        }
    }

    /**
     * Where the cases' RocksDB stores go: {@code --state-dir}, else /dev/shm when it is a writable directory (a
     * tmpfs: opening and dropping a few stores per case costs a third of what it costs on disk), else java.io.tmpdir.
     */
    private static Path stateParent(final String stateDir) {
        if (stateDir != null) {
            return Path.of(stateDir);
        }
        final Path shm = Path.of("/dev/shm");
        if (Files.isDirectory(shm) && Files.isWritable(shm)) {
            return shm;
        }
        return Path.of(System.getProperty("java.io.tmpdir"));
    }

    public static void main(final String[] args) throws Exception {
        // results own stdout: anything else that prints (a library, a stray log binding) goes to stderr
        final PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);

        String vocabularyPath = "tests/reference/vocabulary.json";
        boolean vocabularyGiven = false;
        boolean describe = false;
        boolean trace = false;
        String stateDir = null;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--vocabulary":
                    vocabularyPath = args[++i];
                    vocabularyGiven = true;
                    break;
                case "--describe":
                    describe = true;
                    break;
                case "--trace":
                    trace = true;
                    break;
                case "--state-dir":
                    stateDir = args[++i];
                    break;
                default:
                    System.err.println("usage: java -jar reference-runner.jar [--vocabulary PATH] [--describe] [--trace]"
                        + " [--state-dir DIR]");
                    System.exit(2);
            }
        }
        final ObjectMapper json = new ObjectMapper();
        final Vocabulary vocabulary = Vocabulary.load(vocabularyFile(vocabularyPath, vocabularyGiven), json);
        final Path parent = stateParent(stateDir);
        removeStale(parent);
        final Path stateRoot = Files.createTempDirectory(parent, PREFIX + ProcessHandle.current().pid() + "-");
        Runtime.getRuntime().addShutdownHook(new Thread(() -> CaseRunner.deleteTree(stateRoot)));

        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode result;
            JsonNode c = null;
            try {
                c = json.readTree(line);
                result = new CaseRunner(vocabulary, stateRoot.toFile(), describe, trace).run(c);
            } catch (final Throwable e) {
                result = json.createObjectNode();
                result.set("id", c == null || c.get("id") == null ? json.nullNode() : c.get("id"));
                result.putObject("outputs");
                result.putObject("stores");
                result.put("dropped_records_total", 0);
                result.put("error", (c == null ? "build: invalid case JSON: " : "build: ") + CaseRunner.message(e));
            }
            out.println(json.writeValueAsString(result));
            out.flush();
        }
        out.flush();
    }
}
