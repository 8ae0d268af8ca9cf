"""Q8: does a fresh Kafka 4.4 node with the tests/kafka_broker.py settings advertise StreamsGroupHeartbeat
(API key 88) and StreamsGroupDescribe (89), and which ``streams.version`` feature level is finalized? A
hand-made ApiVersions v3 request on a plain socket (flexible version: compact strings, tagged fields)."""

from __future__ import annotations

import socket
import struct

from harness import kafka

NAMES = {68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 76: "ShareGroupHeartbeat",
         88: "StreamsGroupHeartbeat", 89: "StreamsGroupDescribe"}  # fmt: skip


def uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def compact_string(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data  # length + 1 as an unsigned varint (< 127 here)


def api_versions(host: str, port: int) -> tuple[dict[int, tuple[int, int]], dict[str, tuple[int, int]]]:
    """({api_key: (min, max)}, {finalized feature: (min level, max level)}) from ApiVersions v3."""
    client_id = b"q8"
    header = struct.pack(">hhih", 18, 3, 1, len(client_id)) + client_id + b"\0"  # request header v2
    body = compact_string("q8-probe") + compact_string("1.0") + b"\0"
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", recv_exactly(sock, 4))[0]
        resp = recv_exactly(sock, size)
    correlation, error = struct.unpack(">ih", resp[:6])  # response header v0 (ApiVersions), then the body
    assert correlation == 1 and error == 0, (correlation, error)
    count, pos = uvarint(resp, 6)
    apis = {}
    for _ in range(count - 1):
        key, lo, hi = struct.unpack(">hhh", resp[pos : pos + 6])
        apis[key] = (lo, hi)
        pos += 7  # + the entry's empty tagged fields
    pos += 4  # throttle_time_ms
    features: dict[str, tuple[int, int]] = {}
    tags, pos = uvarint(resp, pos)
    for _ in range(tags):
        tag, pos = uvarint(resp, pos)
        length, pos = uvarint(resp, pos)
        if tag == 2:  # FinalizedFeatures: name, max_version_level, min_version_level
            n, p = uvarint(resp, pos)
            for _ in range(n - 1):
                name_len, p = uvarint(resp, p)
                name = resp[p : p + name_len - 1].decode()
                p += name_len - 1
                hi, lo = struct.unpack(">hh", resp[p : p + 4])
                features[name] = (lo, hi)
                p += 5
        pos += length
    return apis, features


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return data


def main() -> None:
    with kafka() as lab:
        host, port = lab.bootstrap.split(":")
        apis, features = api_versions(host, int(port))
        print(f"ApiVersions v3: {len(apis)} APIs advertised")
        for key, name in NAMES.items():
            span = f"versions {apis[key][0]}-{apis[key][1]}" if key in apis else "NOT advertised"
            print(f"  {key} {name}: {span}")
        print(f"  finalized features (min, max level): {features}")
        settings = [line.strip() for line in lab.broker_log().splitlines() if "rebalance.protocols" in line]
        print(f"  broker log: {settings[:1] or 'no group.coordinator.rebalance.protocols line'}")


if __name__ == "__main__":
    main()
