#if canImport(Glibc)
import Glibc
#endif

/// Command-line options (plain flags; the sandbox needs nothing fancier).
struct SandboxOptions {
    var port = 0
    /// The address to listen on: loopback unless a test reaches it from a network namespace.
    var host = "127.0.0.1"
    var dataDir = "./sandbox-data"
    var token = "sandbox-token"
    var quota: Int64 = 1 << 40
    var faults = Faults()

    static func parse(_ arguments: [String]) -> SandboxOptions {
        var options = SandboxOptions()
        var i = 0
        func value() -> String {
            i += 1
            guard i < arguments.count else { fail("\(arguments[i - 1]) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            switch arguments[i] {
            case "--port": options.port = Int(value()) ?? 0
            case "--host": options.host = value()
            case "--data-dir": options.dataDir = value()
            case "--token": options.token = value()
            case "--quota": options.quota = Int64(value()) ?? options.quota
            case "--drop-after-bytes": options.faults.dropAfterBytes = Int64(value()) ?? 0
            case "--max-drops": options.faults.maxDrops = Int(value()) ?? -1
            case "--rate-503": options.faults.rate503 = Double(value()) ?? 0
            case "--rate-429": options.faults.rate429 = Double(value()) ?? 0
            case "--retry-after": options.faults.retryAfter = Int(value()) ?? 1
            case "--stall-ms": options.faults.stallMilliseconds = Int(value()) ?? 0
            case "--stall-after-bytes": options.faults.stallAfterBytes = Int64(value()) ?? 0
            case "-h", "--help":
                print("usage: orchestrate-sandbox [--host ADDR] [--port N] [--data-dir DIR] [--token T] [--quota BYTES] [--drop-after-bytes N] [--max-drops N] [--rate-503 R] [--rate-429 R] [--retry-after S] [--stall-ms MS] [--stall-after-bytes N]")
                exit(0)
            default: fail("unknown option \(arguments[i])")
            }
            i += 1
        }
        return options
    }

    static func fail(_ message: String) -> Never {
        let line = "orchestrate-sandbox: \(message)\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
        exit(2)
    }
}
