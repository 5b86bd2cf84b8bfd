#!/usr/bin/python3
"""tests/faults/tun_forwarder.py: a path with delay, loss, reordering and duplication between two
TUN devices, for the fault suite (the kernel here has no sch_netem).

  tun_forwarder.py --a NAME --b NAME [--delay-ms D] [--loss-pct P] [--reorder-pct P --reorder-ms R]
                   [--duplicate-pct P] [--seed S] [--max-seconds N] [--max-queue N]
  tun_forwarder.py --self-test

Creates the TUN devices NAME (a) and NAME (b) (IFF_TUN, no packet information; they vanish
when it exits), prints "ready" once both exist, and forwards every IP packet read from one to
the other. The caller moves the devices into network namespaces and gives them addresses (a
device keeps its file descriptor across the move). Each direction on its own:

  - P % of the packets (--loss-pct) are lost: never written, and counted;
  - every other packet is delayed by D ms (its due time: arrival + D);
  - P % of the packets (--reorder-pct) are held R ms more, so that the packets behind them,
    within R ms, overtake them;
  - P % of the packets (--duplicate-pct) are written twice (the copy right after the original).

Packets leave in the order of their due times (arrival order among equals). Bounds: at most
--max-queue packets wait per direction (beyond, a packet is dropped and counted), and it runs
for at most --max-seconds (default 300), or until SIGTERM, SIGINT or the end of its stdin (its
parent gone). On exit it prints one JSON line of counters per direction (packets in and out,
lost, reordered, duplicated, dropped by the queue bound, write errors) and exits 0. A Python
loop moves some tens of thousands of packets a second: a path through it is capped by that
(measured here without delay: about 800 Mbit/s of TCP), whatever the impairments.

--self-test checks the scheduler (Direction) without devices: delay, loss, order, reordering,
duplication, the queue bound; exit 0 if all holds.
"""
import argparse
import fcntl
import heapq
import json
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
# Work per loop turn, so that one busy direction cannot starve the other or the timers.
READ_BATCH = 256
WRITE_BATCH = 4096


class Direction:
    """One direction of the path: packets in with their arrival time, out at their due time.

    push(packet, now) schedules a packet (and its copy); pop_due(now, limit) returns up to
    `limit` packets whose due time has come, in due order (arrival order among equals);
    next_due() is the earliest due time waiting, or None."""

    def __init__(self, delay_s=0.0, reorder_p=0.0, reorder_s=0.0, duplicate_p=0.0,
                 rng=None, max_queue=20000, loss_p=0.0):
        self.delay_s, self.reorder_p, self.reorder_s = delay_s, reorder_p, reorder_s
        self.duplicate_p, self.max_queue, self.loss_p = duplicate_p, max_queue, loss_p
        self.rng = rng or random.Random(1)
        self.heap = []  # (due, seq, packet)
        self.seq = 0
        self.counts = dict(packets_in=0, packets_out=0, lost=0, reordered=0, duplicated=0, dropped=0,
                           write_errors=0)

    def push(self, packet, now):
        self.counts["packets_in"] += 1
        if self.loss_p > 0 and self.rng.random() < self.loss_p:
            self.counts["lost"] += 1
            return
        if len(self.heap) >= self.max_queue:
            self.counts["dropped"] += 1
            return
        due = now + self.delay_s
        if self.reorder_p > 0 and self.rng.random() < self.reorder_p:
            due += self.reorder_s
            self.counts["reordered"] += 1
        heapq.heappush(self.heap, (due, self.seq, packet))
        self.seq += 1
        if self.duplicate_p > 0 and self.rng.random() < self.duplicate_p and len(self.heap) < self.max_queue:
            heapq.heappush(self.heap, (due, self.seq, packet))
            self.seq += 1
            self.counts["duplicated"] += 1

    def next_due(self):
        return self.heap[0][0] if self.heap else None

    def pop_due(self, now, limit):
        out = []
        while self.heap and self.heap[0][0] <= now and len(out) < limit:
            out.append(heapq.heappop(self.heap)[2])
        self.counts["packets_out"] += len(out)
        return out


