package kstream_nb.reference;

import java.util.List;

import org.apache.kafka.common.header.Headers;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;

/** The processors the runner attaches with {@code process()} (new Processor API). */
final class Processors {

    private Processors() {}

    /** A record that reached an observation point. */
    static final class Seen {
        final Object key;
        final Object value;
        final long timestamp;
        final Headers headers;

        Seen(final Object key, final Object value, final long timestamp, final Headers headers) {
            this.key = key;
            this.value = value;
            this.timestamp = timestamp;
            this.headers = headers;
        }
    }

    /** Records everything that reaches it, like Kafka's MockApiProcessor. */
    static final class Capture implements Processor<Object, Object, Void, Void> {
        private final List<Seen> sink;

        Capture(final List<Seen> sink) {
            this.sink = sink;
        }

        @Override
        public void process(final Record<Object, Object> record) {
            sink.add(new Seen(record.key(), record.value(), record.timestamp(), null));
        }
    }

    /**
     * SPEC's {@code running_count}: a key-value store (String -> Long); for a non-null key count += 1, store it and
     * forward (k, count) with the record's timestamp; a null key is forwarded unchanged with value null.
     */
    static final class RunningCount implements Processor<Object, Object, Object, Object> {
        private final String storeName;
        private ProcessorContext<Object, Object> context;
        private KeyValueStore<Object, Long> store;

        RunningCount(final String storeName) {
            this.storeName = storeName;
        }

        @Override
        public void init(final ProcessorContext<Object, Object> context) {
            this.context = context;
            this.store = context.getStateStore(storeName);
        }

        @Override
        public void process(final Record<Object, Object> record) {
            if (record.key() == null) {
                context.forward(record.withValue(null));
                return;
            }
            final Long old = store.get(record.key());
            final long count = (old == null ? 0L : old) + 1;
            store.put(record.key(), count);
            context.forward(record.withValue(count));
        }
    }
}
