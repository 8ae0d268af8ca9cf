package kstream_nb.reference;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.BiFunction;
import java.util.function.BinaryOperator;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.stream.Stream;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Aggregator;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.BranchedKStream;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Initializer;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Merger;
import org.apache.kafka.streams.kstream.Predicate;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Reducer;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.ValueMapper;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.ValueAndTimestamp;
import org.apache.kafka.streams.state.VersionedKeyValueStore;
import org.apache.kafka.streams.state.VersionedRecord;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Runs one case (tests/reference/SPEC.md): builds its topology with the Kafka Streams DSL, pipes its inputs through a
 * TopologyTestDriver and collects the result line.
 */
@SuppressWarnings({"unchecked", "rawtypes"})
final class CaseRunner {

    static final String APPLICATION_ID = "ref";
    private static final JsonNodeFactory F = JsonNodeFactory.instance;
    /** Node fields that hold functions (checked against the vocabulary before anything is built). */
    private static final List<String> FUNCTION_FIELDS = List.of(
        "predicate", "mapper", "selector", "key_selector", "reducer", "adder", "subtractor", "initializer",
        "aggregator", "session_merger", "joiner", "extractor", "processor");
    private static final Set<String> OPS = Set.of(
        "stream", "table", "globalTable", "toStream", "toTable", "map", "mapValues", "flatMap", "flatMapValues",
        "selectKey", "filter", "filterNot", "merge", "split", "repartition", "groupByKey", "groupBy", "windowedBy",
        "count", "reduce", "aggregate", "suppress", "join", "leftJoin", "outerJoin", "fkJoin", "fkLeftJoin",
        "process", "through", "windowKeyToString", "capture", "to");

    /** What a topology node evaluated to, with the types the runner derives for it. */
    static final class Node {
        final String id;
        /** stream, table, global, grouped_stream, grouped_table, time_windowed, session_windowed */
        final String kind;
        final Object obj;
        final String keyType;
        final String valueType;
        /** the key is a {@code Windowed<K>} of these windows ("time" or "session"; size for time windows) */
        String windowKind;
        long windowSize;

        Node(final String id, final String kind, final Object obj, final String keyType, final String valueType) {
            this.id = id;
            this.kind = kind;
            this.obj = obj;
            this.keyType = keyType;
            this.valueType = valueType;
        }

        Node windowedLike(final Node other) {
            this.windowKind = other.windowKind;
            this.windowSize = other.windowSize;
            return this;
        }

        boolean windowedKey() {
            return windowKind != null && !kind.endsWith("_windowed");
        }
    }

    private final Vocabulary vocabulary;
    private final File stateRoot;
    private final boolean describe;
    private final boolean trace;

    private final Map<String, Node> nodes = new LinkedHashMap<>();
    /** topic -> {key type, value type} of the sources that read it (the input serdes) */
    private final Map<String, String[]> inputTopicTypes = new LinkedHashMap<>();
    /** topics the case names (sources, sinks, through): the others in the topology are internal */
    private final Set<String> caseTopics = new LinkedHashSet<>();
    /** non-windowed to-topic -> node ids writing it (read from the driver's output topics) */
    private final Map<String, List<String>> outputTopicNodes = new LinkedHashMap<>();
    private final Map<String, String[]> outputTopicTypes = new LinkedHashMap<>();
    /** node id -> what reached it (capture nodes, windowed to nodes) */
    private final Map<String, List<Processors.Seen>> captured = new LinkedHashMap<>();
    /** output node id -> records in the result format */
    private final Map<String, ArrayNode> outputs = new LinkedHashMap<>();
    /** store.name -> the key type of the store (for a versioned store's changelog keys) */
    private final Map<String, String> storeKeyTypes = new LinkedHashMap<>();

    CaseRunner(final Vocabulary vocabulary, final File stateRoot, final boolean describe, final boolean trace) {
        this.vocabulary = vocabulary;
        this.stateRoot = stateRoot;
        this.describe = describe;
        this.trace = trace;
    }

    // ------------------------------------------------------------------------------------------------ running

    ObjectNode run(final JsonNode c) {
        final ObjectNode result = F.objectNode();
        result.set("id", c.get("id") == null ? F.nullNode() : c.get("id"));
        try {
            checkVocabulary(c);
        } catch (final Vocabulary.Unsupported e) {
            result.put("unsupported", e.getMessage());
            return result;
        }
        final ObjectNode stores = F.objectNode();
        long dropped = 0;
        String error = null;
        JsonNode described = null;
        final ArrayNode traceSteps = F.arrayNode();
        final ArrayNode droppedInputs = F.arrayNode();

        Topology topology;
        final Properties props = config(c.path("config"));
        try {
            final StreamsBuilder builder = new StreamsBuilder();
            for (final JsonNode n : c.path("topology")) {
                build(builder, n);
            }
            topology = builder.build(props);
        } catch (final Vocabulary.Unsupported e) {
            final ObjectNode unsupported = F.objectNode();
            unsupported.set("id", result.get("id"));
            unsupported.put("unsupported", e.getMessage());
            return unsupported;
        } catch (final Throwable e) {
            topology = null;
            error = "build: " + message(e);
        }
        for (final JsonNode n : c.path("topology")) {
            if ("to".equals(n.path("op").asText()) || "capture".equals(n.path("op").asText())) {
                outputs.put(n.get("id").asText(), F.arrayNode());
            }
        }
        if (topology != null && describe) {
            try {
                described = describe(topology);
            } catch (final Throwable e) {
                described = F.textNode("describe failed: " + message(e));
            }
        }

        TopologyTestDriver driver = null;
        Path stateDir = null;
        if (topology != null) {
            try {
                stateDir = Files.createTempDirectory(stateRoot.toPath(), "case-");
                props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
                driver = new TopologyTestDriver(topology, props, Instant.EPOCH);
            } catch (final Throwable e) {
                error = "build: " + message(e);
            }
        }
        if (driver != null) {
            try {
                final Map<String, TestInputTopic<Object, Object>> inputs = new LinkedHashMap<>();
                for (final Map.Entry<String, String[]> e : inputTopicTypes.entrySet()) {
                    inputs.put(e.getKey(), driver.createInputTopic(e.getKey(),
                        serde(e.getValue()[0]).serializer(), serde(e.getValue()[1]).serializer()));
                }
                final Map<String, TestOutputTopic<Object, Object>> outs = new LinkedHashMap<>();
                for (final Map.Entry<String, String[]> e : outputTopicTypes.entrySet()) {
                    outs.put(e.getKey(), driver.createOutputTopic(e.getKey(),
                        serde(e.getValue()[0]).deserializer(), serde(e.getValue()[1]).deserializer()));
                }
                int index = 0;
                steps:
                for (final JsonNode step : c.path("steps")) {
                    for (final JsonNode record : step.path("input")) {
                        final double before = trace ? droppedTotal(driver) : 0;
                        try {
                            pipe(driver, inputs, record);
                        } catch (final Throwable e) {
                            error = "process: " + message(e);
                        }
                        drain(outs);
                        if (trace && droppedTotal(driver) > before) {
                            droppedInputs.add(index);
                        }
                        index++;
                        if (error != null) {
                            break steps;
                        }
                    }
                    if (trace) {
                        final ObjectNode t = F.objectNode();
                        final ObjectNode counts = t.putObject("output_counts");
                        for (final Map.Entry<String, ArrayNode> e : outputs.entrySet()) {
                            counts.put(e.getKey(), e.getValue().size() + pending(e.getKey()));
                        }
                        t.set("stores", dumpStores(driver, c));
                        traceSteps.add(t);
                    }
                }
            } catch (final Throwable e) {
                if (error == null) {
                    error = "process: " + message(e);
                }
            }
            try {
                stores.setAll(dumpStores(driver, c));
            } catch (final Throwable e) {
                if (error == null) {
                    error = "process: store dump failed: " + message(e);
                }
            }
            try {
                dropped = (long) droppedTotal(driver);
            } catch (final Throwable ignored) {
                // metrics unreadable after a crash: report 0
            }
            try {
                driver.close();
            } catch (final Throwable ignored) {
                // a driver whose task crashed may fail to close cleanly
            }
        }
        if (stateDir != null) {
            deleteTree(stateDir);
        }
        collectCaptured();

        final ObjectNode outs = result.putObject("outputs");
        outputs.forEach(outs::set);
        result.set("stores", stores);
        result.put("dropped_records_total", dropped);
        if (error == null) {
            result.putNull("error");
        } else {
            result.put("error", error);
        }
        if (described != null) {
            result.set("describe", described);
        }
        if (trace) {
            final ObjectNode t = result.putObject("trace");
            t.set("steps", traceSteps);
            t.set("dropped_inputs", droppedInputs);
        }
        return result;
    }