def open_tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def forward(args):
    rng = random.Random(args.seed)

    def direction():
        return Direction(args.delay_ms / 1000.0, args.reorder_pct / 100.0, args.reorder_ms / 1000.0,
                         args.duplicate_pct / 100.0, rng, args.max_queue, args.loss_pct / 100.0)

    fd_a, fd_b = open_tun(args.a), open_tun(args.b)
    # a -> b and b -> a: (the device read, the device written, its schedule)
    paths = {fd_a: (fd_b, direction()), fd_b: (fd_a, direction())}
    stop = []
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.append(1))
    print("ready", flush=True)
    stdin = sys.stdin.fileno()
    watch = [fd_a, fd_b, stdin]
    deadline = time.monotonic() + args.max_seconds
    while not stop and time.monotonic() < deadline:
        now = time.monotonic()
        dues = [d.next_due() for _, d in paths.values() if d.next_due() is not None]
        timeout = max(0.0, min([0.1] + [t - now for t in dues]))
        try:
            readable, _, _ = select.select(watch, [], [], timeout)
        except InterruptedError:
            continue
        now = time.monotonic()
        for fd in readable:
            if fd == stdin:
                if not os.read(stdin, 4096):
                    stop.append(1)  # the parent is gone
                continue
            d = paths[fd][1]
            for _ in range(READ_BATCH):
                try:
                    packet = os.read(fd, 65536)
                except (BlockingIOError, InterruptedError):
                    break
                d.push(packet, now)
        now = time.monotonic()
        for out, d in paths.values():
            for packet in d.pop_due(now, WRITE_BATCH):
                try:
                    os.write(out, packet)
                except OSError:
                    d.counts["write_errors"] += 1
    print(json.dumps({"a_to_b": paths[fd_a][1].counts, "b_to_a": paths[fd_b][1].counts}), flush=True)
    return 0


def self_test():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    # Delay: each packet leaves at arrival + delay, in arrival order, none early.
    d = Direction(delay_s=0.05)
    for i in range(100):
        d.push(bytes([i]), 1.0 + i * 0.001)
    check(d.pop_due(1.0499, 1000) == [], "a packet left before its delay")
    out = []
    for step in range(200):
        out += d.pop_due(1.05 + step * 0.001, 1000)
    check(out == [bytes([i]) for i in range(100)], "delayed packets out of order or missing")
    check(d.next_due() is None, "packets left behind")

    # Reordering: every packet leaves exactly once, and some leave after packets that came later.
    d = Direction(delay_s=0.001, reorder_p=0.1, reorder_s=0.005, rng=random.Random(7))
    for i in range(1000):
        d.push(i.to_bytes(2, "big"), i * 0.0001)
    out = d.pop_due(10.0, 100000)
    seq = [int.from_bytes(p, "big") for p in out]
    check(sorted(seq) == list(range(1000)), "reordering lost or repeated a packet")
    inversions = sum(1 for x, y in zip(seq, seq[1:]) if y < x)
    check(d.counts["reordered"] > 50 and inversions > 50, f"too little reordering: {d.counts}, {inversions}")

    # Duplication: every packet leaves once or twice, each copy right behind its original.
    d = Direction(duplicate_p=0.2, rng=random.Random(3))
    for i in range(1000):
        d.push(i.to_bytes(2, "big"), 0.0)
    seq = [int.from_bytes(p, "big") for p in d.pop_due(1.0, 100000)]
    check(sorted(set(seq)) == list(range(1000)), "duplication lost a packet")
    check(len(seq) == 1000 + d.counts["duplicated"] and 100 < d.counts["duplicated"] < 300,
          f"copies miscounted: {len(seq)} out, {d.counts}")
    check(all(x <= y for x, y in zip(seq, seq[1:])), "a copy left out of place")

    # Loss: about P % of the packets never leave, the others leave once each, in order.
    d = Direction(delay_s=0.01, loss_p=0.01, rng=random.Random(5))
    for i in range(20000):
        d.push(i.to_bytes(2, "big"), 0.0)
    seq = [int.from_bytes(p, "big") for p in d.pop_due(1.0, 100000)]
    check(120 < d.counts["lost"] < 280 and len(seq) == 20000 - d.counts["lost"] and seq == sorted(set(seq)),
          f"loss: {d.counts}, {len(seq)} out")

    # The queue bound: beyond max_queue a packet is dropped and counted; pop_due honours its limit.
    d = Direction(delay_s=1.0, max_queue=10)
    for i in range(15):
        d.push(b"x", 0.0)
    check(d.counts["dropped"] == 5 and len(d.pop_due(2.0, 4)) == 4 and len(d.pop_due(2.0, 100)) == 6,
          f"queue bound: {d.counts}")

    for f in failures:
        print(f"tun_forwarder self-test: FAILED: {f}")
    print(f"tun_forwarder self-test: {'passed' if not failures else 'FAILED'}")
    return 0 if not failures else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a")
    ap.add_argument("--b")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--loss-pct", type=float, default=0.0)
    ap.add_argument("--reorder-pct", type=float, default=0.0)
    ap.add_argument("--reorder-ms", type=float, default=0.0)
    ap.add_argument("--duplicate-pct", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    ap.add_argument("--max-queue", type=int, default=20000)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.a or not args.b:
        ap.error("--a and --b name the two TUN devices")
    return forward(args)


if __name__ == "__main__":
    sys.exit(main())
