import CMultiMD5
import Dispatch
import OrchestratePluginFiles
import OrchestratePluginKit

/// The MD5 and SHA-256 of a multipart upload's parts, computed ahead on a thread of its own,
/// in the order given, so the thread that drives the transfers never reads the file to hash
/// it: it takes a part's digests when it hands the part out, and waits only while the hasher
/// is behind (the first parts). 48 bytes a part, 10,000 parts at most: kept until the end, for
/// CompleteMultipartUpload's list of part checksums.
///
/// MD5 is the costly one (libcrypto's runs at ~0.9 GB/s here, SHA-256 with the CPU's SHA
/// instructions at ~2 GB/s), so parts of the same length are hashed side by side, up to 16 at
/// a time, by the multi-lane MD5 of CMultiMD5 (~4.7 GB/s with AVX-512): for 1 GiB that is
/// 0.2 s of CPU instead of 1.2 s, on a machine whose cores the server needs too.
final class PartHasher: @unchecked Sendable {
    typealias Digest = (md5: [UInt8], sha256: [UInt8])

    /// Parts hashed side by side on this CPU (0: one at a time, by libcrypto).
    static let lanes = Int(multi_md5_lanes())
    /// Fewer parts than this (the tail of an upload) go one at a time: libcrypto's single MD5
    /// beats a mostly empty vector.
    static let fewestSideBySide = 3
    /// The bytes of each part read at a time when hashing side by side.
    private static let laneChunk = 256 << 10

