"""Q5: what ``Consumer.consumer_group_metadata()`` returns after 1, 2 and 3 rebalances: where the generation
sits, its byte order, the member id (compared with the group's description), the static instance id."""

from __future__ import annotations

from typing import Any

from harness import kafka, pump, wait_for

PREFIX = b"CGMDv2:"


def parse(raw: bytes) -> tuple[int, int, list[str]]:
    """(generation read big-endian, the same 4 bytes little-endian, the NUL-terminated strings after them)."""
    assert raw.startswith(PREFIX), raw
    gen = raw[len(PREFIX) : len(PREFIX) + 4]
    strings = raw[len(PREFIX) + 4 :].split(b"\0")
    return (
        int.from_bytes(gen, "big", signed=True),
        int.from_bytes(gen, "little", signed=True),
        [s.decode() for s in strings],
    )


def main() -> None:
    with kafka() as lab:
        lab.create_topics(x=6)
        assigned: dict[str, int] = {}

        def member(name: str, **config: Any) -> Any:
            consumer = lab.consumer("q5", client_id=name, **config)

            def on_assign(c: Any, parts: list[Any]) -> None:
                assigned[name] = assigned.get(name, 0) + 1

            consumer.subscribe(["x"], on_assign=on_assign)
            return consumer

        a = member("a")
        print(f"before joining: {a.consumer_group_metadata()!r}")
        members = [a]
        for n, name in enumerate(["a", "b", "c"], start=1):
            if name != "a":
                members.append(member(name))
            before = dict(assigned)
            names = ["a", "b", "c"][:n]

            def rebalanced(names: list[str] = names, before: dict[str, int] = before) -> bool:
                return all(assigned.get(x, 0) > before.get(x, 0) for x in names)

            wait_for(rebalanced, 30, f"rebalance {n}", lambda: pump(*members))
            raw = a.consumer_group_metadata()
            big, little, strings = parse(raw)
            described = {m.client_id: m.member_id for m in lab.describe("q5").members}
            print(f"after rebalance {n}: {len(raw)} bytes {raw!r}")
            print(f"  bytes 7..10 big-endian = {big}, little-endian = {little}; strings after = {strings[:3]}")
            print(f"  member id of 'a' in describe_consumer_groups = {described['a']} "
                  f"(equal to the 2nd field: {described['a'] == strings[1]})")  # fmt: skip

        static = lab.consumer("q5-static", client_id="s", group_instance_id="instance-1")
        static.subscribe(["x"])
        wait_for(lambda: parse(static.consumer_group_metadata())[0] >= 0, 30, "static join", lambda: pump(static))
        print(f"static member (group.instance.id=instance-1): {static.consumer_group_metadata()!r}")


if __name__ == "__main__":
    main()
