// Building the Rust example plugin (plugins/examples/hello-rust) the way its README says, for the
// tests that load it or run it in a workflow. Tests skip, saying why, where cargo is absent.
import Foundation

public enum Cargo {
    /// Why Rust tests are skipped on a machine without cargo.
    public static let absentReason =
        "cargo not found on PATH, in $CARGO_HOME/bin or ~/.cargo/bin: the Rust example plugin is not built (install rustup to run these tests)"

    /// The cargo executable: the first on PATH, else rustup's default locations.
    public static let executable: URL? = {
        let env = ProcessInfo.processInfo.environment
        var candidates = (env["PATH"] ?? "").split(separator: ":").map { "\($0)/cargo" }
        if let home = env["CARGO_HOME"] { candidates.append("\(home)/bin/cargo") }
        candidates.append(FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cargo/bin/cargo").path)
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }.map { URL(fileURLWithPath: $0) }
    }()

    public static var isAvailable: Bool { executable != nil }

    /// The example's crate in the source tree.
    public static let helloRustCrate = TestPaths.packageRoot.appendingPathComponent("plugins/examples/hello-rust")

    /// The example built once per test process with `cargo build --release --offline`, from a
    /// copy of the crate (so tests never write Cargo.lock or target/ into the source tree).
    public static let helloRust: Result<URL, CCompiler.Failure> = {
        guard let cargo = executable else { return .failure(.init(description: absentReason)) }
        let work = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("orchestrate-hello-rust-\(getpid())")
        try? FileManager.default.removeItem(at: work)
        do {
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            for item in ["Cargo.toml", "src"] {
                try FileManager.default.copyItem(at: helloRustCrate.appendingPathComponent(item), to: work.appendingPathComponent(item))
            }
            let args = ["build", "--release", "--offline", "--manifest-path", work.appendingPathComponent("Cargo.toml").path]
            var environment = ProcessInfo.processInfo.environment
            environment["PATH"] = cargo.deletingLastPathComponent().path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
            let result = try ChildProcess.run(cargo, args, environment: environment)
            guard result.status == 0 else {
                return .failure(.init(description: "cargo \(args.joined(separator: " ")) failed:\n\(result.stderr)"))
            }
        } catch {
            return .failure(.init(description: "could not build the Rust example: \(error)"))
        }
        #if os(macOS)
        return .success(work.appendingPathComponent("target/release/liborchestrate_hello_rust.dylib"))
        #else
        return .success(work.appendingPathComponent("target/release/liborchestrate_hello_rust.so"))
        #endif
    }()
}
