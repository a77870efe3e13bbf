// fs.copy's if_exists and preserve_mtime, through the built-in fs plugin run for real.
import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

@Suite struct FSIfExistsTests {
    static let past = Date(timeIntervalSince1970: 1_600_000_000.25)

    static func inode(_ url: URL) -> UInt64 {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
    }

    static func mtime(_ url: URL) -> Date? { (try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date }

    static func inputs(_ source: URL, _ destination: URL, _ extra: [String: JSONValue] = [:]) -> JSONValue {
        var object: [String: JSONValue] = ["source": .string(source.path), "destination": .string(destination.path)]
        object.merge(extra) { $1 }
        return .object(object)
    }

    @Test func theCopyKeepsTheSourcesModificationTime() async throws {
        let dir = TemporaryDirectory()
        let source = dir.write("a.bin", "some content\n")
        try FileManager.default.setAttributes([.modificationDate: Self.past], ofItemAtPath: source.path)
        let destination = dir.file("copy/a.bin")
        #expect(try await runFS("fs.copy", Self.inputs(source, destination)).outputs != nil)
        let copied = try #require(Self.mtime(destination))
        #expect(abs(copied.timeIntervalSince(Self.past)) < 0.001, "\(copied) is not \(Self.past)")

        let fresh = dir.file("fresh/a.bin")
        #expect(try await runFS("fs.copy", Self.inputs(source, fresh, ["preserve_mtime": false])).outputs != nil)
        #expect(try #require(Self.mtime(fresh)).timeIntervalSinceNow > -60, "preserve_mtime: false gives the time of the copy")
    }

    @Test func ifDifferentCopiesNothingForAnUnchangedSource() async throws {
        let dir = TemporaryDirectory()
        let source = dir.write("a.bin", "version one\n")
        try FileManager.default.setAttributes([.modificationDate: Self.past], ofItemAtPath: source.path)
        let destination = dir.file("b.bin")
        let inputs = Self.inputs(source, destination, ["if_exists": "if-different"])
        #expect(try await runFS("fs.copy", inputs).outputs != nil)
        let first = Self.inode(destination)
        let again = try #require(try await runFS("fs.copy", inputs).outputs)
        #expect(Self.inode(destination) == first, "an unchanged source is not copied again")
        #expect(again["size"] == 12)

        // Same size, another time: copied again.
        try "version two\n".write(to: source, atomically: false, encoding: .utf8)
        #expect(try await runFS("fs.copy", inputs).outputs != nil)
        #expect(Self.inode(destination) != first)
        #expect(try String(contentsOf: destination, encoding: .utf8) == "version two\n")
    }

    @Test func skipKeepsAndOverwriteReplaces() async throws {
        let dir = TemporaryDirectory()
        let source = dir.write("a.txt", "new content\n")
        let destination = dir.write("b.txt", "old\n")
        let kept = try #require(try await runFS("fs.copy", Self.inputs(source, destination, ["if_exists": "skip"])).outputs)
        #expect(try String(contentsOf: destination, encoding: .utf8) == "old\n")
        #expect(kept["size"] == 4)
        #expect(try await runFS("fs.copy", Self.inputs(source, destination, ["if_exists": "overwrite"])).outputs != nil)
        #expect(try String(contentsOf: destination, encoding: .utf8) == "new content\n")
        // Unchanged, overwrite still copies.
        let before = Self.inode(destination)
        #expect(try await runFS("fs.copy", Self.inputs(source, destination, ["if_exists": "overwrite"])).outputs != nil)
        #expect(Self.inode(destination) != before)

        let both = try #require(try await runFS("fs.copy", Self.inputs(source, destination, ["if_exists": "skip", "overwrite": true])).failure)
        #expect(both.kind == .invalidInput)
    }
}
