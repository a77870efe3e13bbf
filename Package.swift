// swift-tools-version:6.0
// orchestrate: a workflow orchestrator for upload and download jobs.
//
// Layers (data flows one way): OrchestrateModel (YAML → validated workflow, expressions; no I/O)
// → OrchestrateEngine (execute runs: order steps, retry, limit, cancel, checkpoint) ↔
// OrchestrateStore (durable journal) and → OrchestratePluginHost (dlopen, check, call) →
// plugins. OrchestrateOperations operates the system around the engine (submission, the queue
// worker, schedules, watch folders, retention, read models); OrchestrateCLI and
// OrchestrateHTTPAPI only parse, call it, and print or answer. Plugins, built-in ones included, see only the C header in
// COrchestratePlugin (and, for Swift plugins, the OrchestratePluginKit convenience layer).
import PackageDescription

let package = Package(
    name: "orchestrate",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "orchestrate", targets: ["orchestrate"]),
        // Runs one plugin call in a child process, for `isolation: process`.
        .executable(name: "orchestrate-plugin-runner", targets: ["OrchestratePluginRunner"]),
        // Stands between the exec plugin and its command, so a command dies with the process
        // that runs its step (plugins/exec/README.md). Installed next to the plugin libraries.
        .executable(name: "orchestrate-exec-guard", targets: ["OrchestrateExecGuard"]),
        // Built-in plugins, built exactly as a third party would build one. The host finds
        // them next to its executable by the `liborchestrate-plugin-` prefix.
        .library(name: "orchestrate-plugin-fs", type: .dynamic, targets: ["OrchestrateFSPlugin"]),
        .library(name: "orchestrate-plugin-exec", type: .dynamic, targets: ["OrchestrateExecPlugin"]),
        .library(name: "orchestrate-plugin-http", type: .dynamic, targets: ["OrchestrateHTTPPlugin"]),
        .library(name: "orchestrate-plugin-sftp", type: .dynamic, targets: ["OrchestrateSFTPPlugin"]),
        .library(name: "orchestrate-plugin-s3", type: .dynamic, targets: ["OrchestrateS3Plugin"]),
        .library(name: "orchestrate-plugin-ftp", type: .dynamic, targets: ["OrchestrateFTPPlugin"]),
        // The local Vimeo-style API (tus, streaming uploads, fault injection) for the demo and tests.
        .executable(name: "orchestrate-sandbox", targets: ["OrchestrateSandbox"]),
        .library(name: "OrchestratePluginKit", targets: ["OrchestratePluginKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/jpsim/Yams", exact: "6.2.2"),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
    ],
    targets: [
        // The plugin ABI: one C header, usable without Swift.
        .target(name: "COrchestratePlugin"),
        // SHA-256 and friends from the system's libcrypto (fast, hardware-accelerated).
        .systemLibrary(name: "CLibCrypto", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),

        // The C libraries behind the HTTP and SFTP plugins, from Debian's -dev packages.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CLibSSH2", pkgConfig: "libssh2", providers: [.apt(["libssh2-1-dev"])]),
        // PostgreSQL's client library, for the state store several machines share.
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),

        // libcurl for plugins, written once (as OrchestratePluginFiles is for local files): the
        // easy handle with its callbacks, the multi handle that runs requests with the step's
        // cancel, request bodies at the bandwidth caps' pace, response headers and capped bodies,
        // and the mapping of libcurl's failures to step errors. Linked into each plugin using it.
        .target(name: "OrchestrateCurl", dependencies: ["CCurl", "OrchestratePluginKit", "OrchestratePluginFiles"]),
        // SHA-256 for the plugins that verify what they move.
        .target(name: "OrchestrateDigest", dependencies: ["CLibCrypto"]),

        // A JSON value type shared by every layer and plugins written with the kit.
        .target(name: "OrchestrateJSON"),
        // The workflow reader composes libyaml's events itself: it imports Yams' `CYaml` module
        // (libyaml, built by the Yams package), which this product dependency brings in.
        .target(name: "OrchestrateModel", dependencies: [
            "OrchestrateJSON", "OrchestrateExactPath", .product(name: "Yams", package: "Yams"),
        ]),
        // The durable journal: the StateStore protocol, SQLite (one machine) and PostgreSQL
        // (several machines sharing one queue).
        .target(name: "OrchestrateStore", dependencies: [
            "OrchestrateJSON", "OrchestrateLock", "OrchestrateExactPath", "CLibPQ", .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        // The one mutex every module uses (a module of its own: the plugin kit, built into
        // third-party plugins, must not pull in the host). Then the token bucket behind every
        // bandwidth cap (host and plugins alike).
        .target(name: "OrchestrateLock"),
        // A path compared byte for byte (String compares by Unicode equivalence), for the sets
        // and dictionaries of file names.
        .target(name: "OrchestrateExactPath"),
        .target(name: "OrchestrateTokenBucket", dependencies: ["OrchestrateLock"]),
        .target(name: "OrchestratePluginHost", dependencies: ["OrchestrateJSON", "COrchestratePlugin", "OrchestrateTokenBucket",
                                                              "OrchestrateLock"]),
        .target(name: "OrchestrateEngine", dependencies: [
            "OrchestrateJSON", "OrchestrateModel", "OrchestrateStore", "OrchestratePluginHost", "OrchestrateTokenBucket", "OrchestrateLock",
        ]),
        // Operating the system around the engine: submitting and launching runs, the queue
        // worker, queue control, session paths, schedules, watch folders, retention, and the
        // read models (RunDocument...) that the CLI and the HTTP API show.
        .target(name: "OrchestrateOperations", dependencies: [
            "OrchestrateEngine", "OrchestrateJSON", "OrchestrateModel", "OrchestrateStore", "OrchestratePluginHost",
            "OrchestrateTokenBucket", "OrchestrateLock", "OrchestrateExactPath",
        ]),
        // `serve` assembled: the queue worker, the schedule firer, the folder watchers, the
        // retention pruner and the HTTP API of one process, started and stopped together.
        .target(name: "OrchestrateServe", dependencies: [
            "OrchestrateEngine", "OrchestrateOperations", "OrchestrateHTTPAPI", "OrchestrateModel", "OrchestrateStore",
            "OrchestratePluginHost",
        ]),
        .target(name: "OrchestrateCLI", dependencies: [
            "OrchestrateEngine", "OrchestrateOperations", "OrchestrateServe", "OrchestrateHTTPAPI", "OrchestrateModel", "OrchestrateStore", "OrchestratePluginHost", "OrchestrateTokenBucket",
            "OrchestrateLock", "OrchestrateExactPath",
            // libcurl: status/list/events --server talk to a remote serve over HTTP(S).
            "CCurl",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // `serve --http`: the JSON API (OpenAPI-described, SSE events, bearer tokens), `/metrics`,
        // and the web dashboard on it (its files compiled into the binary).
        .target(name: "OrchestrateHTTPAPI", dependencies: [
            "OrchestrateEngine", "OrchestrateOperations", "OrchestrateModel", "OrchestrateStore", "OrchestratePluginHost", "OrchestrateJSON", "OrchestrateTokenBucket",
            "OrchestrateLock", "OrchestrateExactPath", .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "HummingbirdTLS", package: "hummingbird"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Prometheus", package: "swift-prometheus"),
        ], resources: [.embedInCode("Dashboard"), .embedInCode("openapi.json")]),
        .executableTarget(name: "orchestrate", dependencies: ["OrchestrateCLI"]),
        .executableTarget(name: "OrchestratePluginRunner", dependencies: ["OrchestratePluginHost", "OrchestrateJSON"]),
        // Plain C, no dependencies: it starts once per exec step and must cost next to nothing.
        .executableTarget(name: "OrchestrateExecGuard", path: "plugins/exec/Guard"),

        // The Swift plugin author's kit: a step is a type conforming to `StepDefinition`.
        .target(name: "OrchestratePluginKit", dependencies: ["OrchestrateJSON", "COrchestratePlugin", "OrchestrateTokenBucket",
                                                             "OrchestrateLock"]),
        // Local file I/O for plugins, written once: a partial file beside its destination
        // (resume from its size), early write-back, commit by fsync + atomic rename + directory
        // fsync, streamed reading and hashing.
        .target(name: "OrchestratePluginFiles", dependencies: ["OrchestratePluginKit", "OrchestrateDigest", "CPluginFiles", "OrchestrateExactPath"]),
        // sync_file_range for the write-back (Swift's Glibc module hides it).
        .target(name: "CPluginFiles"),
        .target(name: "OrchestrateFSPlugin", dependencies: ["OrchestratePluginKit", "OrchestratePluginFiles", "OrchestrateDigest"],
                path: "plugins/fs"),
        // pipe2 and dladdr for the exec plugin (Swift's Glibc module hides them).
        .target(name: "CExecSupport", path: "plugins/exec/Support"),
        .target(name: "OrchestrateExecPlugin", dependencies: ["OrchestratePluginKit", "CExecSupport"],
                path: "plugins/exec", exclude: ["README.md", "Guard", "Support"]),
        .target(name: "OrchestrateHTTPPlugin", dependencies: ["OrchestratePluginKit", "OrchestratePluginFiles", "CCurl", "OrchestrateCurl",
                                                             "OrchestrateDigest", "OrchestrateTokenBucket"],
                path: "plugins/http", exclude: ["README.md"]),
        .target(name: "OrchestrateSFTPPlugin", dependencies: ["OrchestratePluginKit", "OrchestratePluginFiles", "CLibSSH2", "CLibCrypto",
                                                             "OrchestrateExactPath"],
                path: "plugins/sftp", exclude: ["README.md"]),
        // S3 and compatibles: the plugin, and its SigV4 signer and credential chain as a module
        // of their own (no I/O beyond reading ~/.aws), unit-tested against botocore.
        .target(name: "OrchestrateS3Auth", dependencies: ["CLibCrypto"], path: "plugins/s3/Auth"),
        // MD5 of several parts at once in the lanes of AVX-512 or AVX2 registers (C: intrinsics).
        .target(name: "CMultiMD5", path: "plugins/s3/MultiMD5"),
        // CRC-64/NVME (S3's CRC64NVME) by carry-less multiply: what a download verifies with.
        .target(name: "CCRC64NVME", path: "plugins/s3/CRC64", linkerSettings: [.linkedLibrary("pthread")]),
        .target(name: "OrchestrateS3Plugin", dependencies: ["OrchestratePluginKit", "OrchestratePluginFiles", "CCurl", "OrchestrateCurl", "CLibCrypto",
                                                           "OrchestrateS3Auth", "OrchestrateDigest", "CMultiMD5", "CCRC64NVME", "OrchestrateExactPath"],
                path: "plugins/s3", exclude: ["README.md", "Auth", "MultiMD5", "CRC64"]),
        // FTPS (and plain FTP only when asked for by name) on libcurl.
        .target(name: "OrchestrateFTPPlugin", dependencies: ["OrchestratePluginKit", "OrchestratePluginFiles", "CCurl", "OrchestrateCurl", "OrchestrateExactPath"],
                path: "plugins/ftp", exclude: ["README.md"]),
        .executableTarget(name: "OrchestrateSandbox", dependencies: [
            "OrchestrateJSON", .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "Logging", package: "swift-log"),
        ]),

        // Helpers shared by the test targets (products dir, C fixture plugins, child processes,
        // the orchestrate Runner, Tools, PostgreSQL and other peers).
        .target(name: "OrchestrateTestSupport", dependencies: ["OrchestrateJSON"], path: "Tests/OrchestrateTestSupport"),
        // One test target per module or plugin, named after what it tests.
        .testTarget(name: "OrchestrateModelTests", dependencies: ["OrchestrateModel", "OrchestrateTestSupport"],
                    resources: [.copy("BadWorkflows")]),
        .testTarget(name: "OrchestrateStoreTests", dependencies: ["OrchestrateStore", "OrchestrateTestSupport"]),
        // The plugin host: loading, checks, calls, bandwidth, with C fixture plugins, the hello
        // examples, and the fs and exec plugins driven directly through `StepInvocation`.
        .testTarget(name: "OrchestratePluginHostTests", dependencies: [
            "OrchestratePluginHost", "OrchestrateJSON", "OrchestrateTestSupport", "OrchestrateTokenBucket",
        ]),
        // The typed input declarations of OrchestratePluginKit: schema generation and reading.
        .testTarget(name: "OrchestratePluginKitTests", dependencies: ["OrchestratePluginKit", "OrchestrateJSON"]),
        // The engine's parts, in process (scheduling structures, retries, spins, secrets seen).
        .testTarget(name: "OrchestrateEngineTests", dependencies: [
            "OrchestrateEngine", "OrchestrateModel", "OrchestrateStore", "OrchestratePluginHost", "OrchestrateTestSupport",
        ]),
        // Operations' read models and run ids, in process.
        .testTarget(name: "OrchestrateOperationsTests", dependencies: [
            "OrchestrateOperations", "OrchestrateEngine", "OrchestrateModel", "OrchestrateStore", "OrchestrateTestSupport", "OrchestrateExactPath",
        ]),
        // End to end through the real binary: run, submit, serve, resume, cancel, schedules,
        // watch folders, retention, crashes. Run twice by scripts/test.sh: SQLite, then PostgreSQL.
        .testTarget(name: "OrchestrateCLITests", dependencies: [
            "OrchestrateEngine", "OrchestrateOperations", "OrchestrateModel", "OrchestrateStore", "OrchestratePluginHost",
            "OrchestrateTestSupport", "OrchestrateExactPath",
        ]),
        .testTarget(name: "OrchestrateHTTPPluginTests", dependencies: ["OrchestrateJSON", "OrchestrateTestSupport"]),
        .testTarget(name: "OrchestrateFTPPluginTests", dependencies: ["OrchestrateJSON", "OrchestrateTestSupport"]),
        .testTarget(name: "OrchestrateSFTPPluginTests", dependencies: ["OrchestrateJSON", "OrchestrateTestSupport"]),
        .testTarget(name: "OrchestrateS3PluginTests", dependencies: ["OrchestrateJSON", "OrchestrateTestSupport", "OrchestrateS3Auth", "CMultiMD5", "CCRC64NVME"]),
        // The HTTP API, /metrics and the dashboard of `serve --http`, through the real binary; the
        // event streams' reads in process.
        .testTarget(name: "OrchestrateHTTPAPITests", dependencies: [
            "OrchestrateJSON", "OrchestrateTestSupport", "OrchestrateHTTPAPI", "OrchestrateStore", "OrchestratePluginHost",
        ]),
        // Several machines (network namespaces) sharing one PostgreSQL queue: spread, takeover,
        // fencing, database restarts. Skipped unless root with `ip netns`.
        .testTarget(name: "OrchestrateClusterTests", dependencies: ["OrchestrateJSON", "OrchestrateTestSupport"]),
    ]
)
