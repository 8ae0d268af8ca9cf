package kstream_nb.reference;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.kstream.internals.WindowedSerializer;
import org.apache.kafka.streams.kstream.internals.WindowedStreamPartitioner;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.ValueAndTimestamp;
import org.apache.kafka.streams.state.internals.ValueAndTimestampSerde;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Writes the bytes of Kafka Streams' own formats, for tests/reference/test_kafka_streams_formats.py.
 *
 * <pre>
 * java -cp reference-runner.jar kstream_nb.reference.FormatsDump &lt; input.json &gt; records.jsonl
 * </pre>
 *
 * Input: {@code {"window_size_ms": n, "gap_ms": n, "partitions": n, "records": [{"key", "value", "timestamp"}]}}
 * (String keys and values) piped into topic {@code input} of one TopologyTestDriver (no record cache) running
 * three counts by key: tumbling windows ({@code tumbling-counts}, written to {@code tumbling-out} with
 * {@code WindowedSerdes.timeWindowedSerdeFrom(String.class, size)}), session windows ({@code session-counts},
 * to {@code session-out} with {@code sessionWindowedSerdeFrom(String.class)}) and a plain count
 * ({@code kv-counts}), all values {@code Serdes.Long()}. Output, one JSON line per record of every topic written
 * (output topics and the stores' changelogs, in the order written per topic): {@code {"topic", "key", "value",
 * "timestamp"}} with key and value as base64 (null for a Kafka null); output records also carry
 * {@code "partition"}, the partition Kafka's WindowedStreamPartitioner picks among {@code partitions}. Then one
 * line per entry of the timestamped stores {@code kv-counts} and {@code tumbling-counts}, {@code {"topic":
 * "store:<name>", "key", "value"}} (a String key, or a time-windowed one as above), the value being
 * the entry's ValueAndTimestamp as Kafka's ValueAndTimestampSerde (with Serdes.Long()) writes it.
 */
public final class FormatsDump {

    private FormatsDump() {}

    static final String APPLICATION_ID = "formats-dump";

    private static String b64(final byte[] bytes) {
        return bytes == null ? null : Base64.getEncoder().encodeToString(bytes);
    }

    public static void main(final String[] args) throws Exception {
        final ObjectMapper mapper = new ObjectMapper();
        final JsonNode input;
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            input = mapper.readTree(in);
        }
        final long size = input.get("window_size_ms").asLong();
        final long gap = input.get("gap_ms").asLong();
        final int partitions = input.path("partitions").asInt(4);

        final Serde<Windowed<String>> timeWindowed = WindowedSerdes.timeWindowedSerdeFrom(String.class, size);
        final Serde<Windowed<String>> sessionWindowed = WindowedSerdes.sessionWindowedSerdeFrom(String.class);
        final StreamsBuilder builder = new StreamsBuilder();
        final KGroupedStream<String, String> grouped = builder
            .stream("input", Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey();
        grouped.windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(size)))
            .count(Materialized.as("tumbling-counts"))
            .toStream()
            .to("tumbling-out", Produced.with(timeWindowed, Serdes.Long()));
        grouped.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMillis(gap)))
            .count(Materialized.as("session-counts"))
            .toStream()
            .to("session-out", Produced.with(sessionWindowed, Serdes.Long()));
        grouped.count(Materialized.as("kv-counts"));

        final Path stateDir = Files.createTempDirectory("kstream-ref-formats-");
        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, APPLICATION_ID);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        final PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props)) {
            final TestInputTopic<String, String> topic =
                driver.createInputTopic("input", new StringSerializer(), new StringSerializer());
            for (final JsonNode r : input.get("records")) {
                topic.pipeInput(r.get("key").asText(), r.get("value").asText(), r.get("timestamp").asLong());
            }
            for (final String name : driver.producedTopicNames()) {
                final TestOutputTopic<byte[], byte[]> output =
                    driver.createOutputTopic(name, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                final Serde<Windowed<String>> windowed = name.equals("tumbling-out") ? timeWindowed
                    : name.equals("session-out") ? sessionWindowed : null;
                for (final TestRecord<byte[], byte[]> r : output.readRecordsToList()) {
                    final ObjectNode line = JsonNodeFactory.instance.objectNode();
                    line.put("topic", name);
                    line.put("key", b64(r.key()));
                    line.put("value", b64(r.value()));
                    line.put("timestamp", r.timestamp());
                    if (windowed != null) {
                        final Windowed<String> key = windowed.deserializer().deserialize(name, r.key());
                        final Optional<Set<Integer>> chosen = new WindowedStreamPartitioner<String, Long>(
                            (WindowedSerializer<String>) windowed.serializer()).partitions(name, key, null, r.headers(), partitions);
                        line.put("partition", chosen.orElseThrow().iterator().next());
                    }
                    out.println(mapper.writeValueAsString(line));
                }
            }
            final Serde<ValueAndTimestamp<Long>> timestamped = new ValueAndTimestampSerde<>(Serdes.Long());
            try (KeyValueIterator<String, ValueAndTimestamp<Long>> it =
                     driver.<String, Long>getTimestampedKeyValueStore("kv-counts").all()) {
                while (it.hasNext()) {
                    final KeyValue<String, ValueAndTimestamp<Long>> e = it.next();
                    final ObjectNode line = JsonNodeFactory.instance.objectNode();
                    line.put("topic", "store:kv-counts");
                    line.put("key", b64(e.key.getBytes(StandardCharsets.UTF_8)));
                    line.put("value", b64(timestamped.serializer().serialize("kv-counts", e.value)));
                    out.println(mapper.writeValueAsString(line));
                }
            }
            try (KeyValueIterator<Windowed<String>, ValueAndTimestamp<Long>> it =
                     driver.<String, Long>getTimestampedWindowStore("tumbling-counts").all()) {
                while (it.hasNext()) {
                    final KeyValue<Windowed<String>, ValueAndTimestamp<Long>> e = it.next();
                    final ObjectNode line = JsonNodeFactory.instance.objectNode();
                    line.put("topic", "store:tumbling-counts");
                    line.put("key", b64(timeWindowed.serializer().serialize("tumbling-counts", e.key)));
                    line.put("value", b64(timestamped.serializer().serialize("tumbling-counts", e.value)));
                    out.println(mapper.writeValueAsString(line));
                }
            }
        } finally {
            CaseRunner.deleteTree(stateDir);
        }
        out.flush();
    }
}
