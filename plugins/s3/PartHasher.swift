import Dispatch
import OrchestratePluginFiles
import OrchestratePluginKit

/// The MD5 and SHA-256 of a multipart upload's parts, computed ahead on a thread of its own,
/// in the order given, so the thread that drives the transfers never reads the file to hash
/// it: it takes a part's digests when it hands the part out, and waits only while the hasher
/// is behind (the first part). 48 bytes a part, 10,000 parts at most: kept until the end, for
/// CompleteMultipartUpload's list of part checksums.
final class PartHasher: @unchecked Sendable {
    typealias Digest = (md5: [UInt8], sha256: [UInt8])

    private let queue = DispatchQueue(label: "orchestrate.s3.part-hash")
    /// One read buffer for every part, on `queue` only: a buffer allocated per part would stay
    /// in glibc's heap of the hashing thread (15 MiB more peak RSS for 1 GiB).
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: LocalFile.chunkSize, alignment: 4096)
    private let lock = Lock()
    // Under `lock`.
    private var results: [Int: Result<Digest, StepError>] = [:]
    private var stopped = false
    // The owner's thread only.
    private var items: [Int: DispatchWorkItem] = [:]

    /// Starts hashing the parts `order` lists (each `range(n)` of `file`) one after the other.
    init(file: LocalFile, step: StepContext, order: [Int], range: (Int) -> (offset: Int64, length: Int64)) {
        for n in order {
            let (offset, length) = range(n)
            let item = DispatchWorkItem { [self] in
                let outcome: Result<Digest, StepError>
                if lock.withLock({ stopped }) {
                    outcome = .failure(.cancelled("hashing stopped"))
                } else {
                    do throws(StepError) { outcome = .success(try hash(file, offset: offset, length: length, step: step)) } catch {
                        outcome = .failure(error)
                    }
                }
                lock.withLock { results[n] = outcome }
            }
            items[n] = item
            queue.async(execute: item)
        }
    }

    deinit { buffer.deallocate() }

    /// The digests of `length` bytes of `file` from `offset`, through `buffer`; a file shorter
    /// than that is an error (it changed).
    private func hash(_ file: LocalFile, offset: Int64, length: Int64, step: StepContext) throws(StepError) -> Digest {
        let digests = Digests()
        var at = offset
        let end = offset + length
        while at < end {
            try step.checkCancellation()
            let want = Int(min(Int64(buffer.count), end - at))
            let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0 ..< want]), at: at)
            guard n > 0 else {
                throw .permanent("\(file.path) shrank while it was read (\(at) of \(end) bytes)", code: "file_changed")
            }
            digests.update(UnsafeRawBufferPointer(rebasing: buffer[0 ..< n]))
            at += Int64(n)
        }
        return digests.finish()
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
    /// life (a megabyte an upload, in a `serve` that runs for months).
    func stop() {
        lock.withLock { stopped = true }
        queue.sync {}
        items.removeAll()
    }
}
