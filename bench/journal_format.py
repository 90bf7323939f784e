"""Which journal format: JSON lines (before), SQLite in WAL mode (chosen), columnar segments.

The same synthetic records (32 chunks each, the report_scale shape) go through three writers, in
batches as the writer's thread sees them every 0.5 s (25 records: 50 req/s; 300: the
``client_overhead --stress`` rate of ~600 req/s), and are read back:

- **jsonl**: the previous journal (``codec.encode_record`` + ``json.dumps`` per line, appended);
- **sqlite**: infmon's ``JournalWriter`` (rows, one transaction per flush) and ``SessionReader``;
- **columnar**: a prototype written here for the comparison: each flush appends one segment to a
  file (a header with a CRC and the batch's time and step range, then one numpy array per
  field and the chunk gaps as int32), its range also appended to a small index file; a reader
  picks segments from the index and ``numpy.frombuffer``s them.

Printed: the writer's CPU per 1,000 records (``time.thread_time`` of the flushing thread),
bytes per record, and the time to read every record into columns, one step, and one minute.

    python bench/journal_format.py [--records 300000]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from infmon.journal import JournalWriter, SessionReader  # noqa: E402
from infmon.journal.codec import encode_record  # noqa: E402
from infmon.model.records.columns import RecordColumns  # noqa: E402
from infmon.model.records.request import RequestRecord  # noqa: E402

STEP_RECORDS = 40_000


def make_records(n: int, seed: int = 1) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    gaps = rng.uniform(0.015, 0.025, size=(n, 32))
    gaps[:, 0] = rng.uniform(0.05, 0.2, size=n)
    out = []
    for i in range(n):
        sent = 100.0 + i * 0.02
        times = tuple((sent + np.cumsum(gaps[i])).tolist())
        out.append(
            RequestRecord(
                i, sent, times, times[-1] + 0.0005, (1,) * 32, 128, 32, "length", 200,
                step=i // STEP_RECORDS, concurrency=16,
            )
        )  # fmt: skip
    return out


# ---- the JSON-lines writer as it was -----------------------------------------------------------


def jsonl_write(path: Path, batches: Sequence[Sequence[RequestRecord]]) -> float:
    cpu = 0.0
    with open(path / "records.jsonl", "a", encoding="utf-8") as f:
        for batch in batches:
            t0 = time.thread_time()
            lines = [
                json.dumps(encode_record(r), separators=(",", ":"), allow_nan=False) for r in batch
            ]
            f.write("\n".join(lines) + "\n")
            f.flush()
            cpu += time.thread_time() - t0
    return cpu


def sqlite_write(path: Path, batches: Sequence[Sequence[RequestRecord]]) -> float:
    j = JournalWriter(path, autoflush=False)
    cpu = 0.0
    for batch in batches:
        for r in batch:
            j.write_record(r)
        t0 = time.thread_time()
        j.flush()
        cpu += time.thread_time() - t0
    j.close()
    return cpu


# ---- the columnar prototype ----------------------------------------------------------------------

_HEAD = struct.Struct("<4sIIIIddqq")
_INDEX = struct.Struct("<QIddqq")
_F8 = ("sent_s", "rate")
_I8 = ("request_id", "first_us", "last_us", "end_us")
_I4 = ("chunks", "chunk_token_sum", "output_tokens", "prompt_tokens", "step", "concurrency")
_I2 = ("http_status", "flags")


def _segment(batch: Sequence[RequestRecord]) -> tuple[bytes, tuple[float, float, int, int]]:
    c = RecordColumns.from_records(batch)
    flags = c.warmup.astype(np.int64) + 2 * c.error_code + 256 * c.finish_code
    arrays = [c.sent_s, c.rate] + [getattr(c, k) for k in _I8]
    parts = [a.astype("<f8" if i < 2 else "<i8").tobytes() for i, a in enumerate(arrays)]
    parts += [getattr(c, k).astype("<i4").tobytes() for k in _I4]
    parts += [c.http_status.astype("<i2").tobytes(), flags.astype("<i2").tobytes()]
    assert c.chunk_us is not None and c.chunk_start is not None
    gaps = np.diff(c.chunk_us)
    keep = np.ones(gaps.size, dtype=bool)
    keep[c.chunk_start[1:-1][c.chunk_start[1:-1] > 0] - 1] = False
    parts.append(gaps[keep].astype("<i4").tobytes())
    parts.append(json.dumps([c.error_kinds, c.finish_reasons]).encode())
    payload = b"".join(parts)
    rng = (float(c.sent_s.min()), float(c.sent_s.max()), int(c.step.min()), int(c.step.max()))
    head = _HEAD.pack(
        b"IMSG", len(c), int(gaps[keep].size), len(payload), zlib.crc32(payload), *rng
    )
    return head + payload, rng


def columnar_write(path: Path, batches: Sequence[Sequence[RequestRecord]]) -> float:
    cpu = 0.0
    with open(path / "records.seg", "ab") as seg, open(path / "records.idx", "ab") as idx:
        for batch in batches:
            t0 = time.thread_time()
            data, rng = _segment(batch)
            offset = seg.tell()
            seg.write(data)
            seg.flush()
            idx.write(_INDEX.pack(offset, len(batch), *rng))
            idx.flush()
            cpu += time.thread_time() - t0
    return cpu


def columnar_read(path: Path, keep: Callable[[float, float, int, int], bool]) -> int:
    """Decode the segments whose range ``keep`` accepts; returns the records read."""
    index = np.fromfile(path / "records.idx", dtype=np.dtype("<u8,<u4,<f8,<f8,<i8,<i8"))
    n, found = 0, []
    with open(path / "records.seg", "rb") as f:
        for offset, _count, t0, t1, s0, s1 in index.tolist():
            if not keep(t0, t1, s0, s1):
                continue
            f.seek(offset)
            _, k, n_gaps, length, crc, *_ = _HEAD.unpack(f.read(_HEAD.size))
            payload = f.read(length)
            if zlib.crc32(payload) != crc:  # a torn last segment
                break
            pos, cols = 0, {}
            for names, dtype, size in ((_F8, "<f8", 8), (_I8, "<i8", 8), (_I4, "<i4", 4)):
                for name in names:
                    cols[name] = np.frombuffer(payload, dtype, k, pos)
                    pos += size * k
            for name in _I2:
                cols[name] = np.frombuffer(payload, "<i2", k, pos)
                pos += 2 * k
            cols["gaps"] = np.frombuffer(payload, "<i4", n_gaps, pos).astype(np.int64)
            found.append(cols)
            n += k
    if found:  # assembled into one array per field, the gaps into running offsets
        merged = {key: np.concatenate([c[key] for c in found]) for key in found[0]}
        np.cumsum(merged["gaps"])
    return n


# ---- the measurements ---------------------------------------------------------------------------


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def read_times(name: str, d: Path, step: int, mid: float) -> tuple[float, float, float]:
    """Seconds to read every record, one step, one minute (send time) into columns."""
    if name == "columnar":
        return (
            _timed(lambda: columnar_read(d, lambda *r: True)),
            _timed(lambda: columnar_read(d, lambda t0, t1, s0, s1: s0 <= step <= s1)),
            _timed(lambda: columnar_read(d, lambda t0, t1, s0, s1: t1 >= mid and t0 < mid + 60)),
        )
    r = SessionReader(d)
    return (
        _timed(r.read_columns),
        _timed(lambda: r.read_columns(step=step)),
        _timed(lambda: r.read_columns(since_s=mid, until_s=mid + 60)),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=300_000)
    args = ap.parse_args()
    records = make_records(args.records)
    step, mid = 2, records[len(records) // 2].sent_s
    print(f"{args.records:,} records of 32 chunks; load average {os.getloadavg()[0]:.2f}")
    print(
        "format   | writer CPU ms/1k rec (25/flush, 300/flush) | B/rec | read all | a step | a minute"
    )
    for name, writer in (
        ("jsonl", jsonl_write),
        ("sqlite", sqlite_write),
        ("columnar", columnar_write),
    ):
        cpu = {}
        with tempfile.TemporaryDirectory() as tmp:
            for batch in (25, 300):
                d = Path(tmp) / str(batch)
                d.mkdir()
                batches = [records[i : i + batch] for i in range(0, len(records), batch)]
                cpu[batch] = writer(d, batches) / len(records) * 1e6
            d = Path(tmp) / "300"
            size = sum(p.stat().st_size for p in d.iterdir() if not p.name.endswith(".lock"))
            every, one, minute = read_times(name, d, step, mid)
        print(
            f"{name:<8} | {cpu[25]:8.1f} {cpu[300]:8.1f}{'':25} | {size / len(records):5.0f} | "
            f"{every:6.2f} s | {one:5.3f} s | {minute:5.3f} s"
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
