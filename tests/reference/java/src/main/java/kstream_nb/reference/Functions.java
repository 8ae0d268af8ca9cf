package kstream_nb.reference;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.BiFunction;
import java.util.function.BinaryOperator;
import java.util.function.Function;
import java.util.function.Supplier;

import org.apache.kafka.streams.KeyValue;

/**
 * The function vocabulary of tests/reference/SPEC.md, in Java, by role. A vocabulary name has an implementation in
 * each role whose call shape it fits (a key selector also serves where a global key selector is asked for, a table
 * group-by mapper where a key-value mapper is, a value mapper where a foreign-key extractor is, and so on).
 */
final class Functions {

    /** A role a case function string is used in: what the op calls it with. */
    enum Role {
        PREDICATE, VALUE_MAPPER, KEY_VALUE_MAPPER, KEY_SELECTOR, FLAT_VALUE_MAPPER, FLAT_KEY_VALUE_MAPPER,
        REDUCER, INITIALIZER, AGGREGATOR, SESSION_MERGER, JOINER, FK_EXTRACTOR, PROCESSOR
    }

    interface Tri {
        Object apply(Object a, Object b, Object c);
    }

    private Functions() {}

    /** Java's {@code String.valueOf}: "null" for null. */
    static String s(final Object x) {
        return String.valueOf(x);
    }

    static final Map<String, BiFunction<Object, Object, Boolean>> PREDICATES = new HashMap<>();
    static final Map<String, Function<Object, Object>> VALUE_MAPPERS = new HashMap<>();
    static final Map<String, BiFunction<Object, Object, KeyValue<Object, Object>>> KEY_VALUE_MAPPERS = new HashMap<>();
    static final Map<String, BiFunction<Object, Object, Object>> KEY_SELECTORS = new HashMap<>();
    static final Map<String, Function<Object, List<Object>>> FLAT_VALUE_MAPPERS = new HashMap<>();
    static final Map<String, BiFunction<Object, Object, List<KeyValue<Object, Object>>>> FLAT_KEY_VALUE_MAPPERS =
        new HashMap<>();
    static final Map<String, BinaryOperator<Object>> REDUCERS = new HashMap<>();
    static final Map<String, Supplier<Object>> INITIALIZERS = new HashMap<>();
    static final Map<String, Tri> AGGREGATORS = new HashMap<>();
    static final Map<String, Tri> SESSION_MERGERS = new HashMap<>();
    static final Map<String, BinaryOperator<Object>> JOINERS = new HashMap<>();
    /** Processors: the names only; the runner builds them. */
    static final List<String> PROCESSORS = List.of("running_count");

    /** The key type a key-changing function gives, by name: "same" keeps the input key type, else a type. */
    static final Map<String, String> KEY_RETURNS = new HashMap<>();

