// The built-in fs plugin, loaded from the products directory and run for real.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport
import Testing

func fsStep(_ id: String) throws -> StepType {
    guard let step = try Fixtures.builtIn("fs").stepTypes.first(where: { $0.id == id }) else {
        throw TestFailure("fs plugin has no \(id)")
    }
    return step
}

func runFS(_ id: String, _ inputs: JSONValue, delegate: RecordingDelegate = RecordingDelegate(),
                   attempt: Int = 1, checkpoint: [UInt8]? = nil) async throws -> Result<[String: JSONValue], StepFailure>
{
    let invocation = StepInvocation(stepType: try fsStep(id), request: request(inputs, attempt: attempt, checkpoint: checkpoint),
                                    delegate: delegate)
    return await invocation.runOnThread()
}

/// Writes `size` random bytes to `url`.
private func randomFile(_ url: URL, size: Int) throws {
    var generator = SystemRandomNumberGenerator()
    var bytes = [UInt8](repeating: 0, count: size)
    for i in stride(from: 0, to: size, by: 8) {
        let word = generator.next()
        for j in 0..<min(8, size - i) { bytes[i + j] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(j))) }
    }
    try Data(bytes).write(to: url)
}

/// The digest `sha256sum` computes: the reference the plugin is checked against.
private func sha256sum(_ url: URL) throws -> String {
    let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sha256sum"), [url.path])
    return String(result.stdout.prefix(64))
}

@Suite struct FSPluginTests {
    @Test func describesItsSteps() throws {
        let plugin = try Fixtures.builtIn("fs")
        #expect(plugin.name == "fs")
        #expect(plugin.stepTypes.map(\.id) == ["fs.copy", "fs.move", "fs.checksum"])
        let copy = try fsStep("fs.copy")
        #expect(copy.inputSchema["required"] == ["source", "destination"])
        #expect(copy.outputSchema?["properties"]?["sha256"] != nil)
        #expect(copy.documentation?.contains("partial") == true)
    }

