"""The sticky, balanced task assignment: tasks stay put when balance allows; newcomers get their share."""

from kstream_nb.cluster.base import Subscription
from kstream_nb.runtime.assignor import TaskInfo, balanced_sticky_assignment


def tasks(sub: int, n: int) -> list[TaskInfo]:
    return [TaskInfo(f"{sub}_{p}", sub, p, ()) for p in range(n)]


def member(*prev: str) -> Subscription:
    return Subscription(frozenset(), {"prev_tasks": list(prev)})


def loads(owners: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in owners.values():
        out[m] = out.get(m, 0) + 1
    return out


def test_a_new_member_gets_its_share_and_the_others_keep_theirs() -> None:
    owners = balanced_sticky_assignment(
        tasks(0, 4), {"a1": member("0_0", "0_1"), "a2": member("0_2", "0_3"), "b1": member()}
    )
    assert sorted(loads(owners).values()) == [1, 1, 2]
    assert loads(owners)["b1"] == 1
    moved = [t for t, m in owners.items() if m == "b1"]
    assert len(moved) == 1  # only one task moved; the rest stayed where they were


def test_a_leaving_member_spreads_its_tasks_and_nothing_else_moves() -> None:
    owners = balanced_sticky_assignment(tasks(0, 6), {"a": member("0_0", "0_1"), "b": member("0_2", "0_3")})
    assert loads(owners) == {"a": 3, "b": 3}
    assert all(owners[t] == "a" for t in ("0_0", "0_1")) and all(owners[t] == "b" for t in ("0_2", "0_3"))


def test_each_subtopology_is_spread_over_the_members() -> None:
    owners = balanced_sticky_assignment(tasks(0, 4) + tasks(1, 4), {"a": member(), "b": member()})
    for sub in (0, 1):
        per_member = loads({t: m for t, m in owners.items() if t.startswith(f"{sub}_")})
        assert per_member == {"a": 2, "b": 2}
