// orchestrate-sandbox: a local stand-in for the Vimeo upload API (tus and streaming uploads) and
// a file server, with fault injection, for the demo and the tests. Loopback by default.
//
//   orchestrate-sandbox [--host ADDR] [--port N] [--data-dir DIR] [--token T] [--quota BYTES]
//                       [--drop-after-bytes N] [--max-drops N] [--rate-503 R] [--rate-429 R]
//                       [--retry-after S] [--stall-ms MS] [--stall-after-bytes N]
//
// Prints `orchestrate-sandbox listening on http://127.0.0.1:PORT` on stdout once it accepts
// connections (port 0 picks a free port), then serves until killed. --host (default 127.0.0.1)
// is for tests whose clients live in network namespaces; keep it on a private address.
#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import Logging
import OrchestrateJSON

let options = SandboxOptions.parse(Array(CommandLine.arguments.dropFirst()))
let state = SandboxState(dataDir: options.dataDir, token: options.token, quota: options.quota, faults: options.faults)
let router = Router(context: SandboxContext.self)
APIRoutes.add(to: router, state: state)
UploadRoutes.add(to: router, state: state)
FileRoutes.add(to: router, state: state)
ControlRoutes.add(to: router, state: state)

var logger = Logger(label: "orchestrate-sandbox")
logger.logLevel = .warning
let app = Application(
    router: router,
    configuration: .init(address: .hostname(options.host, port: options.port), serverName: "orchestrate-sandbox"),
    onServerRunning: { channel in
        let port = channel.localAddress?.port ?? options.port
        await state.setBase("http://\(options.host):\(port)")
        let line = "orchestrate-sandbox listening on http://\(options.host):\(port)\n"
        _ = line.withCString { write(1, $0, strlen($0)) }  // unbuffered: tests read it at once
    },
    logger: logger
)
try await app.runService()
