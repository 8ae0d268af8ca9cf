package bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The Kafka Streams peer of bench/bench_peers.py: one KafkaStreams client, one stream thread, running one of
 * the three workloads that bench/peers/_common.py describes, with the same arguments as the Python runners.
 *
 * <p>Prints {@code STARTED t} right before {@code start()} and {@code RUNNING t} when the client first
 * reaches RUNNING (t = System.nanoTime() in seconds: CLOCK_MONOTONIC on Linux, Python's time.monotonic()).
 * Exits with status 1 when the client goes to ERROR.
 */
public final class KafkaStreamsPeer {
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final Pattern WHITESPACE = Pattern.compile("\\s+");

  private KafkaStreamsPeer() {}

  /** Writes JSON values from Jackson trees. */
  static final class JsonSerializer implements Serializer<JsonNode> {
    @Override
    public byte[] serialize(String topic, JsonNode data) {
      try {
        return data == null ? null : MAPPER.writeValueAsBytes(data);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  /** Reads JSON values into Jackson trees. */
  static final class JsonDeserializer implements Deserializer<JsonNode> {
    @Override
    public JsonNode deserialize(String topic, byte[] data) {
      try {
        return data == null ? null : MAPPER.readTree(data);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  /** Values that are JSON strings (the sentences). */
  static final class JsonStringDeserializer implements Deserializer<String> {
    @Override
    public String deserialize(String topic, byte[] data) {
      try {
        return data == null ? null : MAPPER.readValue(data, String.class);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  static Topology build(Map<String, String> a) {
    StreamsBuilder b = new StreamsBuilder();
    String workload = a.get("workload");
    long threshold = Long.parseLong(a.getOrDefault("threshold", "50"));
    Serde<String> strings = Serdes.String();
    Serde<JsonNode> json = Serdes.serdeFrom(new JsonSerializer(), new JsonDeserializer());
    switch (workload) {
      case "filter" -> b.stream(a.get("input"), Consumed.with(strings, json))
          .filter((k, v) -> v.get("amount").asLong() > threshold)
          .mapValues(v -> (JsonNode) ((ObjectNode) v).put("doubled", v.get("amount").asLong() * 2))
          .to(a.get("output"), Produced.with(strings, json));
      case "wordcount" -> b.stream(a.get("input"),
              Consumed.with(strings, Serdes.serdeFrom(new Serdes.StringSerde().serializer(),
                  new JsonStringDeserializer())))
          .flatMapValues(s -> Arrays.asList(WHITESPACE.split(s.strip())))
          .groupBy((k, w) -> w, Grouped.with("word", strings, strings))
          .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("word-counts")
              .withKeySerde(strings).withValueSerde(Serdes.Long()))
          .toStream()
          .mapValues(n -> Long.toString(n))  // a JSON number
          .to(a.get("output"), Produced.with(strings, strings));
      case "window" -> b.stream(a.get("input"), Consumed.with(strings, json))
          .mapValues(v -> v.get("amount").asLong())
          .groupByKey(Grouped.with(strings, Serdes.Long()))
          .windowedBy(TimeWindows.ofSizeAndGrace(
              Duration.ofMillis(Long.parseLong(a.get("window-ms"))),
              Duration.ofMillis(Long.parseLong(a.get("grace-ms")))))
          .reduce(Long::sum, Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("sums")
              .withKeySerde(strings).withValueSerde(Serdes.Long()))
          .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
          .toStream()
          .map((w, sum) -> {
            ObjectNode out = MAPPER.createObjectNode();
            out.put("start", w.window().start());
            out.put("sum", sum);
            return KeyValue.pair(w.key(), (JsonNode) out);
          })
          .to(a.get("output"), Produced.with(strings, json));
      default -> throw new IllegalArgumentException("unknown workload " + workload);
    }
    return b.build();
  }

  static Properties config(Map<String, String> a) throws IOException {
    String workload = a.get("workload");
    boolean window = workload.equals("window");
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, a.get("group"));
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    p.put(StreamsConfig.STATE_DIR_CONFIG, a.get("state-dir"));
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, a.getOrDefault("guarantee", "at_least_once"));
    // as kstream_nb's runner: the window (final results) with the default 10 MiB cache and 1 s commits,
    // the others with the cache off (word count writes every update) and the default 30 s commits
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, window ? 10L * 1024 * 1024 : 0L);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG,
        Long.parseLong(a.getOrDefault("commit-ms", window ? "1000" : "30000")));
    p.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG,
        a.getOrDefault("store", "in_memory").equals("rocksdb")
            ? BuiltInDslStoreSuppliers.RocksDBDslStoreSuppliers.class
            : BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class);
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    // the driver's shared consumer settings, already in Java client names
    JsonNode extra = MAPPER.readTree(a.getOrDefault("config", "{}"));
    for (Iterator<Map.Entry<String, JsonNode>> it = extra.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      p.put(StreamsConfig.consumerPrefix(e.getKey()), e.getValue().asText());
    }
    return p;
  }

  static Map<String, String> parseArgs(String[] argv) {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i < argv.length; i += 2) {
      if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
        throw new IllegalArgumentException("expected --name value pairs, got " + Arrays.toString(argv));
      }
      a.put(argv[i].substring(2), argv[i + 1]);
    }
    for (String required : new String[] {"workload", "bootstrap", "input", "output", "group", "state-dir"}) {
      if (!a.containsKey(required)) {
        throw new IllegalArgumentException("missing --" + required);
      }
    }
    return a;
  }

  private static String now() {
    return String.format(java.util.Locale.ROOT, "%.6f", System.nanoTime() / 1e9);
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = parseArgs(argv);
    KafkaStreams streams = new KafkaStreams(build(a), config(a));
    CountDownLatch failed = new CountDownLatch(1);
    AtomicBoolean running = new AtomicBoolean();
    streams.setStateListener((next, previous) -> {
      if (next == KafkaStreams.State.RUNNING && running.compareAndSet(false, true)) {
        System.out.println("RUNNING " + now());
        System.out.flush();
      } else if (next == KafkaStreams.State.ERROR) {
        failed.countDown();
      }
    });
    streams.setUncaughtExceptionHandler(e -> {
      System.err.println("stream thread failed: " + e);
      e.printStackTrace();
      return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(2))));
    System.out.println("STARTED " + now());
    System.out.flush();
    streams.start();
    failed.await();
    System.err.println("Kafka Streams client is in state ERROR");
    System.exit(1);
  }
}
