import Foundation
import OrchestrateTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A download checked by its CRC-64 alone hashes each chunk from memory as it writes it, with
/// O_DIRECT where the file system allows it (RangeWriter): whatever the range size (a multiple
/// of the 1 MiB chunk, of a page only, or of neither, which turns direct writes off), the chunks'
/// CRCs combine into the object's, the bytes are the object's, and the written file's pages do
/// not stay in the page cache. A download that also wants a SHA-256 reads the file back, so its
/// pages do.
@Suite struct DirectWriteTests {
    /// Whether files in `folder` take O_DIRECT writes (ext4 and xfs do; tmpfs before Linux 6.6 not).
    static func takesDirectWrites(_ folder: String) -> Bool {
        let path = folder + "/.direct-probe"
        defer { unlink(path) }
        #if arch(x86_64)
        let direct: Int32 = 0o40000  // O_DIRECT, which Swift's Glibc module does not export
        #else
        let direct: Int32 = 0o200000  // aarch64's
        #endif
        let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC | direct, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let page = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 4096)
        defer { page.deallocate() }
        return pwrite(fd, page, 4096, 0) == 4096
    }

    /// The pages of `path` in the page cache (mincore over a mapping of it), and how many it has.
    static func cachedPages(_ path: String) throws -> (cached: Int, pages: Int) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(.ENOENT) }
        defer { close(fd) }
        var info = stat()
        _ = fstat(fd, &info)
        let length = Int(info.st_size)
        guard let map = mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { throw POSIXError(.ENOMEM) }
        defer { munmap(map, length) }
        let pages = (length + 4095) / 4096
        var vector = [UInt8](repeating: 0, count: pages)
        guard mincore(map, length, &vector) == 0 else { throw POSIXError(.EINVAL) }
        return (vector.filter { $0 & 1 == 1 }.count, pages)
    }

    @Test func chunksHashedAsTheyAreWrittenGiveTheObjectsCRCForAnyRangeSize() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 7 * (1 << 20) + 4097)  // the last page holds one byte
        try FileManager.default.createDirectory(atPath: runner.path("out"), withIntermediateDirectories: true)
        // Range sizes: the chunk's; a page multiple that is not the chunk's (a short chunk ends
        // each range); neither (direct writes off: through the page cache); and the chunk's with a
        // SHA-256 asked for (the file read back instead).
        // One GET at a time asks for several ranges, whose chunks the writer threads finish out
        // of order; three at a time, one range each.
        let cases: [(name: String, inputs: String)] = [
            ("chunk", "part_size: 1048576, concurrency: 1"), ("pages", "part_size: 1503232, concurrency: 1"),
            ("odd", "part_size: 1500001, concurrency: 1"), ("parallel", "part_size: 1048576, concurrency: 3"),
            ("sha", "part_size: 1048576, sha256: true"),
        ]
        let steps = cases.map { c in """
              get_\(c.name):
                needs: [put]
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, destination: "\(runner.path("out/\(c.name).bin"))",
                        \(c.inputs) }
            """ }.joined(separator: "\n")
        let file = runner.workflow(TransferTests.workflow(peer, """
              put:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, source: "\(source)", multipart_threshold: 5242880,
                        part_size: 5242880 }
            \(steps)
            """))
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        // The page cache first (reading the files to compare them fills it): written around it
        // where the folder takes direct writes (the last page, one byte long, goes through it),
        // read back into it when a SHA-256 is wanted.
        let sha = try Self.cachedPages(runner.path("out/sha.bin"))
        #expect(sha.cached > sha.pages / 2, "the SHA-256 download's file was read back: \(sha)")
        if Self.takesDirectWrites(runner.path("out")) {
            for name in ["chunk", "pages", "parallel"] {
                let pages = try Self.cachedPages(runner.path("out/\(name).bin"))
                #expect(pages.cached <= 2, "\(name): written with O_DIRECT, yet \(pages.cached) of \(pages.pages) pages are cached")
            }
            let odd = try Self.cachedPages(runner.path("out/odd.bin"))
            #expect(odd.cached > odd.pages / 2, "a range size of no page multiple is written through the page cache: \(odd)")
        }
        let crc = try VerifyTests.crc64(source)
        for c in cases {
            let outputs = try #require(try runner.stepOutputs("get_\(c.name)"), "\(c.name)")
            #expect(outputs["verified"]?.stringValue == "crc64nvme", "\(c.name): \(outputs)")
            #expect(outputs["crc64nvme"]?.stringValue == crc, "\(c.name): \(outputs)")
            #expect(Tools.sameBytes(runner.path("out/\(c.name).bin"), source), "\(c.name)")
        }
    }
}
