"""Durable, append-only partition logs with an in-memory index.

A partition is a directory of segment files named after the byte offset of their first record
(``00000000000000000000.seg``). A record is ``>IIqq`` (payload length, CRC-32 of payload, sequence
number, enqueued time in ms) followed by the delivery-ready payload (see ``events``). An event's
offset is the byte position of its record in the partition's whole history, so offsets are
monotonically increasing and survive trimming, as in Event Hubs.

The index (offset and enqueued time per sequence number) lives in memory as ``array('q')`` and is
rebuilt by scanning the segments at start-up; a torn record at the tail (crash mid-write) fails its
length or CRC check and is cut off. Appends are one ``os.write`` per client transfer.

Durability (``fsync`` policy):

* ``always`` -- fsync after every append, before the client is acknowledged.
* ``batch`` (default) -- group commit: acknowledgements of everything appended during one pass of
  the event loop wait for a single fsync per dirty partition. Survives power loss, costs one fsync
  per loop pass rather than per event.
* ``never`` -- acknowledge once the bytes are in the OS page cache: survives a crash or SIGKILL of
  the server process, not a crash of the machine.

Retention trims whole segments from the head (never the active one), by age of a segment's newest
event (``retention_seconds``) or by total size (``retention_bytes``); ``begin_sequence_number`` moves
to the first remaining event.
"""

from __future__ import annotations

import logging
import os
import struct
import time
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from pathlib import Path

_LOG = logging.getLogger(__name__)
RECORD = struct.Struct(">IIqq")
RECORD_SIZE = RECORD.size
SEGMENT_SUFFIX = ".seg"
READ_CHUNK = 256 * 1024


class Segment:
    """One segment file: its base offset, its size, and its first sequence number."""

    __slots__ = ("base", "path", "fd", "size", "first_seq", "last_time")

    def __init__(self, base: int, path: Path, fd: int, size: int, first_seq: int, last_time: int):
        self.base = base
        self.path = path
        self.fd = fd
        self.size = size
        self.first_seq = first_seq
        self.last_time = last_time


