// The registry: search paths, precedence and duplicates, unsafe directories, the standard order.
import Foundation
import OrchestratePluginHost
import OrchestrateTestSupport
import Testing

/// Collects warnings from the registry.
private final class Warnings: @unchecked Sendable {
    var lines: [String] = []
    func add(_ line: String) { lines.append(line) }
}

@Suite struct RegistryTests {
    @Test func directoryOfPluginsSortedWithRefusalsKept() throws {
        let dir = TemporaryDirectory()
        try FileManager.default.copyItem(atPath: try Fixtures.path("teststeps"), toPath: dir.file("b-test.so").path)
        try FileManager.default.copyItem(atPath: try Fixtures.path("hostprobe"), toPath: dir.file("a-probe.so").path)
        try FileManager.default.copyItem(atPath: try Fixtures.path("null_entry"), toPath: dir.file("c-null.so").path)
        dir.write("README.txt", "not a plugin, not a .so: ignored")
        dir.write(".hidden.so", "hidden files are ignored")
        let warnings = Warnings()
        let registry = PluginRegistry(searchPaths: [dir.path], warn: warnings.add)
        #expect(registry.plugins.map(\.name) == ["probe", "test"])
        #expect(registry.refusals.map(\.path) == [dir.file("c-null.so").path])
        #expect(warnings.lines == registry.refusals.map(\.description))
        #expect(registry.stepType("test.sleep")?.pluginName == "test")
        #expect(registry.stepType("probe.rc7")?.pluginName == "probe")
        #expect(registry.stepType("nope") == nil)
        let ids = registry.stepTypes.map(\.id)
        #expect(ids == ids.sorted())
        #expect(ids.count == 23)  // 10 test.* + 13 probe.*
    }

    @Test func duplicateStepIDRefusesTheLaterPluginNamingBothFiles() throws {
        let test = try Fixtures.path("teststeps")
        let dup = try Fixtures.path("dup_step")
        let warnings = Warnings()
        let registry = PluginRegistry(searchPaths: [test, dup], warn: warnings.add)
        #expect(registry.plugins.map(\.name) == ["test"])
        let testPath = try PluginLoader.load(path: test).path
        #expect(registry.refusals.map(\.description) == [
            "plugin \(dup) refused: step type test.noop is already provided by plugin test (\(testPath))",
        ])
        #expect(warnings.lines == registry.refusals.map(\.description))
        // The whole plugin is refused, its other steps too.
        #expect(registry.stepType("dup.own") == nil)
        #expect(registry.stepType("test.noop")?.version == "1.0.0")
    }

    @Test func sameFileThroughTwoPathsLoadsOnce() throws {
        let path = try Fixtures.path("teststeps")
        let dir = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let registry = PluginRegistry(searchPaths: [path, dir])
        #expect(registry.plugins.count == 1)
        #expect(registry.refusals.isEmpty)
    }

    @Test func missingSearchPathIsAWarning() throws {
        let warnings = Warnings()
        let registry = PluginRegistry(searchPaths: ["/nonexistent/plugins"], warn: warnings.add)
        #expect(registry.plugins.isEmpty && registry.refusals.isEmpty)
        #expect(warnings.lines == ["plugin path /nonexistent/plugins does not exist"])
    }

    @Test func worldWritableDirectoryIsRefused() throws {
        let base = TemporaryDirectory()
        let open = base.url.appendingPathComponent("open")
        try FileManager.default.createDirectory(at: open, withIntermediateDirectories: true)
        chmod(open.path, 0o777)
        let plugin = open.appendingPathComponent("p.so")
        try FileManager.default.copyItem(atPath: try Fixtures.path("hostprobe"), toPath: plugin.path)
        let warnings = Warnings()
        let registry = PluginRegistry(searchPaths: [open.path], warn: warnings.add)
        #expect(registry.plugins.isEmpty)
        let resolvedDir = open.resolvingSymlinksInPath().path
        #expect(warnings.lines == [
            "plugin \(plugin.path) refused: it is in the world-writable directory \(resolvedDir) (anyone could replace it); "
                + "move it, or fix with chmod o-w \(resolvedDir)",
        ])
    }

    @Test func stickyDirectoryWithOwnFileIsAccepted() throws {
        let base = TemporaryDirectory()
        let sticky = base.url.appendingPathComponent("sticky")
        try FileManager.default.createDirectory(at: sticky, withIntermediateDirectories: true)
        chmod(sticky.path, 0o1777)
        let plugin = sticky.appendingPathComponent("p.so")
        try FileManager.default.copyItem(atPath: try Fixtures.path("hostprobe"), toPath: plugin.path)
        #expect(try PluginLoader.load(path: plugin.path).name == "probe")
    }

    @Test func worldWritableFileIsRefused() throws {
        let dir = TemporaryDirectory()
        let plugin = dir.file("p.so")
        try FileManager.default.copyItem(atPath: try Fixtures.path("hostprobe"), toPath: plugin.path)
        chmod(plugin.path, 0o757)
        do {
            _ = try PluginLoader.load(path: plugin.path)
            Issue.record("a world-writable plugin file loaded")
        } catch {
            #expect(error.reason.hasPrefix("the file is writable by every user"))
        }
    }

    @Test func standardSearchPathsOrder() throws {
        let install = TemporaryDirectory()
        let bin = install.url.appendingPathComponent("bin")
        let packaged = install.url.appendingPathComponent("lib/orchestrate/plugins")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: packaged, withIntermediateDirectories: true)
        install.write("bin/orchestrate", "")
        install.write("bin/liborchestrate-plugin-sftp.so", "")
        install.write("bin/liborchestrate-plugin-exec.so", "")
        install.write("bin/libsomething-else.so", "")
        install.write("bin/liborchestrate-plugin-notes.txt", "")
        // A symlink to the executable elsewhere still finds the install.
        let elsewhere = TemporaryDirectory()
        let link = elsewhere.file("orchestrate")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: bin.appendingPathComponent("orchestrate").path)

        let realBin = bin.resolvingSymlinksInPath().path
        let paths = PluginRegistry.standardSearchPaths(
            executablePath: link.path,
            environment: ["ORCHESTRATE_PLUGIN_PATH": "/env/one::/env/two", "PATH": "/usr/bin"],
            extra: ["/cli/one", "", "relative/dir"])
        #expect(paths == [
            realBin + "/liborchestrate-plugin-exec.so",
            realBin + "/liborchestrate-plugin-sftp.so",
            packaged.resolvingSymlinksInPath().path,
            "/env/one", "/env/two",
            "/cli/one", "relative/dir",
        ])
    }

    @Test func standardSearchPathsNeverIncludeTheCurrentDirectory() throws {
        let install = TemporaryDirectory()
        install.write("orchestrate", "")
        let paths = PluginRegistry.standardSearchPaths(executablePath: install.file("orchestrate").path,
                                                       environment: ["ORCHESTRATE_PLUGIN_PATH": ":"], extra: [])
        #expect(paths.isEmpty)
        #expect(!paths.contains(".") && !paths.contains(""))
    }
}
