package kstream_nb.reference;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * tests/reference/vocabulary.json: a case function is a vocabulary name, the exact {@code python} text of an entry,
 * or one of its {@code aliases}; anything else makes the case unsupported.
 */
final class Vocabulary {

    /** Thrown while building a case whose function (or op) this runner does not know. */
    static final class Unsupported extends RuntimeException {
        Unsupported(final String reason) {
            super(reason);
        }
    }

    static final class Entry {
        final String name;
        final String kind;
        final String returns;

        Entry(final String name, final String kind, final String returns) {
            this.name = name;
            this.kind = kind;
            this.returns = returns;
        }
    }

    final Map<String, Entry> byName = new LinkedHashMap<>();
    /** python text or alias -> the entries that have it (several entries may share a text, e.g. key_first_char). */
    private final Map<String, List<Entry>> byText = new HashMap<>();

    static Vocabulary load(final File path, final ObjectMapper json) throws IOException {
        final Vocabulary vocabulary = new Vocabulary();
        for (final JsonNode e : json.readTree(path)) {
            final Entry entry = new Entry(e.get("name").asText(), e.path("kind").asText(""), e.path("returns").asText("same"));
            vocabulary.byName.put(entry.name, entry);
            if (e.hasNonNull("python")) {
                vocabulary.byText.computeIfAbsent(e.get("python").asText(), t -> new ArrayList<>()).add(entry);
            }
            for (final JsonNode alias : e.path("aliases")) {
                vocabulary.byText.computeIfAbsent(alias.asText(), t -> new ArrayList<>()).add(entry);
            }
        }
        return vocabulary;
    }

    /** The vocabulary entry a case function string names, for use in {@code role} (of op {@code where}). */
    Entry resolve(final JsonNode fn, final Functions.Role role, final String where) {
        if (fn == null || !fn.isTextual()) {
            throw new Unsupported(where + ": function missing or not a string: " + fn);
        }
        final String text = fn.asText();
        final List<Entry> candidates = new ArrayList<>();
        if (byName.containsKey(text)) {
            candidates.add(byName.get(text));
        } else if (byText.containsKey(text)) {
            candidates.addAll(byText.get(text));
        }
        if (candidates.isEmpty()) {
            throw new Unsupported(where + ": function not in the vocabulary: " + text);
        }
        for (final Entry entry : candidates) {
            if (Functions.serves(entry.name, role)) {
                return entry;
            }
        }
        throw new Unsupported(where + ": function " + candidates.get(0).name + " (" + candidates.get(0).kind
            + ") cannot serve as a " + role.name().toLowerCase());
    }
}
