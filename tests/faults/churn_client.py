#!/usr/bin/python3
"""tests/faults/churn_client.py: opens and drops connections against a uwarp-perf server's
listener, in varied shapes, for the fault suite's churn case.

  churn_client.py --host H --port P [--count N] [--seconds W] [--concurrency C]
                  [--timeout-s T] [--max-seconds M]

Connection i starts no earlier than i * W / N seconds after the first (a loop paced to about N / W
connections a second; slower if the connections take longer), at most C at a time, and takes
the shape SHAPES[i % len(SHAPES)]:

  tcp-close     TCP connect, then close (FIN) before any MPA byte
  tcp-reset     TCP connect, then reset (SO_LINGER 0)
  mpa-partial   the first half of an MPA request, then reset
  mpa-reject    a whole MPA request (revision 2, IRD/ORD words) whose private data is not
                uwarp-perf's: the server rejects it; the reply must carry the reject bit
  accept-close  a whole MPA request with uwarp-perf's control hello: the server accepts it
                (a session, its control QP in RTS on the progress thread); then close
  accept-reset  the same, then reset

The uwarp side of each is the whole of what a uwarp or rdma_cm initiator makes it do (the
initiator here speaks MPA itself, so that its own cost stays small). Every socket operation is
bounded by T seconds, the whole run by M. Prints "started" once the first connection is open,
and at the end one JSON line: the count of each shape, the connections whose outcome was not the
expected one (with the first few errors), and the seconds taken. Exit status 0 if all N had the
expected outcome.
"""
import argparse
import json
import socket
import struct
import sys
import threading
import time

# uwarp-perf's control hello (tools/uwarp-perf/protocol.h): magic "UWPF", index 0xFFFFFFFF
# (the control connection), 1 data QP, rkey, addr, buffer length, session, flags.
HELLO_CONTROL = struct.pack(">IIIIQQII", 0x55575046, 0xFFFFFFFF, 1, 0, 0, 4096, 0, 0)
NOT_A_HELLO = b"churn: not a uwarp-perf client".ljust(40, b".")
# In every 20 connections: 4 of each shape that ends before a request, 6 rejected, 1 of each
# accepted (uwarp-perf's server audits each session it accepted, some 50 ms of its accepting
# thread: more would pace the loop by that).
SHAPES = ["tcp-close", "tcp-reset", "mpa-partial", "mpa-reject", "accept-close",
          "tcp-close", "tcp-reset", "mpa-partial", "mpa-reject", "mpa-reject",
          "tcp-close", "tcp-reset", "mpa-partial", "mpa-reject", "accept-reset",
          "tcp-close", "tcp-reset", "mpa-partial", "mpa-reject", "mpa-reject"]
REQ_KEY, REP_KEY = b"MPA ID Req Frame", b"MPA ID Rep Frame"
FLAG_REJECT, FLAG_ENHANCED = 0x20, 0x10  # the byte after the key


def mpa_request(private_data):
    """An MPA revision 2 request with RFC 6581 IRD/ORD words (16 each, no peer-to-peer)."""
    pd = struct.pack(">HH", 16, 16) + private_data
    return REQ_KEY + bytes([FLAG_ENHANCED, 2]) + struct.pack(">H", len(pd)) + pd


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def read_reply(s):
    """The MPA reply: (rejected, private data after the IRD/ORD words)."""
    head = recv_exact(s, 20)
    if head[:16] != REP_KEY:
        raise ValueError(f"not an MPA reply: {head[:16]!r}")
    pd = recv_exact(s, struct.unpack(">H", head[18:20])[0])
    return bool(head[16] & FLAG_REJECT), pd[4:] if head[16] & FLAG_ENHANCED else pd


def reset(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def one(shape, host, port, timeout):
    """Runs one connection of `shape`; raises if its outcome is not the expected one."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        if shape == "tcp-close":
            s.close()
        elif shape == "tcp-reset":
            reset(s)
        elif shape == "mpa-partial":
            s.sendall(mpa_request(NOT_A_HELLO)[:30])
            reset(s)
        elif shape == "mpa-reject":
            s.sendall(mpa_request(NOT_A_HELLO))
            rejected, _ = read_reply(s)
            if not rejected:
                raise ValueError("a request that is not uwarp-perf's was accepted")
            s.close()
        else:  # accept-close, accept-reset
            s.sendall(mpa_request(HELLO_CONTROL))
            rejected, pd = read_reply(s)
            if rejected or len(pd) < 40 or struct.unpack(">II", pd[:8]) != (0x55575046, 0xFFFFFFFF):
                raise ValueError(f"the control hello was not accepted (rejected {rejected}, {pd[:8].hex()})")
            if shape == "accept-close":
                s.close()
            else:
                reset(s)
    finally:
        s.close()  # a no-op once closed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=0.0, help="pace: N connections in about this long")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--timeout-s", type=float, default=10.0)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    args = ap.parse_args()

    lock = threading.Lock()
    state = dict(next=0, done={}, failed=0, errors=[])
    start = time.monotonic()
    deadline = start + args.max_seconds
    started = threading.Event()

    def worker():
        while True:
            with lock:
                i = state["next"]
                if i >= args.count or time.monotonic() > deadline:
                    return
                state["next"] += 1
            due = start + i * args.seconds / args.count
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            shape = SHAPES[i % len(SHAPES)]
            try:
                one(shape, args.host, args.port, args.timeout_s)
                error = None
            except (OSError, ValueError) as e:
                error = f"{i} {shape}: {e}"
            with lock:
                state["done"][shape] = state["done"].get(shape, 0) + 1
                if error:
                    state["failed"] += 1
                    if len(state["errors"]) < 5:
                        state["errors"].append(error)
            started.set()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    if started.wait(timeout=args.max_seconds):
        print("started", flush=True)
    for t in threads:
        t.join(timeout=max(0.0, deadline + args.timeout_s - time.monotonic()))
    with lock:
        total = sum(state["done"].values())
        print(json.dumps(dict(count=total, shapes=state["done"], failed=state["failed"],
                              errors=state["errors"], seconds=round(time.monotonic() - start, 3))),
              flush=True)
        return 0 if total == args.count and state["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