    private Properties config(final JsonNode config) {
        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, APPLICATION_ID);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        // the default persistent (RocksDB) stores, as the transcribed expectations assume; opened more cheaply
        props.put(StreamsConfig.ROCKSDB_CONFIG_SETTER_CLASS_CONFIG, FastRocksDb.class);
        // (TopologyTestDriver itself sets the internal emit intervals of left/outer-join null results and
        // on_window_close results to 0, FORMAT.md's runtime assumption: they are emitted as soon as stream time allows)
        if (!config.path("cache").asBoolean(false)) {
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        }
        if (config.has("statestore.cache.max.bytes")) {
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, config.get("statestore.cache.max.bytes").asLong());
        }
        return props;
    }

    private void pipe(final TopologyTestDriver driver, final Map<String, TestInputTopic<Object, Object>> inputs,
                      final JsonNode record) {
        final String topic = record.path("topic").asText();
        TestInputTopic<Object, Object> input = inputs.get(topic);
        String[] types = inputTopicTypes.get(topic);
        if (input == null) {
            types = new String[] {"string", "string"};
            input = driver.createInputTopic(topic, serde("string").serializer(), serde("string").serializer());
            inputs.put(topic, input);
        }
        final JsonNode ts = record.get("timestamp_ms");
        final long timestamp = ts == null || ts.isNull() ? 0L : ts.asLong();
        input.pipeInput(parse(record.get("key"), types[0]), parse(record.get("value"), types[1]), timestamp);
    }

    private void drain(final Map<String, TestOutputTopic<Object, Object>> outs) {
        for (final Map.Entry<String, TestOutputTopic<Object, Object>> e : outs.entrySet()) {
            final List<TestRecord<Object, Object>> records = e.getValue().readRecordsToList();
            for (final TestRecord<Object, Object> r : records) {
                for (final String id : outputTopicNodes.get(e.getKey())) {
                    outputs.get(id).add(recordJson(r.key(), r.value(), r.timestamp(), r.headers()));
                }
            }
        }
    }

    /** Records captured by processors but not yet moved to {@code outputs}. */
    private int pending(final String id) {
        final List<Processors.Seen> seen = captured.get(id);
        return seen == null ? 0 : seen.size() - movedCount.getOrDefault(id, 0);
    }

    private final Map<String, Integer> movedCount = new LinkedHashMap<>();

    private void collectCaptured() {
        for (final Map.Entry<String, List<Processors.Seen>> e : captured.entrySet()) {
            final ArrayNode out = outputs.get(e.getKey());
            for (final Processors.Seen s : e.getValue()) {
                out.add(recordJson(s.key, s.value, s.timestamp, s.headers));
            }
            movedCount.put(e.getKey(), e.getValue().size());
        }
    }

    private static double droppedTotal(final TopologyTestDriver driver) {
        double total = 0;
        for (final Map.Entry<MetricName, ? extends Metric> e : driver.metrics().entrySet()) {
            if ("dropped-records-total".equals(e.getKey().name()) && "stream-task-metrics".equals(e.getKey().group())) {
                final Object v = e.getValue().metricValue();
                if (v instanceof Number) {
                    total += ((Number) v).doubleValue();
                }
            }
        }
        return total;
    }

    // ------------------------------------------------------------------------------------------------ stores

    private ObjectNode dumpStores(final TopologyTestDriver driver, final JsonNode c) {
        final ObjectNode out = F.objectNode();
        for (final JsonNode n : c.path("topology")) {
            final String name = n.path("store").path("name").asText(null);
            if (name == null || out.has(name)) {
                continue;
            }
            out.set(name, dumpStore(driver, name, c));
        }
        return out;
    }

    private ArrayNode dumpStore(final TopologyTestDriver driver, final String name, final JsonNode c) {
        final List<ObjectNode> rows = new ArrayList<>();
        final VersionedKeyValueStore<Object, Object> versioned = driver.getVersionedKeyValueStore(name);
        final KeyValueStore<Object, ValueAndTimestamp<Object>> kv =
            versioned == null ? driver.getTimestampedKeyValueStore(name) : null;
        final WindowStore<Object, ValueAndTimestamp<Object>> window =
            versioned == null && kv == null ? driver.getTimestampedWindowStore(name) : null;
        final SessionStore<Object, Object> session =
            versioned == null && kv == null && window == null ? driver.getSessionStore(name) : null;
        if (versioned != null) {
            for (final Object key : versionedKeys(driver, name, c)) {
                final VersionedRecord<Object> latest = versioned.get(key);
                if (latest != null) {
                    rows.add(row(key, null, null, latest.value(), latest.timestamp()));
                }
            }
        } else if (kv != null) {
            try (KeyValueIterator<Object, ValueAndTimestamp<Object>> it = kv.all()) {
                while (it.hasNext()) {
                    final KeyValue<Object, ValueAndTimestamp<Object>> e = it.next();
                    rows.add(row(e.key, null, null, e.value == null ? null : e.value.value(),
                        e.value == null ? null : e.value.timestamp()));
                }
            }
        } else if (window != null) {
            try (KeyValueIterator<Windowed<Object>, ValueAndTimestamp<Object>> it = window.all()) {
                while (it.hasNext()) {
                    final KeyValue<Windowed<Object>, ValueAndTimestamp<Object>> e = it.next();
                    rows.add(row(e.key.key(), e.key.window().start(), e.key.window().end(),
                        e.value == null ? null : e.value.value(), e.value == null ? null : e.value.timestamp()));
                }
            }
        } else if (session != null) {
            try (KeyValueIterator<Windowed<Object>, Object> it = session.fetch(null, null)) {
                while (it.hasNext()) {
                    final KeyValue<Windowed<Object>, Object> e = it.next();
                    final ObjectNode r = F.objectNode();
                    r.set("key", value(e.key.key()));
                    r.put("window_start_ms", e.key.window().start());
                    r.put("window_end_ms", e.key.window().end());
                    r.set("value", value(e.value));
                    rows.add(r);
                }
            }
        } else {
            throw new IllegalStateException("no store named " + name);
        }
        rows.sort(ROW_ORDER);
        final ArrayNode out = F.arrayNode();
        rows.forEach(out::add);
        return out;
    }

    /** Keys seen on each versioned store's changelog so far (a changelog topic is read once). */
    private final Map<String, Set<Object>> versionedKeysSeen = new LinkedHashMap<>();

    /**
     * The keys a versioned store may hold (a versioned store cannot be iterated): the keys written to its changelog,
     * and every input key of the case.
     */
    private List<Object> versionedKeys(final TopologyTestDriver driver, final String name, final JsonNode c) {
        final String keyType = storeKeyTypes.getOrDefault(name, "string");
        final Set<Object> keys = versionedKeysSeen.computeIfAbsent(name, n -> new LinkedHashSet<>());
        try {
            final TestOutputTopic<Object, byte[]> changelog = driver.createOutputTopic(
                APPLICATION_ID + "-" + name + "-changelog", serde(keyType).deserializer(), new ByteArrayDeserializer());
            for (final TestRecord<Object, byte[]> r : changelog.readRecordsToList()) {
                keys.add(r.key());
            }
        } catch (final RuntimeException ignored) {
            // no changelog records: the input keys remain
        }
        final Set<Object> all = new LinkedHashSet<>(keys);
        for (final JsonNode step : c.path("steps")) {
            for (final JsonNode record : step.path("input")) {
                try {
                    final Object key = parse(record.get("key"), keyType);
                    if (key != null) {
                        all.add(key);
                    }
                } catch (final RuntimeException ignored) {
                    // a key of another type cannot be in this store
                }
            }
        }
        return new ArrayList<>(all);
    }

    private static ObjectNode row(final Object key, final Long start, final Long end, final Object v, final Long ts) {
        final ObjectNode r = F.objectNode();
        r.set("key", value(key));
        if (start != null) {
            r.put("window_start_ms", start);
            r.put("window_end_ms", end);
        }
        r.set("value", value(v));
        if (ts == null) {
            r.putNull("timestamp_ms");
        } else {
            r.put("timestamp_ms", ts);
        }
        return r;
    }

    /** (key, window_start_ms, window_end_ms), null first. */
    private static final Comparator<ObjectNode> ROW_ORDER = (a, b) -> {
        for (final String f : new String[] {"key", "window_start_ms", "window_end_ms"}) {
            final int cmp = compareJson(a.get(f), b.get(f));
            if (cmp != 0) {
                return cmp;
            }
        }
        return 0;
    };

    private static int compareJson(final JsonNode a, final JsonNode b) {
        final boolean an = a == null || a.isNull();
        final boolean bn = b == null || b.isNull();
        if (an || bn) {
            return an && bn ? 0 : an ? -1 : 1;
        }
        if (a.isNumber() && b.isNumber()) {
            return a.decimalValue().compareTo(b.decimalValue());
        }
        if (a.isNumber() != b.isNumber()) {
            return a.isNumber() ? -1 : 1;
        }
        return a.asText().compareTo(b.asText());
    }

    // ------------------------------------------------------------------------------------------------ build

    private void checkVocabulary(final JsonNode c) {
        for (final JsonNode n : c.path("topology")) {
            final String op = n.path("op").asText();
            if (!OPS.contains(op)) {
                throw new Vocabulary.Unsupported("unknown op " + op);
            }
            for (final String field : FUNCTION_FIELDS) {
                if (n.has(field)) {
                    final String text = n.get(field).asText();
                    if (!vocabulary.byName.containsKey(text) && !knownText(text)) {
                        throw new Vocabulary.Unsupported(n.path("id").asText() + "." + field
                            + ": function not in the vocabulary: " + text);
                    }
                }
            }
            for (final JsonNode branch : n.path("branches")) {
                final String text = branch.path("predicate").asText();
                if (!vocabulary.byName.containsKey(text) && !knownText(text)) {
                    throw new Vocabulary.Unsupported(n.path("id").asText() + "." + branch.path("id").asText()
                        + ": function not in the vocabulary: " + text);
                }
            }
        }
    }

    private boolean knownText(final String text) {
        try {
            for (final Functions.Role role : Functions.Role.values()) {
                try {
                    vocabulary.resolve(F.textNode(text), role, "");
                    return true;
                } catch (final Vocabulary.Unsupported e) {
                    if (e.getMessage().contains("not in the vocabulary")) {
                        return false;
                    }
                }
            }
        } catch (final RuntimeException e) {
            return false;
        }
        return true;
    }

    private String fnName(final JsonNode n, final String field, final Functions.Role role) {
        return vocabulary.resolve(n.get(field), role, n.path("id").asText() + "." + field).name;
    }

    private String returns(final String name, final String inputType) {
        final Vocabulary.Entry e = vocabulary.byName.get(name);
        final String r = e == null ? "same" : e.returns;
        return "same".equals(r) || "bool".equals(r) || "-".equals(r) ? inputType : r;
    }

    private static String keyReturns(final String name, final String inputKeyType) {
        final String r = Functions.KEY_RETURNS.getOrDefault(name, "string");
        return "same".equals(r) ? inputKeyType : r;
    }

    private Node src(final JsonNode n, final String field) {
        final String id = n.path(field).asText();
        final Node node = nodes.get(id);
        if (node == null) {
            throw new IllegalArgumentException(n.path("id").asText() + ": no node '" + id + "' to read from");
        }
        return node;
    }

    private static void expect(final Node node, final String op, final String... kinds) {
        for (final String k : kinds) {
            if (k.equals(node.kind)) {
                return;
            }
        }
        throw new IllegalArgumentException(op + " cannot read a " + node.kind + " (node " + node.id + ")");
    }

    private void put(final JsonNode n, final Node node) {
        fillSerdes(node);
        nodes.put(node.id, node);
    }

    private static java.lang.reflect.Field keySerdeField;
    private static java.lang.reflect.Field valueSerdeField;

    /**
     * Gives a KStream/KTable the serdes of its types where the DSL left them unknown (a table from mapValues or a
     * join without a store, a stream after mapValues...). Kafka would otherwise fall back to the default serdes of
     * the config for the operators that need one without taking a serde argument (suppress buffers, a foreign-key
     * join's hash of the left value): the serdes change no semantics, only what bytes internal state holds.
     */
    private static void fillSerdes(final Node node) {
        if (!(node.obj instanceof org.apache.kafka.streams.kstream.internals.AbstractStream)
            || node.kind.endsWith("_windowed") || node.valueType == null) {
            return;
        }
        try {
            if (keySerdeField == null) {
                final Class<?> c = org.apache.kafka.streams.kstream.internals.AbstractStream.class;
                final java.lang.reflect.Field k = c.getDeclaredField("keySerde");
                final java.lang.reflect.Field v = c.getDeclaredField("valueSerde");
                k.setAccessible(true);
                v.setAccessible(true);
                keySerdeField = k;
                valueSerdeField = v;
            }
            if (keySerdeField.get(node.obj) == null) {
                keySerdeField.set(node.obj, keySerde(node));
            }
            if (valueSerdeField.get(node.obj) == null) {
                valueSerdeField.set(node.obj, serde(node.valueType));
            }
        } catch (final ReflectiveOperationException e) {
            throw new IllegalStateException("cannot set the serdes of " + node.id, e);
        }
    }

    /** Explicit node value_type wins over the derived one. */
    private static String vt(final JsonNode n, final String derived) {
        return n.hasNonNull("value_type") ? n.get("value_type").asText() : derived;
    }

    private void build(final StreamsBuilder b, final JsonNode n) {
        final String id = n.path("id").asText();
        final String op = n.path("op").asText();
        switch (op) {
            case "stream": {
                final String kt = n.path("key_type").asText("string");
                final String vt = n.path("value_type").asText("string");
                final String topic = n.path("topic").asText();
                registerInput(topic, kt, vt);
                put(n, new Node(id, "stream", b.stream(topic, Consumed.with(serde(kt), serde(vt))), kt, vt));
                return;
            }
            case "table": {
                final String kt = n.path("key_type").asText("string");
                final String vt = n.path("value_type").asText("string");
                final String topic = n.path("topic").asText();
                registerInput(topic, kt, vt);
                final Materialized m = materialized(n, kt, vt, false);
                final Consumed consumed = Consumed.with(serde(kt), serde(vt));
                put(n, new Node(id, "table", m == null ? b.table(topic, consumed) : b.table(topic, consumed, m), kt, vt));
                return;
            }
            case "globalTable": {
                final String kt = n.path("key_type").asText("string");
                final String vt = n.path("value_type").asText("string");
                final String topic = n.path("topic").asText();
                registerInput(topic, kt, vt);
                final Materialized m = materialized(n, kt, vt, false);
                final Consumed consumed = Consumed.with(serde(kt), serde(vt));
                put(n, new Node(id, "global",
                    m == null ? b.globalTable(topic, consumed) : b.globalTable(topic, consumed, m), kt, vt));
                return;
            }
            case "toStream": {
                final Node s = src(n, "from");
                expect(s, op, "table");
                put(n, new Node(id, "stream", ((KTable) s.obj).toStream(), s.keyType, vt(n, s.valueType)).windowedLike(s));
                return;
            }
            case "toTable": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                final String vt = vt(n, s.valueType);
                final Materialized m = materialized(n, s.keyType, vt, true);
                put(n, new Node(id, "table", ((KStream) s.obj).toTable(m), s.keyType, vt).windowedLike(s));
                return;
            }
            case "map": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                final String f = fnName(n, "mapper", Functions.Role.KEY_VALUE_MAPPER);
                final BiFunction<Object, Object, KeyValue<Object, Object>> fn = Functions.KEY_VALUE_MAPPERS.get(f);
                final KeyValueMapper<Object, Object, KeyValue<Object, Object>> mapper = fn::apply;
                put(n, new Node(id, "stream", ((KStream<Object, Object>) s.obj).map(mapper),
                    keyReturns(f, s.keyType), vt(n, returns(f, s.valueType))));
                return;
            }
            case "mapValues": {
                final Node s = src(n, "from");
                expect(s, op, "stream", "table");
                final String f = fnName(n, "mapper", Functions.Role.VALUE_MAPPER);
                final Function<Object, Object> fn = Functions.VALUE_MAPPERS.get(f);
                final ValueMapper<Object, Object> mapper = fn::apply;
                final String vt = vt(n, returns(f, s.valueType));
                if (s.kind.equals("stream")) {
                    put(n, new Node(id, "stream", ((KStream<Object, Object>) s.obj).mapValues(mapper), s.keyType, vt)
                        .windowedLike(s));
                } else {
                    final Materialized m = materialized(n, s.keyType, vt, false);
                    final KTable<Object, Object> t = (KTable<Object, Object>) s.obj;
                    put(n, new Node(id, "table", m == null ? t.mapValues(mapper) : t.mapValues(mapper, m), s.keyType, vt)
                        .windowedLike(s));
                }
                return;
            }
            case "filter":
            case "filterNot": {
                final Node s = src(n, "from");
                expect(s, op, "stream", "table");
                final String f = fnName(n, "predicate", Functions.Role.PREDICATE);
                final BiFunction<Object, Object, Boolean> fn = Functions.PREDICATES.get(f);
                final Predicate<Object, Object> p = fn::apply;
                final boolean not = op.equals("filterNot");
                final String vt = vt(n, s.valueType);
                if (s.kind.equals("stream")) {
                    final KStream<Object, Object> st = (KStream<Object, Object>) s.obj;
                    put(n, new Node(id, "stream", not ? st.filterNot(p) : st.filter(p), s.keyType, vt).windowedLike(s));
                } else {
                    final Materialized m = materialized(n, s.keyType, vt, false);
                    final KTable<Object, Object> t = (KTable<Object, Object>) s.obj;
                    final KTable<Object, Object> r = m == null
                        ? (not ? t.filterNot(p) : t.filter(p))
                        : (not ? t.filterNot(p, m) : t.filter(p, m));
                    put(n, new Node(id, "table", r, s.keyType, vt).windowedLike(s));
                }
                return;
            }
            case "flatMapValues": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                final String f = fnName(n, "mapper", Functions.Role.FLAT_VALUE_MAPPER);
                final Function<Object, List<Object>> fn = Functions.FLAT_VALUE_MAPPERS.get(f);
                final ValueMapper<Object, Iterable<Object>> mapper = fn::apply;
                put(n, new Node(id, "stream", ((KStream<Object, Object>) s.obj).flatMapValues(mapper), s.keyType,
                    vt(n, returns(f, s.valueType))).windowedLike(s));
                return;
            }
            case "flatMap": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                final String f = fnName(n, "mapper", Functions.Role.FLAT_KEY_VALUE_MAPPER);
                final BiFunction<Object, Object, List<KeyValue<Object, Object>>> fn = Functions.FLAT_KEY_VALUE_MAPPERS.get(f);
                final KeyValueMapper<Object, Object, Iterable<KeyValue<Object, Object>>> mapper = fn::apply;
                put(n, new Node(id, "stream", ((KStream<Object, Object>) s.obj).flatMap(mapper),
                    keyReturns(f, s.keyType), vt(n, returns(f, s.valueType))));
                return;
            }
            case "selectKey": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                final String field = n.has("mapper") ? "mapper" : n.has("selector") ? "selector" : "key_selector";
                final String f = fnName(n, field, Functions.Role.KEY_SELECTOR);
                final BiFunction<Object, Object, Object> fn = Functions.KEY_SELECTORS.get(f);
                final KeyValueMapper<Object, Object, Object> mapper = fn::apply;
                put(n, new Node(id, "stream", ((KStream<Object, Object>) s.obj).selectKey(mapper),
                    keyReturns(f, s.keyType), vt(n, s.valueType)));
                return;
            }
            case "merge": {
                final List<Node> ins = new ArrayList<>();
                for (final JsonNode i : n.path("inputs")) {
                    final Node in = nodes.get(i.asText());
                    if (in == null) {
                        throw new IllegalArgumentException(id + ": no node '" + i.asText() + "' to merge");
                    }
                    expect(in, op, "stream");
                    ins.add(in);
                }
                KStream<Object, Object> merged = (KStream<Object, Object>) ins.get(0).obj;
                for (final Node other : ins.subList(1, ins.size())) {
                    merged = merged.merge((KStream<Object, Object>) other.obj);
                }
                put(n, new Node(id, "stream", merged, ins.get(0).keyType, vt(n, ins.get(0).valueType))
                    .windowedLike(ins.get(0)));
                return;
            }
            case "split": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                BranchedKStream<Object, Object> split = ((KStream<Object, Object>) s.obj).split();
                final Map<String, KStream<Object, Object>> branches = new LinkedHashMap<>();
                for (final JsonNode branch : n.path("branches")) {
                    final String bid = branch.path("id").asText();
                    final String f = vocabulary.resolve(branch.get("predicate"), Functions.Role.PREDICATE,
                        id + "." + bid).name;
                    final BiFunction<Object, Object, Boolean> fn = Functions.PREDICATES.get(f);
                    final Predicate<Object, Object> p = fn::apply;
                    split = split.branch(p, Branched.withConsumer(ks -> branches.put(bid, ks), bid));
                }
                final String dflt = n.path("default_branch").asText(null);
                if (dflt != null && !n.get("default_branch").isNull()) {
                    split.defaultBranch(Branched.withConsumer(ks -> branches.put(dflt, ks), dflt));
                } else {
                    split.noDefaultBranch();
                }
                for (final Map.Entry<String, KStream<Object, Object>> e : branches.entrySet()) {
                    final Node branch = new Node(e.getKey(), "stream", e.getValue(), s.keyType, s.valueType).windowedLike(s);
                    fillSerdes(branch);
                    nodes.put(e.getKey(), branch);
                }
                return;
            }
            case "repartition": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                final String vt = vt(n, s.valueType);
                put(n, new Node(id, "stream", ((KStream) s.obj).repartition(
                    Repartitioned.with(keySerde(s), serde(vt))), s.keyType, vt).windowedLike(s));
                return;
            }
            case "groupByKey": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                final String vt = vt(n, s.valueType);
                put(n, new Node(id, "grouped_stream", ((KStream) s.obj).groupByKey(Grouped.with(serde(s.keyType), serde(vt))),
                    s.keyType, vt));
                return;
            }
            case "groupBy": {
                final Node s = src(n, "from");
                expect(s, op, "stream", "table");
                if (s.kind.equals("stream")) {
                    final String field = n.has("selector") ? "selector" : n.has("key_selector") ? "key_selector" : "mapper";
                    final String f = fnName(n, field, Functions.Role.KEY_SELECTOR);
                    final BiFunction<Object, Object, Object> fn = Functions.KEY_SELECTORS.get(f);
                    final KeyValueMapper<Object, Object, Object> selector = fn::apply;
                    final String kt = keyReturns(f, s.keyType);
                    final String vt = vt(n, s.valueType);
                    put(n, new Node(id, "grouped_stream",
                        ((KStream<Object, Object>) s.obj).groupBy(selector, Grouped.with(serde(kt), serde(vt))), kt, vt));
                } else {
                    final String field = n.has("mapper") ? "mapper" : "selector";
                    final String f = fnName(n, field, Functions.Role.KEY_VALUE_MAPPER);
                    final BiFunction<Object, Object, KeyValue<Object, Object>> fn = Functions.KEY_VALUE_MAPPERS.get(f);
                    final KeyValueMapper<Object, Object, KeyValue<Object, Object>> mapper = fn::apply;
                    final String kt = keyReturns(f, s.keyType);
                    final String vt = vt(n, returns(f, s.valueType));
                    put(n, new Node(id, "grouped_table",
                        ((KTable<Object, Object>) s.obj).groupBy(mapper, Grouped.with(serde(kt), serde(vt))), kt, vt));
                }
                return;
            }
            case "windowedBy": {
                final Node s = src(n, "from");
                expect(s, op, "grouped_stream");
                final KGroupedStream g = (KGroupedStream) s.obj;
                final Node w;
                if (n.has("session")) {
                    final JsonNode spec = n.get("session");
                    SessionWindowedKStream sw = g.windowedBy(SessionWindows.ofInactivityGapAndGrace(
                        Duration.ofMillis(spec.path("inactivity_gap_ms").asLong()), Duration.ofMillis(spec.path("grace_ms").asLong(0))));
                    if (n.hasNonNull("emit_strategy")) {
                        sw = sw.emitStrategy(emitStrategy(n.get("emit_strategy").asText()));
                    }
                    w = new Node(id, "session_windowed", sw, s.keyType, vt(n, s.valueType));
                    w.windowKind = "session";
                } else {
                    TimeWindowedKStream tw;
                    final long size;
                    if (n.has("sliding")) {
                        final JsonNode spec = n.get("sliding");
                        size = spec.path("time_difference_ms").asLong();
                        tw = g.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(size),
                            Duration.ofMillis(spec.path("grace_ms").asLong(0))));
                    } else {
                        final JsonNode spec = n.has("tumbling") ? n.get("tumbling") : n.get("hopping");
                        if (spec == null) {
                            throw new IllegalArgumentException(id + ": windowedBy needs tumbling, hopping, sliding or session");
                        }
                        size = spec.path("size_ms").asLong();
                        TimeWindows windows = TimeWindows.ofSizeAndGrace(Duration.ofMillis(size),
                            Duration.ofMillis(spec.path("grace_ms").asLong(0)));
                        if (spec.has("advance_ms")) {
                            windows = windows.advanceBy(Duration.ofMillis(spec.get("advance_ms").asLong()));
                        }
                        tw = g.windowedBy(windows);
                    }
                    if (n.hasNonNull("emit_strategy")) {
                        tw = tw.emitStrategy(emitStrategy(n.get("emit_strategy").asText()));
                    }
                    w = new Node(id, "time_windowed", tw, s.keyType, vt(n, s.valueType));
                    w.windowKind = "time";
                    w.windowSize = size;
                }
                put(n, w);
                return;
            }
            case "count":
            case "reduce":
            case "aggregate":
                put(n, aggregate(n, op));
                return;
            case "suppress": {
                final Node s = src(n, "from");
                expect(s, op, "table");
                final JsonNode buffer = n.path("buffer");
                final Suppressed suppressed;
                final String until = n.path("until").asText();
                if (until.equals("window_closes")) {
                    suppressed = Suppressed.untilWindowCloses((Suppressed.StrictBufferConfig) bufferConfig(buffer));
                } else if (until.equals("time_limit")) {
                    suppressed = Suppressed.untilTimeLimit(Duration.ofMillis(n.path("time_limit_ms").asLong()),
                        bufferConfig(buffer));
                } else {
                    throw new IllegalArgumentException(id + ": unknown suppress until " + until);
                }
                put(n, new Node(id, "table", ((KTable) s.obj).suppress(suppressed), s.keyType, vt(n, s.valueType))
                    .windowedLike(s));
                return;
            }
            case "join":
            case "leftJoin":
            case "outerJoin":
                put(n, join(n, op));
                return;
            case "fkJoin":
            case "fkLeftJoin": {
                final Node l = src(n, "left");
                final Node r = src(n, "right");
                expect(l, op, "table");
                expect(r, op, "table");
                final String ef = fnName(n, "extractor", Functions.Role.FK_EXTRACTOR);
                final Function<Object, Object> extractor = Functions.VALUE_MAPPERS.get(ef)::apply;
                final String jf = fnName(n, "joiner", Functions.Role.JOINER);
                final BinaryOperator<Object> jfn = Functions.JOINERS.get(jf);
                final ValueJoiner<Object, Object, Object> joiner = jfn::apply;
                final String vt = vt(n, returns(jf, l.valueType));
                // the join's result store exists with or without a store field: Materialized.with gives its serdes
                final Materialized m = materialized(n, l.keyType, vt, true);
                final KTable<Object, Object> lt = (KTable<Object, Object>) l.obj;
                final KTable<Object, Object> rt = (KTable<Object, Object>) r.obj;
                final KTable<Object, Object> joined;
                if (op.equals("fkJoin")) {
                    joined = lt.join(rt, extractor, joiner, m);
                } else {
                    joined = lt.leftJoin(rt, extractor, joiner, m);
                }
                put(n, new Node(id, "table", joined, l.keyType, vt));
                return;
            }
            case "process": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                final String f = fnName(n, "processor", Functions.Role.PROCESSOR);
                if (!f.equals("running_count")) {
                    throw new Vocabulary.Unsupported(id + ": unknown processor " + f);
                }
                final String storeName = "running-count-" + id;
                b.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(storeName),
                    serde(s.keyType), Serdes.Long()));
                final KStream out = ((KStream<Object, Object>) s.obj).process(
                    () -> new Processors.RunningCount(storeName), storeName);
                put(n, new Node(id, "stream", out, s.keyType, vt(n, returns(f, "long"))).windowedLike(s));
                return;
            }
            case "through": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                final String topic = n.path("topic").asText();
                caseTopics.add(topic);
                final String vt = vt(n, s.valueType);
                ((KStream) s.obj).to(topic, Produced.with(keySerde(s), serde(vt)));
                if (!s.windowedKey()) {
                    registerInput(topic, s.keyType, vt);
                }
                put(n, new Node(id, "stream", b.stream(topic, Consumed.with(keySerde(s), serde(vt))), s.keyType, vt)
                    .windowedLike(s));
                return;
            }
            case "windowKeyToString": {
                final Node s = src(n, "from");
                expect(s, op, "stream");
                final KeyValueMapper<Object, Object, KeyValue<Object, Object>> mapper = (wk, v) -> {
                    final Windowed<Object> w = (Windowed<Object>) wk;
                    return KeyValue.pair(w.key() + "@" + w.window().start() + "/" + w.window().end(), v);
                };
                put(n, new Node(id, "stream", ((KStream<Object, Object>) s.obj).map(mapper), "string", vt(n, s.valueType)));
                return;
            }
            case "capture": {
                final Node s = src(n, "from");
                expect(s, op, "stream", "table");
                final KStream<Object, Object> st = s.kind.equals("table")
                    ? ((KTable<Object, Object>) s.obj).toStream() : (KStream<Object, Object>) s.obj;
                final List<Processors.Seen> sink = new ArrayList<>();
                captured.put(id, sink);
                st.process(() -> new Processors.Capture(sink));
                return;
            }
            case "to": {
                final Node s = src(n, "from");
                expect(s, op, "stream", "table");
                final KStream<Object, Object> st = s.kind.equals("table")
                    ? ((KTable<Object, Object>) s.obj).toStream() : (KStream<Object, Object>) s.obj;
                final String topic = n.path("topic").asText();
                caseTopics.add(topic);
                final String vt = vt(n, s.valueType);
                st.to(topic, Produced.with((Serde<Object>) keySerde(s), (Serde<Object>) serde(vt)));
                if (s.windowedKey()) {
                    // a windowed key is reported with its window: observe what reaches the sink with a processor
                    final List<Processors.Seen> sink = new ArrayList<>();
                    captured.put(id, sink);
                    st.process(() -> new Processors.Capture(sink));
                } else {
                    outputTopicNodes.computeIfAbsent(topic, t -> new ArrayList<>()).add(id);
                    outputTopicTypes.putIfAbsent(topic, new String[] {s.keyType, vt});
                }
                return;
            }
            default:
                throw new Vocabulary.Unsupported("unknown op " + op);
        }
    }

    private void registerInput(final String topic, final String kt, final String vt) {
        caseTopics.add(topic);
        inputTopicTypes.putIfAbsent(topic, new String[] {kt, vt});
    }

    private Node aggregate(final JsonNode n, final String op) {
        final String id = n.path("id").asText();
        final Node s = src(n, "from");
        expect(s, op, "grouped_stream", "grouped_table", "time_windowed", "session_windowed");
        final String vt;
        switch (op) {
            case "count":
                vt = vt(n, "long");
                break;
            case "reduce":
                vt = vt(n, s.valueType);
                break;
            default:
                vt = vt(n, returns(fnName(n, "initializer", Functions.Role.INITIALIZER), s.valueType));
        }
        final Materialized m = materialized(n, s.keyType, vt, true);
        final String storeName = n.path("store").path("name").asText(null);
        if (storeName != null) {
            storeKeyTypes.put(storeName, s.keyType);
        }
        final Object out;
        switch (op) {
            case "count":
                if (s.kind.equals("grouped_stream")) {
                    out = ((KGroupedStream) s.obj).count(m);
                } else if (s.kind.equals("grouped_table")) {
                    out = ((KGroupedTable) s.obj).count(m);
                } else if (s.kind.equals("time_windowed")) {
                    out = ((TimeWindowedKStream) s.obj).count(m);
                } else {
                    out = ((SessionWindowedKStream) s.obj).count(m);
                }
                break;
            case "reduce": {
                if (s.kind.equals("grouped_table")) {
                    final Reducer<Object> adder = reducer(n, "adder");
                    final Reducer<Object> subtractor = reducer(n, "subtractor");
                    out = ((KGroupedTable) s.obj).reduce(adder, subtractor, m);
                } else {
                    final Reducer<Object> reducer = reducer(n, n.has("reducer") ? "reducer" : "adder");
                    if (s.kind.equals("grouped_stream")) {
                        out = ((KGroupedStream) s.obj).reduce(reducer, m);
                    } else if (s.kind.equals("time_windowed")) {
                        out = ((TimeWindowedKStream) s.obj).reduce(reducer, m);
                    } else {
                        out = ((SessionWindowedKStream) s.obj).reduce(reducer, m);
                    }
                }
                break;
            }
            default: {
                final Supplier<Object> init = Functions.INITIALIZERS.get(fnName(n, "initializer", Functions.Role.INITIALIZER));
                final Initializer<Object> initializer = init::get;
                final Aggregator<Object, Object, Object> aggregator = aggregator(n, n.has("aggregator") ? "aggregator" : "adder");
                if (s.kind.equals("grouped_table")) {
                    out = ((KGroupedTable) s.obj).aggregate(initializer, aggregator, aggregator(n, "subtractor"), m);
                } else if (s.kind.equals("grouped_stream")) {
                    out = ((KGroupedStream) s.obj).aggregate(initializer, aggregator, m);
                } else if (s.kind.equals("time_windowed")) {
                    out = ((TimeWindowedKStream) s.obj).aggregate(initializer, aggregator, m);
                } else {
                    final Functions.Tri merge = Functions.SESSION_MERGERS.get(
                        fnName(n, "session_merger", Functions.Role.SESSION_MERGER));
                    final Merger<Object, Object> merger = merge::apply;
                    out = ((SessionWindowedKStream) s.obj).aggregate(initializer, aggregator, merger, m);
                }
            }
        }
        final Node node = new Node(id, "table", out, s.keyType, vt);
        if (s.kind.endsWith("_windowed")) {
            node.windowedLike(s);
        }
        return node;
    }

    private Reducer<Object> reducer(final JsonNode n, final String field) {
        final BinaryOperator<Object> fn = Functions.REDUCERS.get(fnName(n, field, Functions.Role.REDUCER));
        return fn::apply;
    }

    private Aggregator<Object, Object, Object> aggregator(final JsonNode n, final String field) {
        final Functions.Tri fn = Functions.AGGREGATORS.get(fnName(n, field, Functions.Role.AGGREGATOR));
        return fn::apply;
    }

    private Node join(final JsonNode n, final String op) {
        final String id = n.path("id").asText();
        final Node l = src(n, "left");
        final Node r = src(n, "right");
        final String jf = fnName(n, "joiner", Functions.Role.JOINER);
        final BinaryOperator<Object> jfn = Functions.JOINERS.get(jf);
        final ValueJoiner<Object, Object, Object> joiner = jfn::apply;
        final String vt = vt(n, returns(jf, l.valueType));
        if (l.kind.equals("stream") && r.kind.equals("stream")) {
            final JsonNode w = n.get("windows");
            if (w == null) {
                throw new IllegalArgumentException(id + ": a stream-stream join needs windows");
            }
            final long before = w.path("before_ms").asLong();
            final long after = w.path("after_ms").asLong();
            final long grace = w.path("grace_ms").asLong(0);
            final long d = Math.max(Math.abs(before), Math.abs(after));
            JoinWindows windows = w.path("legacy_eager_non_joined").asBoolean(false)
                ? JoinWindows.of(Duration.ofMillis(d)).grace(Duration.ofMillis(grace))
                : JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(d), Duration.ofMillis(grace));
            windows = windows.before(Duration.ofMillis(before)).after(Duration.ofMillis(after));
            final StreamJoined joined = StreamJoined.with(serde(l.keyType), serde(l.valueType), serde(r.valueType));
            final KStream<Object, Object> ls = (KStream<Object, Object>) l.obj;
            final KStream<Object, Object> rs = (KStream<Object, Object>) r.obj;
            final KStream out;
            switch (op) {
                case "join": out = ls.join(rs, joiner, windows, joined); break;
                case "leftJoin": out = ls.leftJoin(rs, joiner, windows, joined); break;
                default: out = ls.outerJoin(rs, joiner, windows, joined);
            }
            return new Node(id, "stream", out, l.keyType, vt);
        }
        if (l.kind.equals("stream") && r.kind.equals("table")) {
            Joined joined = Joined.with(serde(l.keyType), serde(l.valueType), serde(r.valueType));
            if (n.hasNonNull("grace_ms")) {
                joined = joined.withGracePeriod(Duration.ofMillis(n.get("grace_ms").asLong()));
            }
            final KStream<Object, Object> ls = (KStream<Object, Object>) l.obj;
            final KTable<Object, Object> rt = (KTable<Object, Object>) r.obj;
            final KStream out;
            switch (op) {
                case "join": out = ls.join(rt, joiner, joined); break;
                case "leftJoin": out = ls.leftJoin(rt, joiner, joined); break;
                default: throw new IllegalArgumentException("KStream has no outerJoin with a KTable");
            }
            return new Node(id, "stream", out, l.keyType, vt);
        }
        if (l.kind.equals("stream") && r.kind.equals("global")) {
            final String kf = fnName(n, "key_selector", Functions.Role.KEY_SELECTOR);
            final BiFunction<Object, Object, Object> kfn = Functions.KEY_SELECTORS.get(kf);
            final KeyValueMapper<Object, Object, Object> selector = kfn::apply;
            final KStream<Object, Object> ls = (KStream<Object, Object>) l.obj;
            final GlobalKTable<Object, Object> g = (GlobalKTable<Object, Object>) r.obj;
            final KStream out;
            switch (op) {
                case "join": out = ls.join(g, selector, joiner); break;
                case "leftJoin": out = ls.leftJoin(g, selector, joiner); break;
                default: throw new IllegalArgumentException("KStream has no outerJoin with a GlobalKTable");
            }
            return new Node(id, "stream", out, l.keyType, vt);
        }
        if (l.kind.equals("table") && r.kind.equals("table")) {
            final Materialized m = materialized(n, l.keyType, vt, false);
            final KTable<Object, Object> lt = (KTable<Object, Object>) l.obj;
            final KTable<Object, Object> rt = (KTable<Object, Object>) r.obj;
            final KTable out;
            switch (op) {
                case "join": out = m == null ? lt.join(rt, joiner) : lt.join(rt, joiner, m); break;
                case "leftJoin": out = m == null ? lt.leftJoin(rt, joiner) : lt.leftJoin(rt, joiner, m); break;
                default: out = m == null ? lt.outerJoin(rt, joiner) : lt.outerJoin(rt, joiner, m);
            }
            return new Node(id, "table", out, l.keyType, vt);
        }
        throw new IllegalArgumentException(op + " of a " + l.kind + " with a " + r.kind + " does not exist in Kafka Streams");
    }

    /**
     * The node's {@code store} as a Materialized (null when the node has no store and {@code always} is false):
     * named by store.name, versioned by versioned_history_retention_ms, caching and retention as given.
     */
    private Materialized materialized(final JsonNode n, final String keyType, final String valueType, final boolean always) {
        final JsonNode store = n.get("store");
        if ((store == null || store.isNull()) && !always) {
            return null;
        }
        final String name = store == null ? null : store.path("name").asText(null);
        Materialized m;
        if (store != null && store.hasNonNull("versioned_history_retention_ms")) {
            final String storeName = name != null ? name : n.path("id").asText();
            m = Materialized.as(Stores.persistentVersionedKeyValueStore(storeName,
                Duration.ofMillis(store.get("versioned_history_retention_ms").asLong())));
        } else if (name != null) {
            m = Materialized.as(name);
        } else {
            m = Materialized.with(serde(keyType), serde(valueType));
        }
        m = m.withKeySerde(serde(keyType)).withValueSerde(serde(valueType));
        if (store != null && store.has("caching")) {
            m = store.get("caching").asBoolean() ? m.withCachingEnabled() : m.withCachingDisabled();
        }
        if (store != null && store.hasNonNull("retention_ms")) {
            m = m.withRetention(Duration.ofMillis(store.get("retention_ms").asLong()));
        }
        if (name != null) {
            storeKeyTypes.putIfAbsent(name, keyType);
        }
        return m;
    }

    private static Suppressed.BufferConfig bufferConfig(final JsonNode spec) {
        if (spec.path("unbounded").asBoolean(false)) {
            return Suppressed.BufferConfig.unbounded();
        }
        Suppressed.BufferConfig config;
        if (spec.hasNonNull("max_records")) {
            config = Suppressed.BufferConfig.maxRecords(spec.get("max_records").asLong());
            if (spec.hasNonNull("max_bytes")) {
                config = config.withMaxBytes(spec.get("max_bytes").asLong());
            }
        } else if (spec.hasNonNull("max_bytes")) {
            config = Suppressed.BufferConfig.maxBytes(spec.get("max_bytes").asLong());
        } else {
            config = Suppressed.BufferConfig.unbounded();
        }
        return "emit_early".equals(spec.path("on_full").asText()) ? config.emitEarlyWhenFull() : config.shutDownWhenFull();
    }

    private static EmitStrategy emitStrategy(final String name) {
        switch (name) {
            case "on_window_close": return EmitStrategy.onWindowClose();
            case "on_window_update": return EmitStrategy.onWindowUpdate();
            default: throw new IllegalArgumentException("unknown emit strategy " + name);
        }
    }

    // ------------------------------------------------------------------------------------------------ types

    static Serde serde(final String type) {
        switch (type) {
            case "string": return Serdes.String();
            case "long": return Serdes.Long();
            case "int": return Serdes.Integer();
            case "double": return Serdes.Double();
            default: throw new Vocabulary.Unsupported("unknown type " + type);
        }
    }

    private static Class<?> typeClass(final String type) {
        switch (type) {
            case "string": return String.class;
            case "long": return Long.class;
            case "int": return Integer.class;
            case "double": return Double.class;
            default: throw new Vocabulary.Unsupported("unknown type " + type);
        }
    }

    /** A node's key serde: its key type, wrapped as Windowed when its keys are windowed. */
    private static Serde keySerde(final Node node) {
        if (!node.windowedKey()) {
            return serde(node.keyType);
        }
        return node.windowKind.equals("session")
            ? WindowedSerdes.sessionWindowedSerdeFrom(typeClass(node.keyType))
            : WindowedSerdes.timeWindowedSerdeFrom(typeClass(node.keyType), node.windowSize);
    }

    /** A JSON key or value as the Java object of {@code type}. */
    static Object parse(final JsonNode v, final String type) {
        if (v == null || v.isNull()) {
            return null;
        }
        switch (type) {
            case "string": return v.isTextual() ? v.asText() : v.toString();
            case "long": return v.isTextual() ? Long.parseLong(v.asText()) : v.asLong();
            case "int": return v.isTextual() ? Integer.parseInt(v.asText()) : v.asInt();
            case "double": return v.isTextual() ? Double.parseDouble(v.asText()) : v.asDouble();
            default: throw new Vocabulary.Unsupported("unknown type " + type);
        }
    }

    static JsonNode value(final Object v) {
        if (v == null) {
            return F.nullNode();
        }
        if (v instanceof String) {
            return F.textNode((String) v);
        }
        if (v instanceof Long) {
            return F.numberNode((Long) v);
        }
        if (v instanceof Integer) {
            return F.numberNode((Integer) v);
        }
        if (v instanceof Double) {
            return F.numberNode((Double) v);
        }
        if (v instanceof Boolean) {
            return F.booleanNode((Boolean) v);
        }
        return F.textNode(String.valueOf(v));
    }

    private static ObjectNode recordJson(final Object key, final Object v, final long timestamp, final Headers headers) {
        final ObjectNode r = F.objectNode();
        if (key instanceof Windowed) {
            final Windowed<?> w = (Windowed<?>) key;
            r.set("key", value(w.key()));
            r.put("window_start_ms", w.window().start());
            r.put("window_end_ms", w.window().end());
        } else {
            r.set("key", value(key));
        }
        r.set("value", value(v));
        r.put("timestamp_ms", timestamp);
        if (headers != null) {
            final Header[] all = headers.toArray();
            if (all.length > 0) {
                final ArrayNode hs = r.putArray("headers");
                for (final Header h : all) {
                    final ArrayNode pair = hs.addArray();
                    pair.add(h.key());
                    if (h.value() == null) {
                        pair.addNull();
                    } else {
                        pair.add(new String(h.value(), StandardCharsets.UTF_8));
                    }
                }
            }
        }
        return r;
    }

    // ------------------------------------------------------------------------------------------------ describe

    private JsonNode describe(final Topology topology) {
        final TopologyDescription d = topology.describe();
        final ObjectNode out = F.objectNode();
        final ArrayNode subs = out.putArray("subtopologies");
        final Set<String> internal = new TreeSet<>();
        final List<TopologyDescription.Subtopology> sorted = new ArrayList<>(d.subtopologies());
        sorted.sort(Comparator.comparingInt(TopologyDescription.Subtopology::id));
        for (final TopologyDescription.Subtopology s : sorted) {
            final ObjectNode so = subs.addObject();
            so.put("id", s.id());
            so.set("nodes", describeNodes(s.nodes(), internal, true));
        }
        final ArrayNode globals = out.putArray("global_stores");
        final List<TopologyDescription.GlobalStore> gs = new ArrayList<>(d.globalStores());
        gs.sort(Comparator.comparingInt(TopologyDescription.GlobalStore::id));
        for (final TopologyDescription.GlobalStore g : gs) {
            final ObjectNode go = globals.addObject();
            go.put("id", g.id());
            go.set("nodes", describeNodes(List.of(g.source(), g.processor()), internal, false));
        }
        final ArrayNode topics = out.putArray("internal_topics");
        internal.forEach(topics::add);
        return out;
    }

    private ArrayNode describeNodes(final java.util.Collection<? extends TopologyDescription.Node> nodes,
                                    final Set<String> internal, final boolean logged) {
        final List<TopologyDescription.Node> sorted = new ArrayList<>(nodes);
        sorted.sort(Comparator.comparing(TopologyDescription.Node::name));
        final ArrayNode out = F.arrayNode();
        for (final TopologyDescription.Node node : sorted) {
            final ObjectNode o = out.addObject();
            o.put("name", node.name());
            final ArrayNode topics = F.arrayNode();
            final ArrayNode stores = F.arrayNode();
            if (node instanceof TopologyDescription.Source) {
                o.put("kind", "source");
                final TopologyDescription.Source src = (TopologyDescription.Source) node;
                final Set<String> ts = src.topicSet() == null ? Set.of() : new TreeSet<>(src.topicSet());
                ts.forEach(topics::add);
                if (src.topicPattern() != null) {
                    topics.add(src.topicPattern().pattern());
                }
                for (final String t : ts) {
                    if (logged && !caseTopics.contains(t)) {
                        internal.add(APPLICATION_ID + "-" + t);
                    }
                }
            } else if (node instanceof TopologyDescription.Sink) {
                o.put("kind", "sink");
                final TopologyDescription.Sink sink = (TopologyDescription.Sink) node;
                if (sink.topic() != null) {
                    topics.add(sink.topic());
                }
            } else {
                o.put("kind", "processor");
                final TopologyDescription.Processor p = (TopologyDescription.Processor) node;
                final Set<String> ss = new TreeSet<>(p.stores());
                ss.forEach(stores::add);
                if (logged) {
                    for (final String st : ss) {
                        internal.add(APPLICATION_ID + "-" + st + "-changelog");
                    }
                }
            }
            o.set("topics", topics);
            o.set("stores", stores);
            final ArrayNode successors = o.putArray("successors");
            final Set<String> names = new TreeSet<>();
            for (final TopologyDescription.Node s : node.successors()) {
                names.add(s.name());
            }
            names.forEach(successors::add);
        }
        return out;
    }

    // ------------------------------------------------------------------------------------------------ misc

    /** An exception's message: the outermost one, and the root cause when it is another exception. */
    static String message(final Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String top = e.getClass().getSimpleName() + ": " + firstLine(e.getMessage());
        if (root != e) {
            top += " | caused by " + root.getClass().getSimpleName() + ": " + firstLine(root.getMessage());
        }
        return top.length() > 600 ? top.substring(0, 600) + "..." : top;
    }

    private static String firstLine(final String s) {
        if (s == null) {
            return "null";
        }
        final int i = s.indexOf('\n');
        return i < 0 ? s : s.substring(0, i);
    }

    static void deleteTree(final Path root) {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(root)) {
            final Iterator<Path> it = walk.sorted(Comparator.reverseOrder()).iterator();
            while (it.hasNext()) {
                try {
                    Files.deleteIfExists(it.next());
                } catch (final IOException ignored) {
                    // best effort
                }
            }
        } catch (final IOException ignored) {
            // best effort
        }
    }
}
