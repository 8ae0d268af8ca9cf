"""Internal names against Kafka Streams: do generated topologies get the repartition, changelog and foreign-key
topic names Kafka Streams 4.4 gives the same DSL calls? (An app that replaces a Kafka Streams app, or runs beside
one, must find its internal topics under those names.)

    python -m tests.reference.names [--cases N] [--seed S]

prints, per kind of internal topic, how many topologies agree, a few differing examples, and last
``internal names: N topologies, A agree, D differ``.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from typing import Any

import kstream_nb as ks
from tests.conformance.harness import CaseGraph
from tests.reference.diff import JAR, Case, java_side
from tests.reference.generate import generate

#: the application id the Java runner gives every case
APP = "ref"


def kstream_nb_internal_topics(case: Case) -> set[str] | None:
    """The internal topics kstream_nb creates for ``case``'s topology (None when it does not build)."""
    builder = ks.StreamsBuilder()
    try:
        CaseGraph(case, builder, typed=True)
        description = builder.build().describe()
    except Exception:
        return None
    topics = {f"{APP}-{t}" for t in description.repartition_topics}
    return topics | {f"{APP}-{s}-changelog" for s in description.changelog_stores}


def kind(topic: str) -> str:
    """A topic name with its generated numbers blanked: what kind of internal topic it is."""
    return re.sub(r"\d{10}", "N", topic.removeprefix(f"{APP}-"))


def compare(cases: list[Case]) -> tuple[int, int, Counter[str], list[tuple[str, set[str], set[str]]]]:
    """(compared, agreeing, kinds of differing topics, examples) over ``cases`` both sides build."""
    answers = java_side(JAR, options=("--describe",))(cases)
    compared = agree = 0
    kinds: Counter[str] = Counter()
    examples: list[tuple[str, set[str], set[str]]] = []
    for case, answer in zip(cases, answers):
        ours = kstream_nb_internal_topics(case)
        described: dict[str, Any] | None = answer.get("describe")
        if ours is None or answer.get("error") or not described:
            continue
        theirs = set(described.get("internal_topics") or ())
        compared += 1
        if ours == theirs:
            agree += 1
            continue
        kinds.update({kind(t) for t in ours ^ theirs})
        if len(examples) < 5:
            examples.append((case["id"], theirs - ours, ours - theirs))
    return compared, agree, kinds, examples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    compared, agree, kinds, examples = compare(list(generate(args.seed, args.cases)))
    for name, n in kinds.most_common(15):
        print(f"  {n:5d} topologies differ on {name}")
    for case_id, only_kafka, only_ours in examples:
        print(f"  {case_id}: Kafka Streams only {sorted(only_kafka)}; kstream_nb only {sorted(only_ours)}")
    print(f"internal names: {compared} topologies, {agree} agree, {compared - agree} differ")
    return 0 if agree == compared else 1


if __name__ == "__main__":
    raise SystemExit(main())
