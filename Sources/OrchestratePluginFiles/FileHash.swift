import OrchestrateDigest
import OrchestratePluginKit

extension LocalFile {
    /// What `sha256` gives, as a JSON Schema pattern (for `@Output(pattern:)`): 64 lower-case hex digits.
    public static let sha256Pattern = "^[0-9a-f]{64}$"

    /// Feeds the bytes from 0 to `end` (or the end of the file) into `hash`, calling `each` with
    /// the offset reached after every chunk (progress, cancellation); returns the bytes read.
    @discardableResult
    public func hash(into hash: SHA256, upTo end: Int64? = nil,
                     each: (Int64) throws(StepError) -> Void = { _ in }) throws(StepError) -> Int64
    {
        try readChunks(to: end) { bytes, offset throws(StepError) in
            hash.update(bytes)
            try each(offset + Int64(bytes.count))
        }
    }

    /// The SHA-256 (lower-case hex) of the bytes from 0 to `end` (or the whole file), and how
    /// many there were.
    public func sha256(upTo end: Int64? = nil,
                       each: (Int64) throws(StepError) -> Void = { _ in }) throws(StepError) -> (digest: String, size: Int64)
    {
        let digest = SHA256()
        let size = try hash(into: digest, upTo: end, each: each)
        return (digest.finish(), size)
    }
}
