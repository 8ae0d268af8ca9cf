"""kstream_nb runner (the project's own .venv): one KafkaStreams app, one stream thread. See _common.py."""

from __future__ import annotations

import operator

from _common import idle_forever, parse_args, running, started

import kstream_nb as ks


def build(args) -> ks.Topology:
    b = ks.StreamsBuilder()
    threshold = args.threshold
    if args.workload == "filter" and args.style == "columns":
        events = b.stream(args.input)
        kept = events[events["amount"] > threshold]
        kept.assign(doubled=kept["amount"] * 2).to(args.output)
    elif args.workload == "filter":
        (
            b.stream(args.input)
            .filter(lambda k, v: v["amount"] > threshold)
            .map_values(lambda v: {**v, "doubled": v["amount"] * 2})
            .to(args.output)
        )
    elif args.workload == "wordcount":
        (
            b.stream(args.input)
            .flat_map_values(str.split)
            .group_by(lambda k, w: w)
            .count(store="word-counts")
            .to_stream()
            .to(args.output)
        )
    else:
        (
            b.stream(args.input)
            .map_values(lambda v: v["amount"])
            .group_by_key()
            .windowed_by(ks.TimeWindows.of(args.window_ms).grace(args.grace_ms))
            .reduce(operator.add, store="sums")
            .suppress(ks.until_window_closes())
            .to_stream()
            .map(lambda w, s: (w.key, {"start": w.start, "sum": s}))
            .to(args.output)
        )
    return b.build()


def main() -> None:
    args = parse_args()
    if args.workload == "window":
        # final results only: with Kafka Streams' default record cache (10 MiB) the window store, its
        # changelog and the suppression buffer are written once per window and commit instead of once per
        # record, and the output is the same; a commit every second (exactly-once: 100 ms, its default)
        # bounds how long a closed window waits in the cache
        tuning: dict = {"statestore_cache_max_bytes": 10 * 1024 * 1024}
        if args.guarantee == "at_least_once":
            tuning["commit_interval_ms"] = 1000
    else:
        tuning = {"statestore_cache_max_bytes": 0}  # word count writes every update
    if args.commit_ms is not None:
        tuning["commit_interval_ms"] = args.commit_ms
    app = ks.KafkaStreams(
        build(args),
        application_id=args.group,
        bootstrap_servers=args.bootstrap,
        default_key_serde="string",
        default_value_serde="json",
        state_dir=args.state_dir,
        default_dsl_store=args.store,
        processing_guarantee=args.guarantee,
        client_config=args.config,
        **tuning,
    )
    joined: list[bool] = []

    def on_state(new: ks.State, old: ks.State) -> None:
        if new == ks.State.RUNNING and not joined:
            joined.append(True)
            running()

    app.set_state_listener(on_state)
    started()
    app.start()

    def check() -> str | None:
        if app.state in (ks.State.ERROR, ks.State.PENDING_ERROR, ks.State.NOT_RUNNING):
            return f"kstream_nb app is {app.state.value}: {app.error!r}"
        return None

    idle_forever(check)


if __name__ == "__main__":
    main()
