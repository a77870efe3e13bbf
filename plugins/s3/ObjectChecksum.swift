import OrchestratePluginKit
import OrchestrateS3Auth

/// What a download checks an object's bytes against, read from its HEAD (or a small object's
/// GET) answer, in this order:
/// 1. the CRC-64/NVME s3.upload stores in `x-amz-meta-crc64nvme`;
/// 2. S3's own full-object `x-amz-checksum-crc64nvme` (asked for with `x-amz-checksum-mode:
///    ENABLED`; what AWS's SDKs and CLI v2 store by default);
/// 3. the SHA-256 s3.upload stores in `x-amz-meta-sha256` (objects uploaded before the CRC);
/// 4. a single-part ETag, which is the object's MD5;
/// else only the size is checked.
enum ObjectChecksum {
    case crc64(UInt64, header: String)
    case sha256(String)
    case md5(String)
    case none

    static let metadataHeader = "x-amz-meta-crc64nvme"
    static let nativeHeader = "x-amz-checksum-crc64nvme"

    init(_ answer: Exchange.Response, etag: String) {
        if let text = answer.header(Self.metadataHeader), let crc = CRC64Text.parseHex(text) {
            self = .crc64(crc, header: Self.metadataHeader)
        } else if let text = answer.header(Self.nativeHeader), let crc = CRC64Text.parseBase64(text) {
            self = .crc64(crc, header: Self.nativeHeader)
        } else if let sha = answer.header("x-amz-meta-sha256")?.lowercased() {
            self = .sha256(sha)
        } else if ETag.isMD5(ETag.unquoted(etag)) {
            self = .md5(ETag.unquoted(etag).lowercased())
        } else {
            self = .none
        }
    }

    /// The `verified` output: crc64nvme, sha256, md5 or none.
    var name: String {
        switch self {
        case .crc64: "crc64nvme"
        case .sha256: "sha256"
        case .md5: "md5"
        case .none: "none"
        }
    }

    /// The digests to compute for it: the CRC always (an output, and nearly free), the SHA-256
    /// when it is what verifies or `sha256` asks for it, the MD5 only when it is what verifies.
    func digests(sha256 asked: Bool) -> Digests {
        var isMD5 = false, isSHA = false
        if case .md5 = self { isMD5 = true }
        if case .sha256 = self { isSHA = true }
        return Digests(md5: isMD5, sha256: isSHA || asked, crc64: true)
    }

    /// True when `digests(sha256:)` would compute the CRC alone: a download can then hash its
    /// chunks from memory as it writes them (RangeWriter) instead of reading the file back.
    func isCRCOnly(sha256 asked: Bool) -> Bool {
        switch self {
        case .crc64, .none: !asked
        case .sha256, .md5: false
        }
    }

    /// Throws `crc64_mismatch`, `sha256_mismatch` or `md5_mismatch` (permanent) when `sums` are
    /// not the object's; `what` names it in the message.
    func check(_ sums: Digests.Sums, what: String) throws(StepError) {
        switch self {
        case .crc64(let expected, let header):
            guard sums.crc64 == expected else {
                throw .permanent("\(what): the CRC-64/NVME of the bytes received is \(CRC64Text.hex(sums.crc64)), the object's "
                    + "\(header) says \(CRC64Text.hex(expected))", code: "crc64_mismatch")
            }
        case .sha256(let expected):
            guard expected == S3Crypto.hex(sums.sha256) else {
                throw .permanent("\(what): the SHA-256 of the bytes received is \(S3Crypto.hex(sums.sha256)), the object's metadata "
                    + "says \(expected)", code: "sha256_mismatch")
            }
        case .md5(let expected):
            guard expected == S3Crypto.hex(sums.md5) else {
                throw .permanent("\(what): the MD5 of the bytes received is not the ETag \(expected)", code: "md5_mismatch")
            }
        case .none:
            break
        }
    }

    /// A SHA-256 computed beside the CRC (`sha256: true`) is compared with the object's
    /// `x-amz-meta-sha256` too, when it has one: paid for, it is checked.
    static func checkStoredSHA256(_ sums: Digests.Sums, answer: Exchange.Response, what: String) throws(StepError) {
        guard !sums.sha256.isEmpty, let stored = answer.header("x-amz-meta-sha256")?.lowercased() else { return }
        try ObjectChecksum.sha256(stored).check(sums, what: what)
    }
}