    @Test func copiesAMultiMebibyteFileVerified() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("source.bin")
        try randomFile(source, size: 20 << 20 | 12345)
        let destination = dir.file("nested/deeper/copy.bin")
        let delegate = RecordingDelegate()
        let outputs = try #require(try await runFS("fs.copy", ["source": .string(source.path), "destination": .string(destination.path)],
                                                   delegate: delegate).outputs)
        let expected = try sha256sum(source)
        #expect(outputs["sha256"] == .string(expected))
        #expect(outputs["size"] == .int(Int64(20 << 20 | 12345)))
        #expect(outputs["path"] == .string(destination.path))
        #expect(try sha256sum(destination) == expected)
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".partial"))
        let progress = delegate.progressReports
        #expect(progress.last == StepProgress(bytesDone: Int64(20 << 20 | 12345), bytesTotal: Int64(20 << 20 | 12345),
                                              filesDone: 1, filesTotal: 1))
        #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.bytesDone <= $1.bytesDone })
        #expect(delegate.checkpoints.count >= 2, "a checkpoint every 8 MiB")
    }

    @Test func resumesFromThePartialFile() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("source.bin")
        try randomFile(source, size: 24 << 20)
        let destination = dir.file("copy.bin")
        let inputs: JSONValue = ["source": .string(source.path), "destination": .string(destination.path)]

        // First attempt: stopped right after its first checkpoint.
        let first = RecordingDelegate()
        let invocation = StepInvocation(stepType: try fsStep("fs.copy"), request: request(inputs), delegate: first)
        first.onCheckpoint = { _ in invocation.cancel(.shutdown) }
        let stopped = try #require(await invocation.runOnThread().failure)
        #expect(stopped.kind == .cancelled)
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        let checkpoint = try #require(first.checkpoints.last)
        let offset = try #require(try JSONValue(parsing: checkpoint)["offset"]?.intValue)
        #expect(offset >= 8 << 20 && offset < 24 << 20)
        let partialSize = try FileManager.default.attributesOfItem(atPath: destination.path + ".partial")[.size] as? Int
        #expect(Int64(partialSize ?? 0) >= offset)

        // Second attempt: continues from the checkpoint, re-hashing what is there.
        let second = RecordingDelegate()
        let outputs = try #require(try await runFS("fs.copy", inputs, delegate: second, attempt: 2, checkpoint: checkpoint).outputs)
        #expect(second.logText.contains("resuming at byte \(offset) of \(24 << 20)"))
        #expect((second.progressReports.first?.bytesDone ?? 0) > offset, "did not start over")
        let expected = try sha256sum(source)
        #expect(outputs["sha256"] == .string(expected))
        #expect(try sha256sum(destination) == expected)
    }

    @Test func startsOverWhenTheSourceChanged() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("source.bin")
        try randomFile(source, size: 1 << 20)
        let destination = dir.file("copy.bin")
        try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: destination.path + ".partial"))
        let stale = JSONValue.object(["offset": 4096, "source_size": 999, "source_mtime_ns": 1])
        let delegate = RecordingDelegate()
        let outputs = try #require(try await runFS("fs.copy", ["source": .string(source.path), "destination": .string(destination.path)],
                                                   delegate: delegate, checkpoint: Array(stale.jsonText.utf8)).outputs)
        #expect(delegate.logText.contains("the source changed since the last attempt"))
        #expect(outputs["sha256"] == .string(try sha256sum(source)))
        #expect(try sha256sum(destination) == sha256sum(source))
    }

    /// fs copies one file; a directory is refused with an error naming the input and the
    /// steps that copy trees.
    @Test func aDirectorySourceIsRefusedWithTheWayToCopyATree() async throws {
        let dir = TemporaryDirectory()
        _ = dir.write("tree/a.txt", "a\n")
        for step in ["fs.copy", "fs.move"] {
            let failure = try #require(try await runFS(step, ["source": .string(dir.file("tree").path),
                                                              "destination": .string(dir.file("copy").path)]).failure)
            #expect(failure.kind == .invalidInput && failure.code == "EISDIR")
            #expect(failure.message.hasPrefix("source \(dir.file("tree").path) is a directory: the fs steps move one file; name a file in source"),
                    "\(failure.message)")
        }
    }

    @Test func expectedDigestIsChecked() async throws {
        let dir = TemporaryDirectory()
        let source = dir.write("a.txt", "hello\n")
        let destination = dir.file("b.txt")
        let wrong = String(repeating: "0", count: 64)
        let failure = try #require(try await runFS("fs.copy", ["source": .string(source.path), "destination": .string(destination.path),
                                                               "sha256": .string(wrong)]).failure)
        #expect(failure.kind == .permanent && failure.code == "sha256_mismatch")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(!FileManager.default.fileExists(atPath: destination.path + ".partial"))

        let right = try sha256sum(source)
        let outputs = try await runFS("fs.copy", ["source": .string(source.path), "destination": .string(destination.path),
                                                  "sha256": .string(right.uppercased())]).outputs
        #expect(outputs?["sha256"] == .string(right))

        let malformed = try #require(try await runFS("fs.copy", ["source": .string(source.path), "destination": "x",
                                                                 "sha256": "abc"]).failure)
        #expect(malformed.kind == .invalidInput)
    }

    @Test func existingDestination() async throws {
        let dir = TemporaryDirectory()
        let source = dir.write("a.txt", "new content\n")
        let destination = dir.write("b.txt", "old content\n")
        let inputs: JSONValue = ["source": .string(source.path), "destination": .string(destination.path)]
        let refused = try #require(try await runFS("fs.copy", inputs).failure)
        #expect(refused.kind == .permanent && refused.code == "EEXIST")
        #expect(refused.message == "destination \(destination.path) exists (set overwrite: true to replace it)")

        var overwrite = inputs
        if case .object(var o) = overwrite { o["overwrite"] = true; overwrite = .object(o) }
        #expect(try await runFS("fs.copy", overwrite).outputs != nil)
        #expect(try String(contentsOf: destination, encoding: .utf8) == "new content\n")

        // Same content already there (an earlier attempt finished): done, not an error.
        let delegate = RecordingDelegate()
        #expect(try await runFS("fs.copy", inputs, delegate: delegate).outputs?["size"] == 12)
        #expect(delegate.logText.contains("already has the content"))
    }

    @Test func badSources() async throws {
        let dir = TemporaryDirectory()
        let missing = try #require(try await runFS("fs.copy", ["source": .string(dir.file("nope").path), "destination": "/tmp/x"]).failure)
        #expect(missing.kind == .permanent && missing.code == "ENOENT")
        let directory = try #require(try await runFS("fs.copy", ["source": .string(dir.path), "destination": .string(dir.file("d").path)]).failure)
        #expect(directory.kind == .invalidInput)
        let noInput = try #require(try await runFS("fs.copy", ["destination": "/tmp/x"]).failure)
        #expect(noInput.kind == .invalidInput && noInput.message == "step 'step-1': missing required input 'source' for step type 'fs.copy'")
        let wrongType = try #require(try await runFS("fs.copy", ["source": 3, "destination": "/tmp/x"]).failure)
        #expect(wrongType.message == "step 'step-1': input 'source' must be a string, not an integer (3)")
    }

    /// A source in a folder others can write (a hot folder, a vendor's drop share): a symbolic
    /// link another user planted there, at the end of the path or on the way, is not followed,
    /// so swapping a handed-over file for a link to this user's key does not send the key. The
    /// user's and root's own links are followed as before, and a FIFO does not hold the open.
    @Test func aLinkAnotherUserPlantedIsNotFollowed() async throws {
        let dir = TemporaryDirectory()
        let key = dir.write("id_ed25519", "PRIVATE KEY")
        #expect(chmod(key.path, 0o600) == 0)
        let hot = dir.file("hot").path
        try FileManager.default.createDirectory(atPath: hot, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
        func plantLink(_ name: String, to target: String, owner: uid_t) {
            #expect(symlink(target, hot + "/" + name) == 0)
            #expect(lchown(hot + "/" + name, owner, owner) == 0)
        }
        func copy(_ source: String) async throws -> Result<[String: JSONValue], StepFailure> {
            try await runFS("fs.copy", ["source": .string(source), "destination": .string(dir.file("out/copy").path)])
        }
        let nobody: uid_t = 65534
        plantLink("take.mov", to: key.path, owner: nobody)
        let refused = try #require(try await copy(hot + "/take.mov").failure)
        #expect(refused.code == "untrusted_link" && refused.kind == .permanent, "\(refused)")
        #expect(refused.message.contains("the symbolic link \(hot)/take.mov belongs to another user (uid 65534) and is not followed"),
                "\(refused.message)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("out/copy").path))
        let hashed = try #require(try await runFS("fs.checksum", ["path": .string(hot + "/take.mov")]).failure)
        #expect(hashed.code == "untrusted_link")

        // On the way: a folder swapped for another user's link, and another user's link reached
        // through one of the user's own links (relative, then absolute).
        plantLink("shot", to: dir.path, owner: nobody)
        #expect(try await copy(hot + "/shot/id_ed25519").failure?.code == "untrusted_link")
        #expect(symlink("hot", dir.file("mine").path) == 0)
        #expect(try await copy(dir.file("mine/take.mov").path).failure?.code == "untrusted_link")
        #expect(try await copy(dir.file("mine/../hot/take.mov").path).failure?.code == "untrusted_link")

        // The user's own links, relative and absolute, chained, with "..", are followed.
        plantLink("own.mov", to: "../id_ed25519", owner: 0)
        plantLink("own-absolute.mov", to: dir.path + "/mine/own.mov", owner: 0)
        for source in [hot + "/own.mov", hot + "/own-absolute.mov", dir.file("mine/own.mov").path, dir.file("mine/../id_ed25519").path] {
            let copied = try await copy(source)
            #expect(copied.outputs?["size"] == .int(11), "\(source): \(copied)")
        }
        // A destination on the way through another user's link: nothing lands where it points,
        // not even the folders `mkdir -p` would make.
        let elsewhere = dir.file("elsewhere").path
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        plantLink("drop", to: elsewhere, owner: nobody)
        for destination in [hot + "/drop/copy", hot + "/drop/new/copy"] {
            let planted = try await runFS("fs.copy", ["source": .string(key.path), "destination": .string(destination)])
            #expect(planted.failure?.code == "untrusted_link", "\(destination): \(planted)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
        // fs.move on one file system: neither side's folder is taken through such a link.
        _ = dir.write("elsewhere/victim.txt", "victim")
        let movedFrom = try await runFS("fs.move", ["source": .string(hot + "/drop/victim.txt"), "destination": .string(dir.file("out/taken.txt").path)])
        #expect(movedFrom.failure?.code == "untrusted_link", "\(movedFrom)")
        #expect(FileManager.default.fileExists(atPath: elsewhere + "/victim.txt"))
        // A loop ends as the kernel ends one.
        plantLink("loop-a", to: "loop-b", owner: 0)
        plantLink("loop-b", to: "loop-a", owner: 0)
        #expect(try await copy(hot + "/loop-a").failure?.code == "ELOOP")
        // A FIFO planted under a handed-over name is refused, not waited on (fs checks the kind
        // first; PlantedSourceTests covers an upload, which reaches the open itself).
        #expect(mkfifo(hot + "/pipe.mov", 0o666) == 0)
        let fifo = try #require(try await runFS("fs.checksum", ["path": .string(hot + "/pipe.mov")]).failure)
        #expect(fifo.code == "not_a_file" || fifo.message.contains("is not a regular file"), "\(fifo)")
    }

    @Test func checksumMatchesSha256sum() async throws {
        let dir = TemporaryDirectory()
        let file = dir.file("data.bin")
        try randomFile(file, size: 3 << 20 | 7)
        let outputs = try #require(try await runFS("fs.checksum", ["path": .string(file.path)]).outputs)
        #expect(outputs == ["sha256": .string(try sha256sum(file)), "size": .int(3 << 20 | 7)])
    }

    @Test func moveWithinAFilesystem() async throws {
        let dir = TemporaryDirectory()
        let source = dir.write("a.txt", "moving\n")
        let destination = dir.file("sub/b.txt")
        let outputs = try #require(try await runFS("fs.move", ["source": .string(source.path), "destination": .string(destination.path)]).outputs)
        #expect(outputs == ["path": .string(destination.path), "copied": false])
        #expect(!FileManager.default.fileExists(atPath: source.path))
        #expect(try String(contentsOf: destination, encoding: .utf8) == "moving\n")

        // A retry after the move happened: the source is gone, the destination there.
        let retry = try await runFS("fs.move", ["source": .string(source.path), "destination": .string(destination.path)], attempt: 2)
        #expect(retry.outputs?["path"] == .string(destination.path))
        // But on a first attempt a missing source is an error.
        let first = try await runFS("fs.move", ["source": .string(source.path), "destination": .string(destination.path)])
        #expect(first.failure?.code == "ENOENT")
    }

    @Test func moveAcrossFilesystemsCopies() async throws {
        let shm = "/dev/shm"
        var a = stat(), b = stat()
        let dir = TemporaryDirectory()
        guard stat(shm, &a) == 0, stat(dir.path, &b) == 0, a.st_dev != b.st_dev, access(shm, W_OK) == 0 else {
            return // no second filesystem to move across here
        }
        let source = dir.file("big.bin")
        try randomFile(source, size: 2 << 20)
        let expected = try sha256sum(source)
        let destination = URL(fileURLWithPath: "\(shm)/orchestrate-move-\(UUID().uuidString)/moved.bin")
        defer { try? FileManager.default.removeItem(at: destination.deletingLastPathComponent()) }
        let outputs = try #require(try await runFS("fs.move", ["source": .string(source.path), "destination": .string(destination.path)]).outputs)
        #expect(outputs["copied"] == true)
        #expect(outputs["sha256"] == .string(expected))
        #expect(!FileManager.default.fileExists(atPath: source.path))
        #expect(try sha256sum(destination) == expected)
    }

    // MARK: The partial file in a shared folder

    /// Someone planted `copy.bin.partial -> victim` (and, in a second round, a hard link to the
    /// victim owned by another user): the copy removes the entry and writes a new private file,
    /// the victim keeps its bytes. On a fresh copy and on a resume with a checkpoint alike.
    @Test func aPlantedPartialIsReplacedNeverFollowed() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("source.bin")
        try randomFile(source, size: (1 << 20) + 77)
        let victim = dir.file("victim")
        let destination = dir.file("shared/copy.bin")
        try FileManager.default.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        let partial = destination.path + ".partial"
        let inputs: JSONValue = ["source": .string(source.path), "destination": .string(destination.path)]
        var info = stat()
        #expect(stat(source.path, &info) == 0)
        let resume = JSONValue.object(["offset": 4096, "source_size": .int(Int64(info.st_size)),
                                       "source_mtime_ns": .int(Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))])
        for (round, checkpoint) in [(1, nil), (2, Array(resume.jsonText.utf8))] as [(Int, [UInt8]?)] {
            try Data("victim's own bytes\n".utf8).write(to: victim)
            try? FileManager.default.removeItem(atPath: destination.path)
            try? FileManager.default.removeItem(atPath: partial)
            if round == 1 {
                try FileManager.default.createSymbolicLink(atPath: partial, withDestinationPath: victim.path)
            } else {
                #expect(link(victim.path, partial) == 0)
                #expect(chown(victim.path, 65534, 65534) == 0)
            }
            let outputs = try #require(try await runFS("fs.copy", inputs, checkpoint: checkpoint).outputs, "round \(round)")
            #expect(outputs["sha256"] == .string(try sha256sum(source)), "round \(round)")
            #expect(try sha256sum(destination) == sha256sum(source), "round \(round)")
            #expect(try String(contentsOf: victim, encoding: .utf8) == "victim's own bytes\n", "round \(round)")
            #expect(!FileManager.default.fileExists(atPath: partial), "round \(round)")
        }
    }

    /// While the bytes arrive the partial file is 0600 (also one an earlier version left 0644);
    /// the destination gets the source's permission bits at the rename.
    @Test func thePartialIsPrivateAndTheModeComesAtTheRename() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("source.bin")
        try randomFile(source, size: 20 << 20)
        #expect(chmod(source.path, 0o4754) == 0)
        let destination = dir.file("copy.bin")
        let partial = destination.path + ".partial"
        try Data(repeating: 1, count: 10).write(to: URL(fileURLWithPath: partial))
        #expect(chmod(partial, 0o644) == 0)
        let modes = LockedList()
        let delegate = RecordingDelegate()
        delegate.onCheckpoint = { _ in
            var info = stat()
            if stat(partial, &info) == 0 { modes.append(Int(info.st_mode & 0o7777)) }
        }
        _ = try #require(try await runFS("fs.copy", ["source": .string(source.path), "destination": .string(destination.path)],
                                         delegate: delegate).outputs)
        #expect(!modes.values.isEmpty && modes.values.allSatisfy { $0 == 0o600 }, "\(modes.values.map { String($0, radix: 8) })")
        var info = stat()
        #expect(stat(destination.path, &info) == 0)
        #expect(info.st_mode & 0o7777 == 0o754, "setuid is not copied: \(String(info.st_mode & 0o7777, radix: 8))")
    }
}

/// Values collected from another thread.
private final class LockedList: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [Int] = []
    func append(_ value: Int) { lock.lock(); list.append(value); lock.unlock() }
    var values: [Int] { lock.lock(); defer { lock.unlock() }; return list }
}
