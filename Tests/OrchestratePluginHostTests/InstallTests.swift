// scripts/install.sh lays an install out the way the binary finds its parts (plugins, runner,
// guard), with completions; contrib/systemd/orchestrate-serve.service passes systemd-analyze.
import Foundation
import OrchestrateTestSupport
import Testing

@Suite("Install")
struct InstallTests {
    static let builtInStepTypes = ["exec", "fs.checksum", "fs.copy", "fs.move", "ftp.download", "ftp.upload", "http.download", "http.request",
                                   "http.upload", "s3.delete", "s3.download", "s3.upload", "sftp.accept-paths", "sftp.connect",
                                   "sftp.download", "sftp.upload"]

    /// Installs this build into a fresh prefix.
    static func install() throws -> (TemporaryDirectory, URL) {
        let dir = TemporaryDirectory("install")
        let prefix = dir.file("prefix")
        let script = TestPaths.packageRoot.appendingPathComponent("scripts/install.sh")
        let made = try ChildProcess.run(URL(fileURLWithPath: "/bin/bash"), [script.path, prefix.path, TestPaths.productsDir.path])
        try #require(made.status == 0, "scripts/install.sh failed: \(made.stderr)")
        return (dir, prefix)
    }

    @Test("an installed orchestrate finds its plugins from any directory, with no plugin path set")
    func installedBinaryFindsPlugins() throws {
        let (dir, prefix) = try Self.install()
        let elsewhere = dir.file("work")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "ORCHESTRATE_PLUGIN_PATH")
        environment["ORCHESTRATE_STATE"] = dir.file("state").path
        let listed = try ChildProcess.run(prefix.appendingPathComponent("bin/orchestrate"), ["plugins", "list"],
                                          environment: environment, currentDirectory: elsewhere)
        #expect(listed.status == 0, "\(listed.stderr)")
        let ids = listed.stdout.split(separator: "\n").filter { !$0.hasPrefix("plugin ") && !$0.contains("\u{1B}") }
            .compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(ids == Self.builtInStepTypes, "\(listed.stdout)")
        // Loaded from the install, not from the build.
        #expect(listed.stdout.contains(prefix.appendingPathComponent("bin/liborchestrate-plugin-exec.so").path), "\(listed.stdout)")
        for helper in ["orchestrate-plugin-runner", "orchestrate-exec-guard"] {
            #expect(FileManager.default.isExecutableFile(atPath: prefix.appendingPathComponent("bin/\(helper)").path))
        }
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: prefix.appendingPathComponent("lib/orchestrate/plugins").path,
                                               isDirectory: &isDirectory) && isDirectory.boolValue)
    }

    @Test("completions for bash, zsh and fish and the man page are installed")
    func completions() throws {
        let (dir, prefix) = try Self.install()
        defer { withExtendedLifetime(dir) {} }
        for (path, marker) in [("share/bash-completion/completions/orchestrate", "-F _orchestrate orchestrate"),
                               ("share/zsh/site-functions/_orchestrate", "#compdef orchestrate"),
                               ("share/fish/vendor_completions.d/orchestrate.fish", "complete -c 'orchestrate'"),
                               ("share/man/man1/orchestrate.1", ".Dt ORCHESTRATE 1")]
        {
            let text = try String(contentsOf: prefix.appendingPathComponent(path), encoding: .utf8)
            #expect(text.contains(marker) && text.contains("validate"), "\(path)")
        }
    }

    @Test("the systemd unit passes systemd-analyze verify")
    func systemdUnitVerifies() throws {
        guard let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        }) else {
            print("SKIPPED: systemd-analyze is not installed (Debian package systemd); the unit was not checked")
            return
        }
        let (dir, prefix) = try Self.install()
        let unit = try String(contentsOf: TestPaths.packageRoot.appendingPathComponent("contrib/systemd/orchestrate-serve.service"),
                              encoding: .utf8)
        #expect(unit.contains("ExecStart=/opt/orchestrate/bin/orchestrate serve"))
        // Checked against this install's binary (verify checks that ExecStart exists).
        let local = dir.write("orchestrate-serve.service",
                              unit.replacingOccurrences(of: "/opt/orchestrate/bin/orchestrate", with: prefix.path + "/bin/orchestrate"))
        let result = try ChildProcess.run(URL(fileURLWithPath: analyze), ["verify", "--man=no", local.path])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        // Unknown keys and bad values are only warnings to systemd: none is allowed.
        #expect(result.stderr.isEmpty && result.stdout.isEmpty, "\(result.stdout)\(result.stderr)")
    }
}