    private let queue = DispatchQueue(label: "orchestrate.s3.part-hash")
    /// One read buffer for every part (`lanes` chunks side by side), on `queue` only: a buffer
    /// allocated per part would stay in glibc's heap of the hashing thread (15 MiB more peak RSS
    /// for 1 GiB).
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(LocalFile.chunkSize, PartHasher.lanes * PartHasher.laneChunk),
                                                                alignment: 4096)
    private let lock = Lock()
    // Under `lock`.
    private var results: [Int: Result<Digest, StepError>] = [:]
    private var stopped = false
    // The owner's thread only. Parts hashed together share one work item, which records all
    // their results before it ends.
    private var items: [Int: DispatchWorkItem] = [:]

    /// Starts hashing the parts `order` lists (each `range(n)` of `file`) in that order.
    init(file: LocalFile, step: StepContext, order: [Int], range: @escaping (Int) -> (offset: Int64, length: Int64)) {
        for batch in Self.batches(order, length: { range($0).length }, lanes: Self.lanes) {
            let item = DispatchWorkItem { [self] in
                let outcome: Result<[Digest], StepError>
                if lock.withLock({ stopped }) {
                    outcome = .failure(.cancelled("hashing stopped"))
                } else {
                    do throws(StepError) {
                        let ranges = batch.map(range)
                        outcome = .success(batch.count == 1 ? [try hash(file, ranges[0], step: step)] : try hashSideBySide(file, ranges, step: step))
                    } catch {
                        outcome = .failure(error)
                    }
                }
                lock.withLock {
                    for (i, n) in batch.enumerated() { results[n] = outcome.map { $0[i] } }
                }
            }
            for n in batch { items[n] = item }
            queue.async(execute: item)
        }
    }

    deinit { buffer.deallocate() }

    /// `order` cut into what is hashed together: runs of parts of one length (a multiple of 64,
    /// MD5's block), at most `lanes` long and at least `fewestSideBySide`; every other part alone.
    static func batches(_ order: [Int], length: (Int) -> Int64, lanes: Int) -> [[Int]] {
        var batches: [[Int]] = []
        var run: [Int] = []
        func close() {
            if run.count >= fewestSideBySide { batches.append(run) } else { batches += run.map { [$0] } }
            run = []
        }
        for n in order {
            let size = length(n)
            guard lanes > 1, size > 0, size % 64 == 0 else {
                close()
                batches.append([n])
                continue
            }
            if let first = run.first, length(first) != size || run.count == lanes { close() }
            run.append(n)
        }
        close()
        return batches
    }

    /// The digests of one part through `buffer`, by libcrypto.
    private func hash(_ file: LocalFile, _ part: (offset: Int64, length: Int64), step: StepContext) throws(StepError) -> Digest {
        let digests = Digests(md5: true, sha256: true)
        var at = part.offset
        let end = part.offset + part.length
        while at < end {
            try step.checkCancellation()
            if lock.withLock({ stopped }) { throw .cancelled("hashing stopped") }
            let want = Int(min(Int64(LocalFile.chunkSize), end - at))
            let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[0 ..< want])
            try readAll(file, into: chunk, at: at, end: end)
            digests.update(UnsafeRawBufferPointer(chunk))
            at += Int64(want)
        }
        let sums = digests.finish()
        return (sums.md5, sums.sha256)
    }

    /// The digests of parts of one length (a multiple of 64), side by side: a chunk of each
    /// part read into its lane of `buffer`, then each lane's SHA-256 and all lanes' MD5 at once.
    private func hashSideBySide(_ file: LocalFile, _ parts: [(offset: Int64, length: Int64)], step: StepContext) throws(StepError) -> [Digest] {
        let length = parts[0].length
        var md5 = multi_md5_state()
        multi_md5_init(&md5, Int32(Self.lanes))
        let sha = parts.map { _ in Digests(md5: false, sha256: true) }
        var done: Int64 = 0
        while done < length {
            try step.checkCancellation()
            // A stop (the upload failed) need not wait for up to 16 parts to be read.
            if lock.withLock({ stopped }) { throw .cancelled("hashing stopped") }
            let want = Int(min(Int64(Self.laneChunk), length - done))
            for (lane, part) in parts.enumerated() {
                let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[lane * Self.laneChunk ..< lane * Self.laneChunk + want])
                try readAll(file, into: chunk, at: part.offset + done, end: part.offset + part.length)
                sha[lane].update(UnsafeRawBufferPointer(chunk))
            }
            // Lanes past `parts.count` hash whatever their chunk of `buffer` holds, unread.
            multi_md5_blocks(&md5, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Self.laneChunk, want / 64)
            done += Int64(want)
        }
        multi_md5_finish(&md5, UInt64(length))
        return parts.indices.map { lane in
            var digest = [UInt8](repeating: 0, count: 16)
            multi_md5_digest(&md5, Int32(lane), &digest)
            return (digest, sha[lane].finish().sha256)
        }
    }

    /// Fills `chunk` from `offset`; a file that ends first is an error (it changed: `end` is
    /// where the part ends).
    private func readAll(_ file: LocalFile, into chunk: UnsafeMutableRawBufferPointer, at offset: Int64, end: Int64) throws(StepError) {
        var filled = 0
        while filled < chunk.count {
            let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: chunk[filled...]), at: offset + Int64(filled))
            guard n > 0 else {
                throw .permanent("\(file.path) shrank while it was read (\(offset + Int64(filled)) of \(end) bytes)", code: "file_changed")
            }
            filled += n
        }
    }

    /// Part `n`'s digests, once hashed (a file that shrank meanwhile is an error). Asked any
    /// number of times (a resume compares a part, then sends it when the server's is not it):
    /// its work item is waited for once only, as libdispatch requires (a second wait traps).
    func digests(of n: Int) throws(StepError) -> Digest {
        if let done = lock.withLock({ results[n] }) { return try done.get() }
        guard let item = items[n] else { preconditionFailure("part \(n) was not given to the hasher") }
        item.wait()
        return try lock.withLock { results[n]! }.get()
    }

    /// Drops the parts not hashed yet and returns once the hashing thread is idle: no thread of
    /// the step reads its file after the step returned. Lets the work items go: each holds this
    /// hasher, which holds them, so kept they would keep it and its buffer for the process's
    /// life (its 4 MiB buffer an upload, in a `serve` that runs for months).
    func stop() {
        lock.withLock { stopped = true }
        queue.sync {}
        items.removeAll()
    }
}
