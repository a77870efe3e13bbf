#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestrateDigest
import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit

/// Streams a file into `<destination>.partial` (a `PartialFile`) in 1 MiB chunks while hashing
/// it, then commits it (fsync, atomic rename, directory fsync), so the destination never exists
/// half-written.
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

    func copy(source: String, to destination: String, expectedSHA256: String?, preserveMtime: Bool = true) throws(StepError) -> Copied {
        guard let sourceInfo = try FileInfo.of(source) else {
            throw .permanent("source \(source) does not exist", code: "ENOENT")
        }
        guard sourceInfo.isRegular else { throw .notAFile("source", source, sourceInfo) }
        try LocalPath.makeDirectories(LocalPath.parent(of: destination))

        let input = try LocalFile(reading: source)
        let resumeAt = try resumePoint(partial: PartialFile.Naming.suffix.path(for: destination), source: sourceInfo)
        let output = try PartialFile(for: destination, naming: .suffix, keeping: resumeAt == 0 ? .nothing : .prefix(resumeAt))
        let hash = SHA256()

        // Re-hash what an earlier attempt already copied.
        var offset = try output.file.hash(into: hash, upTo: resumeAt) { _ throws(StepError) in try step.checkCancellation() }

        var checkpointedAt = offset
        var checkpointTime = Clock.milliseconds()
        func checkpoint() throws(StepError) {
            try output.sync()  // the checkpoint never claims bytes a crash could lose
            // `partial` names the file for the engine, which removes it once nothing can resume it.
            step.saveCheckpoint(json: ["offset": .int(offset), "source_size": .int(sourceInfo.size),
                                       "source_mtime_ns": .int(sourceInfo.mtimeNanoseconds),
                                       "partial": .string(LocalPath.absolute(PartialFile.Naming.suffix.path(for: destination)))])
            checkpointedAt = offset
            checkpointTime = Clock.milliseconds()
        }

        try input.readChunks(from: offset) { bytes, at throws(StepError) in
            try output.write(bytes, at: at)
            hash.update(bytes)
            offset = at + Int64(bytes.count)
            step.progress(bytesDone: offset, bytesTotal: max(sourceInfo.size, offset), filesDone: 0, filesTotal: 1)
            if offset - checkpointedAt >= FileCopier.checkpointBytes
                || Clock.milliseconds() - checkpointTime >= FileCopier.checkpointMilliseconds
            {
                try checkpoint()
            }
            if step.isCancelled {
                try checkpoint()
                throw .cancelled("copy of \(source) stopped at byte \(offset) of \(sourceInfo.size)")
            }
        }

        let digest = hash.finish()
        if let expectedSHA256, expectedSHA256.lowercased() != digest {
            try output.discard()
            throw .permanent("sha256 of \(source) is \(digest), not \(expectedSHA256.lowercased()) (the sha256 input)",
                             code: "sha256_mismatch")
        }
        if preserveMtime { try output.file.setModificationTime(nanoseconds: sourceInfo.mtimeNanoseconds) }
        // The source's permission bits, given at the rename (the partial file was 0600);
        // setuid, setgid and sticky are not copied, as `cp` does not without -p.
        try output.commit(mode: sourceInfo.mode & 0o777)
        step.progress(bytesDone: offset, bytesTotal: offset, filesDone: 1, filesTotal: 1)
        return Copied(sha256: digest, size: offset)
    }

    /// Where an earlier attempt left off, or 0 to start over (logging why).
    private func resumePoint(partial: String, source: FileInfo) throws(StepError) -> Int64 {
        guard let saved = step.loadCheckpointJSON(), let offset = saved["offset"]?.intValue else { return 0 }
        guard saved["source_size"]?.intValue == source.size, saved["source_mtime_ns"]?.intValue == source.mtimeNanoseconds else {
            step.log(.info, "the source changed since the last attempt; copying from the start")
            return 0
        }
        guard let partialInfo = try FileInfo.of(partial), partialInfo.isRegular, partialInfo.size >= offset else {
            step.log(.info, "no usable partial file \(partial); copying from the start")
            return 0
        }
        step.log(.info, "resuming at byte \(offset) of \(source.size)")
        return offset
    }

    /// SHA-256 and size of a file, read in chunks with progress; stops when cancelled. Errors
    /// name the file as `fs.checksum`'s `path` input (the other callers hash files they checked).
    static func hash(_ path: String, step: StepContext) throws(StepError) -> Copied {
        guard let info = try FileInfo.of(path) else { throw .permanent("path \(path) does not exist", code: "ENOENT") }
        guard info.isRegular else { throw .notAFile("path", path, info) }
        try step.checkCancellation()
        let (digest, size) = try LocalFile(reading: path).sha256 { offset throws(StepError) in
            step.progress(bytesDone: offset, bytesTotal: max(info.size, offset))
            try step.checkCancellation()
        }
        return Copied(sha256: digest, size: size)
    }
}

enum Clock {
    static func milliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
