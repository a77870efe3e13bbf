// The loader's checks: each refusal has its own message, and a good plugin is described exactly.
import Foundation
import OrchestrateJSON
import OrchestratePluginHost
import OrchestrateTestSupport
import Testing

/// The refusal `load` throws for `path` (fails the test when it loads).
private func refusal(_ path: String) throws -> PluginRefusal {
    do {
        let plugin = try PluginLoader.load(path: path)
        throw TestFailure("\(path) loaded as plugin \(plugin.name), expected a refusal")
    } catch let refusal as PluginRefusal {
        return refusal
    }
}

/// "1.0" for a 1.0 host: the refusal messages quote the host's version.
private let hostABI = "\(PluginLoader.abiMajor).\(PluginLoader.abiMinor)"

@Suite struct LoaderTests {
    @Test func loadsTheTestPluginDescription() throws {
        let path = try Fixtures.path("teststeps")
        let plugin = try PluginLoader.load(path: path)
        #expect(plugin.name == "test")
        #expect(plugin.version == "1.0.0")
        #expect(plugin.abiMajor == 1 && plugin.abiMinor <= PluginLoader.abiMinor)
        #expect(plugin.path == URL(fileURLWithPath: path).resolvingSymlinksInPath().path)
        #expect(plugin.stepTypes.map(\.id) == ["test.noop", "test.append", "test.flaky", "test.sleep",
                                              "test.checkpoint", "test.fail", "test.echo", "test.items", "test.metered",
                                              "test.typed"])
        let append = try #require(plugin.stepTypes.first { $0.id == "test.append" })
        #expect(append.inputSchema["required"] == ["file", "line"])
        #expect(append.outputSchema?["properties"]?["line"]?["type"] == "string")
        #expect(append.pluginName == "test" && append.pluginPath == plugin.path)
        #expect(!append.acceptsItems)
        #expect(plugin.stepTypes.first { $0.id == "test.items" }?.acceptsItems == true)
        #expect(plugin.stepTypes.first { $0.id == "test.noop" }?.outputSchema == nil)
    }

    @Test func sameFileTwiceIsTheSameObject() throws {
        let path = try Fixtures.path("teststeps")
        let link = Fixtures.directory.file("teststeps-link.so")
        try? FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: path)
        let first = try PluginLoader.load(path: path)
        #expect(try PluginLoader.load(path: path) === first)
        #expect(try PluginLoader.load(path: link.path) === first)
    }

    @Test func fileNotFound() throws {
        let r = try refusal("/nonexistent/dir/plugin.so")
        #expect(r.path == "/nonexistent/dir/plugin.so")
        #expect(r.reason == "file not found")
        #expect(r.description == "plugin /nonexistent/dir/plugin.so refused: file not found")
    }

    @Test func directoryIsNotAPlugin() throws {
        let dir = TemporaryDirectory()
        #expect(try refusal(dir.path).reason == "not a regular file")
    }

    @Test func textFileIsNotASharedLibrary() throws {
        let dir = TemporaryDirectory()
        let file = dir.write("x.so", "just some text, not a library\n")
        #expect(try refusal(file.path).reason == "not a shared library (no ELF header)")
        let empty = dir.write("empty.so", "")
        #expect(try refusal(empty.path).reason == "not a shared library (no ELF header)")
    }

    @Test func truncatedELFIncludesTheLinkerError() throws {
        let dir = TemporaryDirectory()
        let whole = try Data(contentsOf: URL(fileURLWithPath: try Fixtures.path("teststeps")))
        let truncated = dir.file("truncated.so")
        try whole.prefix(100).write(to: truncated)
        let r = try refusal(truncated.path)
        #expect(r.reason.hasPrefix("truncated ELF file (100 bytes; its headers need at least "), "\(r)")
        // The dlopen error text follows, naming the file.
        #expect(r.reason.contains("): \(truncated.path)"), "\(r)")
    }

    @Test func wrongArchitectureIsNamed() throws {
        let dir = TemporaryDirectory()
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try Fixtures.path("teststeps"))))
        let foreign: UInt16 = bytes[18] == 62 ? 183 : 62 // aarch64 on x86_64 and the reverse
        bytes[18] = UInt8(foreign & 0xFF)
        bytes[19] = UInt8(foreign >> 8)
        let file = dir.file("foreign.so")
        try Data(bytes).write(to: file)
        let r = try refusal(file.path)
        let expected = foreign == 183 ? "built for aarch64, but this machine is x86_64: " : "built for x86_64, but this machine is aarch64: "
        #expect(r.reason.hasPrefix(expected), "\(r)")
        #expect(r.reason.count > expected.count, "the dlerror text is included")
    }

    @Test func missingEntrySymbol() throws {
        let r = try refusal(try Fixtures.path("no_entry"))
        #expect(r.reason == "does not export orchestrate_plugin_entry_v1 — is it an orchestrate plugin?")
    }

    @Test func entryReturningNull() throws {
        let r = try refusal(try Fixtures.path("null_entry"))
        #expect(r.reason == "orchestrate_plugin_entry_v1 returned NULL (the plugin declined to load)")
    }

    @Test func abiMajorMismatch() throws {
        let r = try refusal(try Fixtures.path("abi_major2"))
        #expect(r.reason == "built for plugin ABI 2.0; this orchestrate speaks \(hostABI) (needs major 1, minor <= \(PluginLoader.abiMinor))")
    }

    @Test func abiMinorTooNew() throws {
        let r = try refusal(try Fixtures.path("abi_minor_new"))
        #expect(r.reason == "built for plugin ABI 1.99; this orchestrate speaks \(hostABI) (needs major 1, minor <= \(PluginLoader.abiMinor))")
    }

    /// A plugin built against an older minor of the header loads: 1.0 and 1.1 plugins in this host.
    @Test(arguments: [0, 1]) func olderMinorLoads(minor: Int) throws {
        #expect(PluginLoader.abiMinor > UInt32(minor))
        let plugin = try PluginLoader.load(path: try Fixtures.path("abi_minor_new", flags: ["-DABI_MINOR=\(minor)"]))
        #expect(plugin.abiMajor == 1 && plugin.abiMinor == UInt32(minor))
        #expect(plugin.stepTypes.map(\.id) == ["future.step"])
    }

    /// bad_descriptor.c variants and the reason each must produce.
    @Test(arguments: [
        (1, "step_types[0].id is NULL"),
        (2, "step type bad.step: input_schema is not valid JSON: invalid JSON at byte 17: unexpected end of input in object"),
        (3, "orc_plugin.struct_size is 16, smaller than orc_plugin 1.0 (48 bytes)"),
        (4, "orc_plugin.name is NULL"),
        (5, "orc_plugin.step_type_count is 5000, more than the limit of 1024"),
        (6, "step_types[0] is NULL"),
        (7, "step type bad.step: run is NULL"),
        (8, "step_types[0].id \"Bad Step\" is not lower-case dot-separated words (each must start with a letter a-z)"),
        (9, "step_types[0].struct_size is 8, smaller than orc_step_type 1.0 (64 bytes)"),
        (10, "step type bad.step: output_schema is not valid JSON: invalid JSON at byte 1: expected 'null'"),
    ])
    func badDescriptor(variant: Int, reason: String) throws {
        let r = try refusal(try Fixtures.path("bad_descriptor", flags: ["-DBAD_VARIANT=\(variant)"]))
        #expect(r.reason == reason)
    }

    @Test func refusalIsNotCachedOnceTheFileIsFixed() throws {
        let dir = TemporaryDirectory()
        let target = dir.file("later.so")
        #expect(try refusal(target.path).reason == "file not found")
        try FileManager.default.copyItem(atPath: try Fixtures.path("hostprobe"), toPath: target.path)
        #expect(try PluginLoader.load(path: target.path).name == "probe")
    }
}
