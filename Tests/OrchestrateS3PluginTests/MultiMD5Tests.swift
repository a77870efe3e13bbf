import CMultiMD5
import Foundation
import OrchestrateS3Auth
import Testing

/// The multi-lane MD5 that hashes a multipart upload's parts side by side gives, in every lane,
/// the digest libcrypto gives for that lane's bytes alone (a wrong one fails every part's ETag
/// check, so the upload tests would catch it too, but not which lane or width).
@Suite struct MultiMD5Tests {
    /// The widths this CPU can run: 8 (AVX2) and 16 (AVX-512F) when it has them.
    static var widths: [Int32] { [8, 16].filter { $0 <= multi_md5_lanes() } }

    @Test(.enabled(if: multi_md5_lanes() >= 8, "this CPU has neither AVX2 nor AVX-512F: parts are hashed one at a time"))
    func everyLaneIsTheMD5OfItsOwnBytes() throws {
        var random = SystemRandomNumberGenerator()
        for lanes in Self.widths {
            // Lengths around a chunk and MD5's padding edge; the stride leaves gaps between lanes.
            for length in [0, 64, 128, 4096, 65_536 + 64 * 7] {
                let stride = length + 64 * 3
                var bytes = [UInt8](repeating: 0, count: stride * Int(lanes))
                for i in bytes.indices { bytes[i] = UInt8.random(in: 0 ... 255, using: &random) }
                var state = multi_md5_state()
                multi_md5_init(&state, lanes)
                bytes.withUnsafeBufferPointer { all in
                    // In two calls, as the hasher feeds chunk after chunk.
                    let first = (length / 64) / 2
                    multi_md5_blocks(&state, all.baseAddress!, stride, first)
                    multi_md5_blocks(&state, all.baseAddress! + first * 64, stride, length / 64 - first)
                }
                multi_md5_finish(&state, UInt64(length))
                for lane in 0 ..< Int(lanes) {
                    var digest = [UInt8](repeating: 0, count: 16)
                    multi_md5_digest(&state, Int32(lane), &digest)
                    let own = bytes[lane * stride ..< lane * stride + length]
                    let expected = own.withUnsafeBytes { S3Crypto.md5($0) }
                    #expect(digest == expected, "\(lanes) lanes, \(length) bytes, lane \(lane)")
                }
            }
        }
    }

    @Test(.enabled(if: multi_md5_lanes() >= 8, "this CPU has neither AVX2 nor AVX-512F: parts are hashed one at a time"))
    func knownAnswers() throws {
        for lanes in Self.widths {
            var state = multi_md5_state()
            multi_md5_init(&state, lanes)
            multi_md5_finish(&state, 0)
            var digest = [UInt8](repeating: 0, count: 16)
            multi_md5_digest(&state, lanes - 1, &digest)
            // RFC 1321's test suite: MD5("") = d41d8cd98f00b204e9800998ecf8427e.
            #expect(S3Crypto.hex(digest) == "d41d8cd98f00b204e9800998ecf8427e")
        }
    }
}
