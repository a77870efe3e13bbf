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
    #if arch(x86_64)
    static let oDirect: Int32? = 0o40000  // O_DIRECT, which Swift's Glibc module does not export
    #elseif arch(arm64)
    static let oDirect: Int32? = 0o200000
    #else
    static let oDirect: Int32? = nil
    #endif
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Whether files in the test folders take O_DIRECT writes the way s3.download opens them
    /// (reopened through /proc/self/fd): ext4 and xfs do, tmpfs before Linux 6.6 not.
    static let directWritesWork: Bool = {
        guard let oDirect else { return false }
        // The file systems s3.download tries them on (`stat -f` names ext2/3/4 "ext2/ext3").
        let type = (try? Tools.run(["stat", "-f", "-c", "%T", NSTemporaryDirectory()]).stdout) ?? ""
        guard ["ext2/ext3", "xfs", "btrfs", "tmpfs"].contains(type.trimmingCharacters(in: .whitespacesAndNewlines)) else { return false }
        let path = NSTemporaryDirectory() + "/.orchestrate-direct-probe-\(getpid())"
        defer { unlink(path) }
        let fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let direct = open("/proc/self/fd/\(fd)", O_WRONLY | O_CLOEXEC | oDirect)
        guard direct >= 0 else { return false }
        defer { close(direct) }
        let page = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 4096)
        defer { page.deallocate() }
        return pwrite(direct, page, 4096, 0) == 4096
    }()

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
        let pages = (length + pageSize - 1) / pageSize
        var vector = [UInt8](repeating: 0, count: pages)
        guard mincore(map, length, &vector) == 0 else { throw POSIXError(.EINVAL) }
        return (vector.filter { $0 & 1 == 1 }.count, pages)
    }

    /// Downloads a 7 MiB + 4097-byte object that s3.upload wrote (so a CRC-64 checks it) once per
    /// case, each to out/NAME.bin; returns the runner and the source.
    static func download(_ cases: [(name: String, inputs: String)]) throws -> (S3Runner, String) {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 7 * (1 << 20) + 4097)  // the last page holds one byte
        try FileManager.default.createDirectory(atPath: runner.path("out"), withIntermediateDirectories: true)
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
        return (runner, source)
    }

    /// Range sizes: the chunk's; a page multiple that is not the chunk's (a short chunk ends each
    /// range); neither (direct writes off: through the page cache). One GET at a time asks for
    /// several ranges, whose chunks the writer threads finish out of order; three at a time,
    /// one range each. Each gives the object's bytes and CRC.
    @Test func chunksHashedAsTheyAreWrittenGiveTheObjectsCRCForAnyRangeSize() throws {
        let cases: [(name: String, inputs: String)] = [
            ("chunk", "part_size: 1048576, concurrency: 1"), ("pages", "part_size: 1503232, concurrency: 1"),
            ("odd", "part_size: 1500001, concurrency: 1"), ("parallel", "part_size: 1048576, concurrency: 3"),
            ("sha", "part_size: 1048576, sha256: true"),
        ]
        let (runner, source) = try Self.download(cases)
        let crc = try VerifyTests.crc64(source)
        for c in cases {
            let outputs = try #require(try runner.stepOutputs("get_\(c.name)"), "\(c.name)")
            #expect(outputs["verified"]?.stringValue == "crc64nvme", "\(c.name): \(outputs)")
            #expect(outputs["crc64nvme"]?.stringValue == crc, "\(c.name): \(outputs)")
            #expect(Tools.sameBytes(runner.path("out/\(c.name).bin"), source), "\(c.name)")
        }
    }

    /// Where the file system takes direct writes, the file's pages are written around the page
    /// cache (the last page, one byte long, goes through it), and a range size of no page
    /// multiple, or a SHA-256 asked for (the file read back), fills it.
    @Test(.enabled(if: directWritesWork, "the temporary folder's file system takes no O_DIRECT writes"))
    func theWrittenFileStaysOutOfThePageCache() throws {
        let cases: [(name: String, inputs: String)] = [
            ("chunk", "part_size: 1048576, concurrency: 1"), ("parallel", "part_size: 1048576, concurrency: 3"),
            ("odd", "part_size: 1500001, concurrency: 1"), ("sha", "part_size: 1048576, sha256: true"),
        ]
        let (runner, _) = try Self.download(cases)
        for name in ["chunk", "parallel"] {
            let pages = try Self.cachedPages(runner.path("out/\(name).bin"))
            #expect(pages.cached <= 2, "\(name): written with O_DIRECT, yet \(pages.cached) of \(pages.pages) pages are cached")
        }
        for name in ["odd", "sha"] {
            let pages = try Self.cachedPages(runner.path("out/\(name).bin"))
            #expect(pages.cached > pages.pages / 2, "\(name): written or read through the page cache, yet \(pages)")
        }
    }
}