    static {
        PREDICATES.put("key_not_null", (k, v) -> k != null);
        PREDICATES.put("value_not_null", (k, v) -> v != null);
        PREDICATES.put("key_is_a", (k, v) -> "a".equals(k));
        PREDICATES.put("value_len_even", (k, v) -> v != null && ((String) v).length() % 2 == 0);
        PREDICATES.put("value_even", (k, v) -> v != null && rem2(v) == 0);

        VALUE_MAPPERS.put("upper", v -> v == null ? null : ((String) v).toUpperCase(Locale.ROOT));
        VALUE_MAPPERS.put("append_x", v -> s(v) + "x");
        VALUE_MAPPERS.put("length", v -> v == null ? null : (Object) (long) ((String) v).length());
        VALUE_MAPPERS.put("to_string", v -> v == null ? null : String.valueOf(v));
        VALUE_MAPPERS.put("plus_one", v -> v == null ? null : plus(v, 1L));
        // foreign-key extractor (a value -> key function): also usable where a value mapper is asked for
        VALUE_MAPPERS.put("fk_first_char", v -> v == null || ((String) v).isEmpty() ? null : ((String) v).substring(0, 1));

        final BiFunction<Object, Object, KeyValue<Object, Object>> swap =
            (k, v) -> KeyValue.pair(v == null ? null : s(v), k);
        final BiFunction<Object, Object, KeyValue<Object, Object>> firstChar =
            (k, v) -> KeyValue.pair(k == null || ((String) k).isEmpty() ? k : ((String) k).substring(0, 1), v);
        KEY_VALUE_MAPPERS.put("swap", swap);
        KEY_VALUE_MAPPERS.put("key_first_char", firstChar);
        KEY_VALUE_MAPPERS.put("regroup_first_char", firstChar);
        KEY_VALUE_MAPPERS.put("regroup_by_value", swap);
        KEY_RETURNS.put("swap", "string");
        KEY_RETURNS.put("key_first_char", "same");
        KEY_RETURNS.put("regroup_first_char", "same");
        KEY_RETURNS.put("regroup_by_value", "string");

        KEY_SELECTORS.put("key_upper", (k, v) -> k == null ? null : ((String) k).toUpperCase(Locale.ROOT));
        KEY_SELECTORS.put("value_as_key", (k, v) -> v == null ? null : s(v));
        KEY_SELECTORS.put("constant_key", (k, v) -> "all");
        KEY_SELECTORS.put("gk_value", (k, v) -> v == null ? null : s(v));
        KEY_SELECTORS.put("gk_key", (k, v) -> k);
        KEY_RETURNS.put("key_upper", "string");
        KEY_RETURNS.put("value_as_key", "string");
        KEY_RETURNS.put("constant_key", "string");
        KEY_RETURNS.put("gk_value", "string");
        KEY_RETURNS.put("gk_key", "same");

        FLAT_VALUE_MAPPERS.put("dup", v -> Arrays.asList(v, v));
        FLAT_VALUE_MAPPERS.put("split_dash", v -> v == null ? List.of() : Arrays.asList((Object[]) ((String) v).split("-")));

        FLAT_KEY_VALUE_MAPPERS.put("explode", (k, v) -> {
            final List<KeyValue<Object, Object>> out = new ArrayList<>();
            out.add(KeyValue.pair(k, v));
            out.add(KeyValue.pair(s(k) + "2", v));
            return out;
        });
        KEY_RETURNS.put("explode", "same");

        REDUCERS.put("concat_plus", (a, b) -> s(a) + "+" + s(b));
        REDUCERS.put("concat_minus", (a, b) -> s(a) + "-" + s(b));
        REDUCERS.put("sum", Functions::plus);
        REDUCERS.put("diff", Functions::minus);

        INITIALIZERS.put("init_zero", () -> "0");
        INITIALIZERS.put("init_long_zero", () -> 0L);

        AGGREGATORS.put("agg_plus", (k, v, agg) -> s(agg) + "+" + s(v));
        AGGREGATORS.put("agg_minus", (k, v, agg) -> s(agg) + "-" + s(v));
        AGGREGATORS.put("agg_count", (k, v, agg) -> plus(agg, 1L));
        AGGREGATORS.put("agg_uncount", (k, v, agg) -> minus(agg, 1L));

        SESSION_MERGERS.put("merge_plus", (k, a, b) -> s(a) + "+" + s(b));
        SESSION_MERGERS.put("merge_sum", (k, a, b) -> plus(a, b));

        JOINERS.put("join_plus", (l, r) -> s(l) + "+" + s(r));
        JOINERS.put("join_pipe", (l, r) -> s(l) + "|" + s(r));
    }

    /** Which implementations serve a role. */
    static Map<String, ?> forRole(final Role role) {
        switch (role) {
            case PREDICATE: return PREDICATES;
            case VALUE_MAPPER:
            case FK_EXTRACTOR: return VALUE_MAPPERS;
            case KEY_VALUE_MAPPER: return KEY_VALUE_MAPPERS;
            case KEY_SELECTOR: return KEY_SELECTORS;
            case FLAT_VALUE_MAPPER: return FLAT_VALUE_MAPPERS;
            case FLAT_KEY_VALUE_MAPPER: return FLAT_KEY_VALUE_MAPPERS;
            case REDUCER: return REDUCERS;
            case INITIALIZER: return INITIALIZERS;
            case AGGREGATOR: return AGGREGATORS;
            case SESSION_MERGER: return SESSION_MERGERS;
            case JOINER: return JOINERS;
            default: return null;
        }
    }

    static boolean serves(final String name, final Role role) {
        if (role == Role.PROCESSOR) {
            return PROCESSORS.contains(name);
        }
        return forRole(role).containsKey(name);
    }

    // Java arithmetic on boxed numbers as the unboxed expression would do it (a null operand throws, like unboxing).

    private static long rem2(final Object v) {
        if (v instanceof Double || v instanceof Float) {
            return (long) (((Number) v).doubleValue() % 2);
        }
        return ((Number) v).longValue() % 2;
    }

    static Object plus(final Object a, final Object b) {
        final Number x = (Number) a;
        final Number y = (Number) b;
        if (x == null || y == null) {
            throw new NullPointerException("null operand of +");
        }
        if (x instanceof Double || y instanceof Double || x instanceof Float || y instanceof Float) {
            return x.doubleValue() + y.doubleValue();
        }
        if (x instanceof Integer && y instanceof Integer) {
            return x.intValue() + y.intValue();
        }
        if (x instanceof Integer && b instanceof Long && (Long) b == 1L) {
            return x.intValue() + 1; // int + 1 stays an int, as v + 1 on an Integer does
        }
        return x.longValue() + y.longValue();
    }

    static Object minus(final Object a, final Object b) {
        final Number x = (Number) a;
        final Number y = (Number) b;
        if (x == null || y == null) {
            throw new NullPointerException("null operand of -");
        }
        if (x instanceof Double || y instanceof Double || x instanceof Float || y instanceof Float) {
            return x.doubleValue() - y.doubleValue();
        }
        if (x instanceof Integer && y instanceof Integer) {
            return x.intValue() - y.intValue();
        }
        if (x instanceof Integer && b instanceof Long && (Long) b == 1L) {
            return x.intValue() - 1;
        }
        return x.longValue() - y.longValue();
    }
}
