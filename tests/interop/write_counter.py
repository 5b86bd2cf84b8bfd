#!/usr/bin/python3
"""tests/interop/write_counter.py: checks, on the wire, the data rstream -T v sent with RDMA Writes:
rdma-core's rstream fills every buffer it sends with one running byte counter (each byte one more
than the one before, modulo 256, across all its transfers), and its rsocket protocol carries the
bytes in RDMA Writes to the peer's receive buffer, in order. So when an rstream cell fails its
data check, the capture tells which side is wrong: the sender, if its Writes already break the
counter on the wire, else the receiver.

  tests/interop/write_counter.py PCAP --src PORT | --dst PORT
  tests/interop/write_counter.py --self-test

--src/--dst PORT choose one direction, as in fpdu_crc.py. The script rebuilds that direction's
TCP byte stream (fpdu_crc.streams), walks its FPDUs (no markers), and follows the payload of the
RDMA Writes of each STag in stream order. The STag with the most Write bytes is the receive
buffer (the others carry the protocol's 16-byte SGL updates). It prints how many bytes it
followed and, at the first byte that breaks the counter, where (stream offset, frame, the
Write's STag and TO, the byte's place in its FPDU), what it expected and found, and how many of
the following bytes of that FPDU continue from the found byte instead (a payload from elsewhere
in the counter shows up as a shift).

Exit status: 0 the counter is unbroken; 1 it breaks; 2 the capture cannot be analysed (tshark
missing, a gap in the stream, no MPA frame, no RDMA Write). --self-test writes small captures (an
unbroken counter over several Writes and an SGL update, one FPDU whose payload is shifted) and
checks the verdicts; exit 77 (skipped) without tshark.
"""
import os
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fpdu_crc import MPA_KEYS, _passive_segments, _pcap, mpa_frame_length, one_side, side_main  # noqa: E402

RDMA_WRITE = 0
TAGGED = 0x80
TAGGED_HEADER = 14  # DDP control, RDMAP control, STag, TO


def writes(data):
    """[(stream offset of the payload, STag, TO, payload)] of every RDMA Write FPDU, in order."""
    off = mpa_frame_length(data)
    if off is None:
        raise ValueError("the stream does not start with an MPA request or reply")
    out = []
    while off + 2 <= len(data):
        ulpdu = struct.unpack(">H", data[off:off + 2])[0]
        end = off + 2 + ulpdu + (-(2 + ulpdu) % 4) + 4
        if end > len(data):
            break  # cut by the capture's end
        if ulpdu >= TAGGED_HEADER and data[off + 2] & TAGGED and data[off + 3] & 0x0F == RDMA_WRITE:
            stag, to = struct.unpack(">IQ", data[off + 4:off + 16])
            out.append((off + 16, stag, to, data[off + 16:off + 2 + ulpdu]))
        off = end
    return out


def analyse(pcap, src=None, dst=None):
    """(verdict, lines): verdict 0 unbroken, 1 broken."""
    ports, data, frames, _ = one_side(pcap, src, dst)
    found = writes(data)
    if not found:
        raise ValueError("no RDMA Write in the stream")
    size = {}
    for _, stag, _, payload in found:
        size[stag] = size.get(stag, 0) + len(payload)
    buffer_stag = max(size, key=size.get)
    name = f"write_counter: ports {ports[0]}->{ports[1]}, STag {buffer_stag:#010x}"
    expected = None
    followed = 0
    for index, (at, stag, to, payload) in enumerate(found):
        if stag != buffer_stag or not payload:
            continue
        if expected is None:
            expected = payload[0]
        for i, byte in enumerate(payload):
            if byte != expected:
                frame = [f for f, start, length in frames if start <= at + i < start + length]
                rest = payload[i:]
                carried = next((k for k in range(1, len(rest)) if rest[k] != (byte + k) & 0xFF), len(rest))
                return 1, [
                    f"{name}: {followed} bytes followed the counter, then it breaks at stream offset {at + i}"
                    f" (frame {frame[0] if frame else '?'}): byte {i} of the {len(payload)}-byte payload of the"
                    f" RDMA Write FPDU at TO {to:#x} (Write FPDU {index} of the stream):"
                    f" expected {expected:#04x}, found {byte:#04x}, and {carried} bytes from there continue"
                    f" from the found byte (a shift of {(byte - expected) & 0xFF} modulo 256)"]
            expected = (expected + 1) & 0xFF
            followed += 1
    writes_seen = sum(1 for _, stag, _, _ in found if stag == buffer_stag)
    return 0, [f"{name}: {followed} bytes in {writes_seen} Write FPDUs, the counter unbroken"]


# --- self-test -------------------------------------------------------------------------------

def _write(stag, to, payload):
    body = struct.pack(">HBBIQ", TAGGED_HEADER + len(payload), 0x81, 0x40 | RDMA_WRITE, stag, to) + payload
    return body + bytes(-len(body) % 4) + bytes(4)  # no CRC in use: the field is zero


def self_test():
    if not shutil.which("tshark"):
        print("write_counter: SKIPPED: tshark is not installed")
        return 77
    reply = MPA_KEYS[1] + bytes(4)
    counter = bytes(i & 0xFF for i in range(5000))
    good = [_write(0x100, 0, counter[:1500]), _write(0x200, 0, bytes(16)), _write(0x100, 1500, counter[1500:3000]),
            _write(0x100, 3000, counter[3000:5000])]
    shifted = list(good)
    shifted[2] = _write(0x100, 1500, counter[1900:3400])  # a payload taken from 400 bytes further on
    cases = [("unbroken", good, 0, "unbroken"), ("shifted", shifted, 1, "a shift of 144")]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.pcap")
        for name, fpdus, want, text in cases:
            stream = reply + b"".join(fpdus)
            _pcap(path, _passive_segments(MPA_KEYS[0] + bytes(4), stream))
            got, lines = analyse(path, src=7)
            ok = got == want and text in lines[-1]
            failures += not ok
            print(f"write_counter self-test {name}: {'ok' if ok else 'FAIL'} (verdict {got}, expected {want})")
            for line in lines:
                print("  " + line)
    return 1 if failures else 0


def main(argv):
    return side_main(argv, "write_counter", __doc__, analyse, self_test)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
