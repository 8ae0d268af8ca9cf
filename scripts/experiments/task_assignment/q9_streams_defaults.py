"""Q9: Kafka Streams 4.4's defaults for the KIP-441/KIP-925 assignment settings, read from StreamsConfig's
own ConfigDef by a small Java program (source-file launch) on kafka-streams-4.4.0.jar + the broker's jars
(kafka-clients): the default and the validator (which lists the valid values) of each setting."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from kstream_nb.cluster.local_kafka import KAFKA_VERSION, kafka_jars

SETTINGS = ["acceptable.recovery.lag", "max.warmup.replicas", "probing.rebalance.interval.ms",
            "num.standby.replicas", "rack.aware.assignment.strategy", "rack.aware.assignment.tags",
            "rack.aware.assignment.traffic_cost", "rack.aware.assignment.non_overlap_cost"]  # fmt: skip

PROGRAM = """
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.streams.StreamsConfig;

public class Defaults {
    public static void main(String[] names) {
        var keys = StreamsConfig.configDef().configKeys();
        for (String name : names) {
            ConfigDef.ConfigKey key = keys.get(name);
            System.out.println(key == null ? name + ": not a StreamsConfig setting"
                : name + " = " + key.defaultValue + "  (valid: " + key.validator + ")");
        }
    }
}
"""


def main() -> None:
    jar = (
        Path.home()
        / f".m2/repository/org/apache/kafka/kafka-streams/{KAFKA_VERSION}/kafka-streams-{KAFKA_VERSION}.jar"
    )
    if not jar.exists():
        raise SystemExit(f"{jar} is missing: build tests/reference/java once (mvn fetches it)")
    classpath = f"{jar}:{kafka_jars()}/*"
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "Defaults.java"
        source.write_text(PROGRAM)
        out = subprocess.run(["java", "-cp", classpath, str(source), *SETTINGS], capture_output=True, text=True,
                             check=True)  # fmt: skip
    print(f"StreamsConfig of kafka-streams {KAFKA_VERSION}:")
    for line in out.stdout.splitlines():
        print(f"  {line}")


if __name__ == "__main__":
    main()
