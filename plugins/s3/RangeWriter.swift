#if canImport(Glibc)
import Glibc
#endif
import CCRC64NVME
import Dispatch
import OrchestratePluginFiles
import OrchestratePluginKit

/// How a download whose only check is a CRC-64 writes its ranges: the bytes of each GET are
/// copied into chunks of `chunkSize` as they arrive; a pool of writer threads computes each
/// chunk's CRC from memory and writes it with `O_DIRECT` where the file system allows it, so
/// the file is never read back to be hashed, its pages never pass through the page cache, and
/// the kernel has no writeback left for the fsyncs that journal the ranges. The file's CRC is
/// the chunks' CRCs combined in order (`crc64nvme_combine`), folded into a running CRC as the
/// written prefix grows (what is held is the ranges that came ahead of it); the ranges an
/// earlier attempt left on disk are read back once, on a thread of their own, beside the
/// transfers.
///
/// What this checks is the bytes as they were received (the network and the server), not a
/// read of the disk after: the same as S3's own checksums on a GET.
///
/// Threads: `stream(at:)`, the streams' `append` and `landed()` belong to the thread driving the
/// transfers; the chunks are written (and resumed ranges read back) on the writer's threads.
/// `drain` or `stop` waits for them, and must be called before the partial file is committed,
/// discarded or closed.
final class RangeWriter: @unchecked Sendable {
    /// A chunk: what one write and one CRC cover. Range starts (multiples of the range size)
    /// are chunk starts; a chunk never crosses a range's end.
    static let chunkSize = 1 << 20

    private let file: LocalFile
    private let rangeSize: Int64
    private let size: Int64
    private let queue = DispatchQueue(label: "orchestrate.s3.range-writer", attributes: .concurrent)
    private let readingBack = DispatchQueue(label: "orchestrate.s3.range-read-back")
    /// Chunk writes under way.
    private let writing = DispatchGroup()
    /// The read-back under way (a failed attempt does not wait for it: `stop` ends it).
    private let readingBackDone = DispatchGroup()
    /// Free chunk buffers; `available` counts them.
    private let available: DispatchSemaphore
    private let allBuffers: [UnsafeMutableRawPointer]
    // Under `lock`.
    private let lock = Lock()
    private var free: [UnsafeMutableRawPointer]
    /// The O_DIRECT descriptor while direct writes work; nil once the file system refused one.
    private var direct: LocalFile?
    /// The chunks written of each range not yet whole: by range, then by offset, CRC and length.
    private var chunks: [Int: [Int64: (crc: UInt64, length: Int)]] = [:]
    /// The CRC of each range wholly written (its chunks combined) or read back, ahead of the prefix.
    private var rangeCRCs: [Int: UInt64] = [:]
    /// The CRC of the object's first `prefixRanges` ranges.
    private var prefixCRC: UInt64 = 0
    private var prefixRanges = 0
    private var landedRanges: [Int] = []
    private var failure: StepError?
    private var stopped = false

    /// `buffers` chunks at most are in memory at once (fewer for a small object: never more
    /// than it has chunks, plus one): a stream waits for a free one. Each GET holds one while it
    /// fills it, so `buffers` must exceed the GETs in flight.
    init(partial: PartialFile, rangeSize: Int64, size: Int64, buffers: Int) {
        file = partial.file
        self.rangeSize = rangeSize
        self.size = size
        // Direct writes need every range start aligned; a range size that is not leaves them off.
        direct = rangeSize % Int64(LocalFile.directAlignment) == 0 ? partial.file.openedForDirectWrites() : nil
        let chunks = Int(min(Int64(buffers), size / Int64(Self.chunkSize) + Int64(size / rangeSize) + 2))
        allBuffers = (0 ..< max(2, chunks)).map { _ in
            UnsafeMutableRawPointer.allocate(byteCount: Self.chunkSize, alignment: LocalFile.directAlignment)
        }
        free = allBuffers
        available = DispatchSemaphore(value: allBuffers.count)
    }