class PartitionLog:
    """The append-only log of one partition."""

    def __init__(self, directory: Path, *, segment_bytes: int = 64 * 1024 * 1024):
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []
        self.offsets = array("q")
        self.times = array("q")
        self.begin_seq = 0
        self.next_seq = 0
        self.dirty = False
        self.listeners: set[Callable[[], None]] = set()
        directory.mkdir(parents=True, exist_ok=True)
        self._recover()

    # -- properties -----------------------------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        return self.next_seq == self.begin_seq

    @property
    def last_seq(self) -> int:
        return self.next_seq - 1

    def last_offset(self) -> int:
        return self.offsets[-1] if self.offsets else -1

    def last_time(self) -> int:
        return self.times[-1] if self.times else 0

    @property
    def stored_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # -- recovery ------------------------------------------------------------------------------

    def _recover(self) -> None:
        paths = sorted(self.directory.glob("*" + SEGMENT_SUFFIX))
        expected_seq: int | None = None
        for path in paths:
            base = int(path.stem)
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
            data = os.pread(fd, os.fstat(fd).st_size, 0)
            pos = 0
            first_seq = -1
            last_time = 0
            while pos + RECORD_SIZE <= len(data):
                length, crc, seq, ts = RECORD.unpack_from(data, pos)
                end = pos + RECORD_SIZE + length
                if end > len(data) or zlib.crc32(data[pos + RECORD_SIZE : end]) != crc:
                    break
                if expected_seq is not None and seq != expected_seq:
                    _LOG.warning("log %s: sequence gap at %s (expected %s); truncating", path, seq, expected_seq)
                    break
                if first_seq < 0:
                    first_seq = seq
                    if not self.offsets:
                        self.begin_seq = seq
                self.offsets.append(base + pos)
                self.times.append(ts)
                last_time = ts
                expected_seq = seq + 1
                pos = end
            if pos != len(data):
                _LOG.warning("log %s: cutting %d torn or invalid bytes at position %d", path, len(data) - pos, pos)
                os.ftruncate(fd, pos)
            if first_seq < 0:
                first_seq = expected_seq if expected_seq is not None else 0
            self.segments.append(Segment(base, path, fd, pos, first_seq, last_time))
        if expected_seq is not None:
            self.next_seq = expected_seq
        if not self.offsets and self.segments:
            # every segment empty: keep the offset and sequence numbering where it was
            self.begin_seq = self.next_seq = self.segments[-1].first_seq
        if not self.segments:
            self._new_segment(0, 0)

    def _new_segment(self, base: int, first_seq: int) -> Segment:
        path = self.directory / f"{base:020d}{SEGMENT_SUFFIX}"
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        segment = Segment(base, path, fd, 0, first_seq, 0)
        self.segments.append(segment)
        _fsync_dir(self.directory)
        return segment

    # -- writing -------------------------------------------------------------------------------

    def append(self, builders: Iterable[Callable[[int, int, int], bytes]], now_ms: int | None = None) -> tuple[int, int]:
        """Append events; each builder maps ``(sequence, offset, enqueued_ms)`` to its payload.

        Returns ``(first sequence number, count)``. All records go out in one write.
        """
        segment = self.segments[-1]
        if segment.size >= self.segment_bytes:
            segment = self._new_segment(segment.base + segment.size, self.next_seq)
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        if self.times and now_ms < self.times[-1]:
            now_ms = self.times[-1]  # keep enqueued times monotonic so time filters can bisect
        first = self.next_seq
        seq = first
        offset = segment.base + segment.size
        parts = []
        new_offsets = []
        for build in builders:
            payload = build(seq, offset, now_ms)
            parts.append(RECORD.pack(len(payload), zlib.crc32(payload), seq, now_ms))
            parts.append(payload)
            new_offsets.append(offset)
            offset += RECORD_SIZE + len(payload)
            seq += 1
        if seq == first:
            return first, 0
        data = b"".join(parts)
        written = os.write(segment.fd, data)
        while written < len(data):  # short writes are rare but legal
            written += os.write(segment.fd, data[written:])
        segment.size += len(data)
        segment.last_time = now_ms
        self.offsets.extend(new_offsets)
        self.times.extend([now_ms] * (seq - first))
        self.next_seq = seq
        self.dirty = True
        for listener in list(self.listeners):
            listener()
        return first, seq - first

    def sync(self) -> None:
        if self.dirty:
            os.fsync(self.segments[-1].fd)
            self.dirty = False

    # -- reading -------------------------------------------------------------------------------

    def read(self, from_seq: int, max_count: int) -> list[memoryview]:
        """Payloads of up to ``max_count`` events from ``from_seq`` (fewer at a segment end)."""
        if from_seq < self.begin_seq:
            from_seq = self.begin_seq
        if from_seq >= self.next_seq or max_count <= 0:
            return []
        offset = self.offsets[from_seq - self.begin_seq]
        index = bisect_right([s.base for s in self.segments], offset) - 1
        segment = self.segments[index]
        pos = offset - segment.base
        want = min(segment.size - pos, READ_CHUNK)
        data = memoryview(os.pread(segment.fd, want, pos))
        out: list[memoryview] = []
        at = 0
        while len(out) < max_count and at + RECORD_SIZE <= len(data):
            length = RECORD.unpack_from(data, at)[0]
            end = at + RECORD_SIZE + length
            if end > len(data):
                if not out:  # a record larger than the chunk: read it whole
                    data = memoryview(os.pread(segment.fd, RECORD_SIZE + length, pos + at))
                    out.append(data[RECORD_SIZE:])
                break
            out.append(data[at + RECORD_SIZE : end])
            at = end
        return out

    # -- positions -----------------------------------------------------------------------------

    def seq_for_offset(self, offset: int, inclusive: bool) -> int:
        """First sequence number whose offset is ``>= offset`` (inclusive) or ``> offset``."""
        find = bisect_left if inclusive else bisect_right
        return self.begin_seq + find(self.offsets, offset)

    def seq_for_time(self, ms: int, inclusive: bool) -> int:
        find = bisect_left if inclusive else bisect_right
        return self.begin_seq + find(self.times, ms)

    # -- retention -----------------------------------------------------------------------------

    def trim(self, retention_seconds: float | None, retention_bytes: int | None, now_ms: int | None = None) -> int:
        """Delete head segments past retention; returns how many events were dropped."""
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        dropped = 0
        while len(self.segments) > 1:
            head = self.segments[0]
            too_old = retention_seconds is not None and head.last_time and head.last_time < now_ms - retention_seconds * 1000
            too_big = retention_bytes is not None and self.stored_bytes > retention_bytes
            if not (too_old or too_big):
                break
            next_first = self.segments[1].first_seq
            count = next_first - self.begin_seq
            del self.offsets[:count]
            del self.times[:count]
            self.begin_seq = next_first
            dropped += count
            os.close(head.fd)
            head.path.unlink(missing_ok=True)
            self.segments.pop(0)
            _LOG.info("log %s: retention removed segment %s (%d events); begin sequence number now %d",
                      self.directory, head.path.name, count, self.begin_seq)
        return dropped

    def close(self) -> None:
        self.dirty = False  # nothing left to sync: a group commit or a delayed ack after this is a no-op
        for segment in self.segments:
            try:
                os.close(segment.fd)
            except OSError:
                pass
        self.segments = []


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
