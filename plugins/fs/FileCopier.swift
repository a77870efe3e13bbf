#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateDigest
import OrchestrateJSON
import OrchestratePluginKit

/// Streams a file into `<destination>.partial` in 1 MiB chunks while hashing it, then fsyncs
/// and renames it into place, so the destination never exists half-written.
///
/// Resumable: every 8 MiB (or second) the partial file is fsynced and its length saved as the
/// step's checkpoint. The next attempt, finding the checkpoint and the partial file, and the
/// source unchanged (same size and mtime), re-hashes the part already copied and continues from
/// there instead of starting over.
struct FileCopier {
    let step: StepContext

    struct Copied {
        let sha256: String
        let size: Int64
    }

    /// Save a checkpoint at least this often (bytes, milliseconds).
    static let checkpointBytes: Int64 = 8 << 20
    static let checkpointMilliseconds: Int64 = 1000

    func copy(source: String, to destination: String, expectedSHA256: String?) throws(StepError) -> Copied {
        guard let sourceInfo = try FileSystem.info(source) else {
            throw .permanent("source \(source) does not exist", code: "ENOENT")
        }
        guard sourceInfo.isRegular else { throw FileSystem.notAFile("source", source, sourceInfo) }
        try FileSystem.makeDirectories(FileSystem.parent(of: destination))
        let partial = destination + ".partial"

        let input = try FileSystem.openFile(source, O_RDONLY)
        defer { close(input) }
        let resumeAt = try resumePoint(partial: partial, source: sourceInfo)
        let output = try FileSystem.openFile(partial, O_RDWR | O_CREAT | (resumeAt == 0 ? O_TRUNC : 0))
        defer { close(output) }
        if resumeAt > 0, ftruncate(output, off_t(resumeAt)) != 0 { throw .posix("cannot truncate \(partial)") }

        let buffer = UnsafeMutableRawPointer.allocate(byteCount: FileSystem.chunkSize, alignment: 4096)
        defer { buffer.deallocate() }
        let hash = SHA256()
        var offset: Int64 = 0

        // Re-hash what an earlier attempt already copied.
        while offset < resumeAt {
            let n = try FileSystem.readChunk(output, into: buffer, count: Int(min(Int64(FileSystem.chunkSize), resumeAt - offset)),
                                             at: offset, path: partial)
            if n == 0 { break }
            hash.update(UnsafeRawBufferPointer(start: buffer, count: n))
            offset += Int64(n)
            try step.checkCancellation()
        }

        var checkpointedAt = offset
        var checkpointTime = Clock.milliseconds()
        func checkpoint() throws(StepError) {
            try FileSystem.sync(output, path: partial)
            step.saveCheckpoint(json: ["offset": .int(offset), "source_size": .int(sourceInfo.size),
                                       "source_mtime_ns": .int(sourceInfo.mtimeNanoseconds)])
            checkpointedAt = offset
            checkpointTime = Clock.milliseconds()
        }

        while true {
            if step.isCancelled {
                try checkpoint()
                throw .cancelled("copy of \(source) stopped at byte \(offset) of \(sourceInfo.size)")
            }
            let n = try FileSystem.readChunk(input, into: buffer, count: FileSystem.chunkSize, at: offset, path: source)
            if n == 0 { break }
            try FileSystem.writeAll(output, from: buffer, count: n, at: offset, path: partial)
            hash.update(UnsafeRawBufferPointer(start: buffer, count: n))
            offset += Int64(n)
            step.progress(bytesDone: offset, bytesTotal: max(sourceInfo.size, offset), filesDone: 0, filesTotal: 1)
            if offset - checkpointedAt >= FileCopier.checkpointBytes
                || Clock.milliseconds() - checkpointTime >= FileCopier.checkpointMilliseconds
            {
                try checkpoint()
            }
        }

        try FileSystem.sync(output, path: partial)
        _ = fchmod(output, sourceInfo.mode & 0o7777)
        let digest = hash.finish()
        if let expectedSHA256, expectedSHA256.lowercased() != digest {
            try FileSystem.removeFile(partial)
            throw .permanent("sha256 of \(source) is \(digest), not \(expectedSHA256.lowercased()) (the sha256 input)",
                             code: "sha256_mismatch")
        }
        try FileSystem.renameFile(partial, destination)
        try FileSystem.syncDirectory(FileSystem.parent(of: destination))
        step.progress(bytesDone: offset, bytesTotal: offset, filesDone: 1, filesTotal: 1)
        return Copied(sha256: digest, size: offset)
    }

    /// Where an earlier attempt left off, or 0 to start over (logging why).
    private func resumePoint(partial: String, source: FileSystem.Info) throws(StepError) -> Int64 {
        guard let saved = step.loadCheckpointJSON(), let offset = saved["offset"]?.intValue else { return 0 }
        guard saved["source_size"]?.intValue == source.size, saved["source_mtime_ns"]?.intValue == source.mtimeNanoseconds else {
            step.log(.info, "the source changed since the last attempt; copying from the start")
            return 0
        }
        guard let partialInfo = try FileSystem.info(partial), partialInfo.isRegular, partialInfo.size >= offset else {
            step.log(.info, "no usable partial file \(partial); copying from the start")
            return 0
        }
        step.log(.info, "resuming at byte \(offset) of \(source.size)")
        return offset
    }

    /// SHA-256 and size of a file, read in chunks with progress; stops when cancelled. Errors
    /// name the file as `fs.checksum`'s `path` input (the other callers hash files they checked).
    static func hash(_ path: String, step: StepContext) throws(StepError) -> Copied {
        guard let info = try FileSystem.info(path) else { throw .permanent("path \(path) does not exist", code: "ENOENT") }
        guard info.isRegular else { throw FileSystem.notAFile("path", path, info) }
        let fd = try FileSystem.openFile(path, O_RDONLY)
        defer { close(fd) }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: FileSystem.chunkSize, alignment: 4096)
        defer { buffer.deallocate() }
        let hash = SHA256()
        var offset: Int64 = 0
        while true {
            try step.checkCancellation()
            let n = try FileSystem.readChunk(fd, into: buffer, count: FileSystem.chunkSize, at: offset, path: path)
            if n == 0 { break }
            hash.update(UnsafeRawBufferPointer(start: buffer, count: n))
            offset += Int64(n)
            step.progress(bytesDone: offset, bytesTotal: max(info.size, offset))
        }
        return Copied(sha256: hash.finish(), size: offset)
    }
}

enum Clock {
    static func milliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
