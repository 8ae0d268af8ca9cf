"""The function vocabulary both reference runners load (tests/reference/vocabulary.json, SPEC.md).

A function field of a case holds a vocabulary *name* (generated cases) or Python lambda source (transcribed
cases); ``python_source`` turns either into Python source, ``function`` into a callable with ``s`` and
``java_split`` in scope.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VOCABULARY_PATH = Path(__file__).with_name("vocabulary.json")

#: The value type a function reads (SPEC.md's "types" column); names not listed read any type.
INPUT_TYPES = {
    "value_len_even": "string",
    "value_even": "long",
    "upper": "string",
    "length": "string",
    "plus_one": "long",
    "split_dash": "string",
    "concat_plus": "string",
    "concat_minus": "string",
    "sum": "long",
    "diff": "long",
    "merge_plus": "string",
    "merge_sum": "long",
    "fk_first_char": "string",
}

#: Kinds whose functions leave the record's value (type) as it is: they only decide or compute a key.
VALUE_KEEPING_KINDS = ("predicate", "key_selector", "fk_extractor", "global_key_selector")


def s(x: Any) -> str:
    """Java's ``String.valueOf``: ``null`` for None."""
    return "null" if x is None else str(x)


def java_split(text: str, separator: str) -> list[str]:
    """Java's ``String.split`` with a literal separator: trailing empty strings are dropped; a string without
    the separator (also the empty string) is returned as the only element."""
    if separator not in text:
        return [text]
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str
    returns: str
    python: str | None
    aliases: tuple[str, ...]

    @property
    def reads(self) -> str:
        """The value type the function reads: ``string``, ``long`` or ``any``."""
        return INPUT_TYPES.get(self.name, "any")


@functools.lru_cache(maxsize=1)
def entries() -> dict[str, Entry]:
    raw = json.loads(VOCABULARY_PATH.read_text())
    return {
        e["name"]: Entry(e["name"], e["kind"], e["returns"], e.get("python"), tuple(e.get("aliases") or ()))
        for e in raw
    }


def of_kind(kind: str) -> list[Entry]:
    return [e for e in entries().values() if e.kind == kind]


#: The key type a key-changing function gives: ``same`` keeps the input's (others give ``string``).
KEY_RETURNS = {"key_first_char": "same", "regroup_first_char": "same", "gk_key": "same"}


def lookup(text: str, kinds: tuple[str, ...] = ()) -> Entry | None:
    """The entry ``text`` names, or whose python text (or an alias) it is exactly, preferring one of ``kinds``;
    None for other lambdas."""
    table = entries()
    if text in table:
        return table[text]
    found = [e for e in table.values() if text == e.python or text in e.aliases]
    preferred = [e for e in found if e.kind in kinds]
    return (preferred or found)[0] if found else None


def key_returns(name: str) -> str:
    """``same`` or ``string``: the key type a key-changing vocabulary function gives."""
    return KEY_RETURNS.get(name, "string")


def python_source(text: str) -> str:
    """Python source of a function field: a vocabulary name's ``python`` text, else ``text`` itself."""
    entry = entries().get(text)
    if entry is None:
        return text
    if entry.python is None:
        raise ValueError(f"vocabulary entry {text!r} ({entry.kind}) has no Python function")
    return entry.python


_SCOPE = {"s": s, "java_split": java_split, "int": int, "str": str}


@functools.cache
def function(text: str) -> Any:
    """The callable a function field stands for."""
    return eval(python_source(text), dict(_SCOPE))
