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
 * defaults to tests/reference/vocabulary.json relative to the working directory. {@code --describe} adds SPEC's
 * {@code describe} object. {@code --trace} (for checkers, not part of SPEC's result) adds
 * {@code "trace": {"steps": [{"output_counts": {node: n}, "stores": {...}}], "dropped_inputs": [i, ...]}}: per step,
 * how many records each output node had produced by its end and the stores then; and the 0-based indexes of the
 * inputs that incremented the dropped-records metric.
 */
public final class Main {

    private Main() {}

    public static void main(final String[] args) throws Exception {
        // results own stdout: anything else that prints (a library, a stray log binding) goes to stderr
        final PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);

        String vocabularyPath = "tests/reference/vocabulary.json";
        boolean describe = false;
        boolean trace = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--vocabulary":
                    vocabularyPath = args[++i];
                    break;
                case "--describe":
                    describe = true;
                    break;
                case "--trace":
                    trace = true;
                    break;
                default:
                    System.err.println("usage: java -jar reference-runner.jar [--vocabulary PATH] [--describe] [--trace]");
                    System.exit(2);
            }
        }
        final ObjectMapper json = new ObjectMapper();
        final Vocabulary vocabulary = Vocabulary.load(new File(vocabularyPath), json);
        final Path stateRoot = Files.createTempDirectory("kstream-ref-");
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