    deinit {
        writing.wait()
        readingBackDone.wait()
        for buffer in allBuffers { buffer.deallocate() }
    }

    /// A stream of the object's bytes from `offset` (a range's start) on: one per GET.
    func stream(at offset: Int64) -> Stream { Stream(writer: self, offset: offset) }

    /// The ranges wholly written since the last call (on the thread driving the transfers).
    func landed() -> [Int] {
        lock.withLock {
            defer { landedRanges = [] }
            return landedRanges
        }
    }

    /// Throws the first write that failed (the disk is full or gone).
    func check() throws(StepError) {
        if let failed = lock.withLock({ failure }) { throw failed }
    }

    /// Waits for every chunk handed over to be written.
    func drain() { writing.wait() }

    /// Drops the chunks not yet written, ends the read-back, and waits for the chunks being
    /// written (a failed or cancelled attempt): nothing touches the file after the step returned.
    func stop() {
        lock.withLock { stopped = true }
        writing.wait()
        readingBackDone.wait()
    }

    /// Hashes `ranges` (an earlier attempt's, on disk) from the file, in order, on a thread of
    /// its own while the transfers run: a resumed download does not wait for them to start.
    func readBack(_ ranges: [Int]) {
        guard !ranges.isEmpty else { return }
        readingBackDone.enter()
        readingBack.async { [self] in
            defer { readingBackDone.leave() }
            do throws(StepError) {
                for index in ranges {
                    let start = Int64(index) * rangeSize, length = rangeEnd(index) - start
                    let sums = Digests(md5: false, sha256: false, crc64: true)
                    let end = try file.readChunks(from: start, to: start + length) { bytes, _ throws(StepError) in
                        if lock.withLock({ stopped || failure != nil }) { throw .cancelled("reading back stopped") }
                        sums.update(bytes)
                    }
                    guard end == start + length else {
                        throw .permanent("\(file.path) is shorter than the ranges it held (\(end) of \(start + length) bytes)",
                                         code: "file_changed")
                    }
                    lock.withLock { record(index, crc: sums.finish().crc64) }
                }
            } catch {
                lock.withLock { failure = failure ?? error }
            }
        }
    }

    /// The CRC-64/NVME of the object's `size` bytes, once every range was written or read
    /// back (it waits for the read-back). Call after `drain`.
    func crc() throws(StepError) -> UInt64 {
        readingBackDone.wait()
        try check()
        let count = size == 0 ? 0 : Int((size + rangeSize - 1) / rangeSize)
        let (ranges, crc) = lock.withLock { (prefixRanges, prefixCRC) }
        guard ranges == count else {
            throw .permanent("\(file.path): range \(ranges) was never written (an internal error)", code: "range_writer")
        }
        return crc
    }

    /// Range `index`'s CRC is known; the prefix grows over it and the ranges after it already
    /// known. Under `lock`.
    private func record(_ index: Int, crc: UInt64) {
        rangeCRCs[index] = crc
        while let next = rangeCRCs.removeValue(forKey: prefixRanges) {
            prefixCRC = crc64nvme_combine(prefixCRC, next, UInt64(rangeEnd(prefixRanges) - Int64(prefixRanges) * rangeSize))
            prefixRanges += 1
        }
    }

    /// Where range `index` ends: the next one's start, or the object's end.
    private func rangeEnd(_ index: Int) -> Int64 { min(size, Int64(index + 1) * rangeSize) }

    /// The bytes of one GET on their way to chunks. `append` waits while every buffer is taken.
    final class Stream {
        private let writer: RangeWriter
        /// The next byte's offset in the object.
        private var offset: Int64
        private var buffer: UnsafeMutableRawPointer?
        private var chunkStart: Int64 = 0
        private var filled = 0

        fileprivate init(writer: RangeWriter, offset: Int64) {
            self.writer = writer
            self.offset = offset
        }

        /// A cut GET's last, incomplete chunk is never written: its range is fetched again.
        deinit { if let buffer { writer.giveBack(buffer) } }

        func append(_ bytes: UnsafeRawBufferPointer) throws(StepError) {
            try writer.check()
            guard var source = bytes.baseAddress else { return }
            var left = bytes.count
            while left > 0 {
                let target: UnsafeMutableRawPointer
                if let buffer {
                    target = buffer
                } else {
                    target = writer.takeBuffer()
                    buffer = target
                    chunkStart = offset
                    filled = 0
                }
                let rangeEnd = writer.rangeEnd(Int(chunkStart / writer.rangeSize))
                let room = min(RangeWriter.chunkSize - filled, Int(rangeEnd - chunkStart) - filled)
                let n = min(room, left)
                (target + filled).copyMemory(from: source, byteCount: n)
                filled += n
                offset += Int64(n)
                source += n
                left -= n
                if filled == RangeWriter.chunkSize || chunkStart + Int64(filled) == rangeEnd {
                    writer.submit(target, at: chunkStart, length: filled)
                    buffer = nil
                }
            }
        }
    }

    private func takeBuffer() -> UnsafeMutableRawPointer {
        available.wait()
        return lock.withLock { free.removeLast() }
    }

    private func giveBack(_ buffer: UnsafeMutableRawPointer) {
        lock.withLock { free.append(buffer) }
        available.signal()
    }

    /// A full buffer on its way to a writer thread, which owns it until it gives it back.
    private struct Chunk: @unchecked Sendable {
        let buffer: UnsafeMutableRawPointer
    }

    private func submit(_ buffer: UnsafeMutableRawPointer, at offset: Int64, length: Int) {
        writing.enter()
        let chunk = Chunk(buffer: buffer)
        queue.async { [self] in
            let buffer = chunk.buffer
            defer {
                giveBack(buffer)
                writing.leave()
            }
            guard lock.withLock({ !stopped && failure == nil }) else { return }
            let crc = crc64nvme_update(0, buffer, length)
            do throws(StepError) {
                try write(UnsafeRawBufferPointer(start: buffer, count: length), at: offset)
            } catch {
                lock.withLock { failure = failure ?? error }
                return
            }
            let index = Int(offset / rangeSize)
            lock.withLock {
                chunks[index, default: [:]][offset] = (crc, length)
                // Whole once its chunks hold all its bytes (a range's chunks never overlap): they
                // become one CRC, in order (what is kept stays one number per range).
                let pieces = chunks[index] ?? [:]
                guard pieces.values.reduce(0, { $0 + Int64($1.length) }) == rangeEnd(index) - Int64(index) * rangeSize else { return }
                chunks[index] = nil
                var at = Int64(index) * rangeSize, crc: UInt64 = 0
                while let chunk = pieces[at] {
                    crc = crc64nvme_combine(crc, chunk.crc, UInt64(chunk.length))
                    at += Int64(chunk.length)
                }
                guard at == rangeEnd(index) else {  // chunks that do not follow each other: a bug here
                    failure = failure ?? .permanent("\(file.path): range \(index)'s chunks end at \(at), not at its end", code: "range_writer")
                    return
                }
                record(index, crc: crc)
                landedRanges.append(index)
            }
        }
    }

    /// The aligned head of a chunk goes direct, the file's unaligned tail (its last chunk only)
    /// through the page cache. The first direct write the file system refuses (EINVAL: it has
    /// none, or wants another alignment; EOPNOTSUPP) turns them off for the rest of the file.
    private func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(StepError) {
        let aligned = bytes.count / LocalFile.directAlignment * LocalFile.directAlignment
        if aligned > 0, let direct = lock.withLock({ direct }) {
            do throws(StepError) {
                try direct.write(UnsafeRawBufferPointer(rebasing: bytes[0 ..< aligned]), at: offset)
                if aligned < bytes.count {
                    try file.write(UnsafeRawBufferPointer(rebasing: bytes[aligned...]), at: offset + Int64(aligned))
                }
                return
            } catch where error.code == "EINVAL" || error.code == "errno_\(EOPNOTSUPP)" {
                lock.withLock { self.direct = nil }
            }
        }
        try file.write(bytes, at: offset)
    }
}
