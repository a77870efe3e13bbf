import Foundation
import OrchestrateJSON
import OrchestrateTestSupport

/// Sizes of the "big" transfers: the issue's 1 GiB runs in bench/http; the suite defaults to
/// 64 MiB so it stays well inside CI's budget on two cores (ORCHESTRATE_TEST_BIG_MIB overrides).
enum TestSizes {
    static let bigMiB: Int = Int(ProcessInfo.processInfo.environment["ORCHESTRATE_TEST_BIG_MIB"] ?? "") ?? 64
    static var big: Int { bigMiB << 20 }
}

/// A real nginx on loopback, configured in a temporary directory: static files under /files/
/// (Range, If-Range, strong ETags), WebDAV PUT under /dav/, canned statuses under /status/, a
/// 302 to any URL at /redirect?to=URL, and an access log of the headers the tests assert on.
/// HTTPS with a given certificate when asked.
final class Nginx: @unchecked Sendable {
    let dir = TemporaryDirectory("nginx")
    let port = Tools.freePort()
    let process = Process()
    var www: String { dir.file("www").path }
    var dav: String { dir.file("dav").path }
    var scheme: String
    var base: String { "\(scheme)://127.0.0.1:\(port)" }

    init(certificate: (cert: String, key: String)? = nil) throws {
        scheme = certificate == nil ? "http" : "https"
        for sub in ["www", "dav", "tmp", "logs"] {
            try FileManager.default.createDirectory(at: dir.file(sub), withIntermediateDirectories: true)
        }
        let tls = certificate.map { "ssl_certificate \($0.cert); ssl_certificate_key \($0.key);" } ?? ""
        let conf = """
            \(getuid() == 0 ? "user root;" : "")
            worker_processes 1;
            error_log \(dir.path)/logs/error.log;
            pid \(dir.path)/nginx.pid;
            events { worker_connections 128; }
            http {
              log_format t '$request_method $uri $status range=[$http_range] ifrange=[$http_if_range] idem=[$http_idempotency_key]';
              access_log \(dir.path)/logs/access.log t;
              client_body_temp_path \(dir.path)/tmp/body; proxy_temp_path \(dir.path)/tmp/proxy;
              fastcgi_temp_path \(dir.path)/tmp/fcgi; uwsgi_temp_path \(dir.path)/tmp/uwsgi; scgi_temp_path \(dir.path)/tmp/scgi;
              default_type application/octet-stream;
              server {
                listen 127.0.0.1:\(port) \(certificate == nil ? "" : "ssl");
                \(tls)
                location /files/ { alias \(www)/; }
                location /dav/ { alias \(dav)/; dav_methods PUT DELETE; create_full_put_path on; client_max_body_size 0; }
                location = /status/429 { add_header Retry-After 2 always; return 429 '{"error":"slow down"}'; }
                location = /status/404 { default_type application/json; return 404 '{"error":"The requested video could not be found"}'; }
                location = /status/503 { add_header Retry-After "Wed, 21 Oct 2015 07:28:00 GMT" always; return 503; }
                location = /json { default_type application/json; return 200 '{"hello":"world","n":3}'; }
                location = / { default_type text/plain; return 200 'the root'; }
                location = /redirect { return 302 $arg_to; }
              }
            }
            """
        dir.write("nginx.conf", conf)
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        process.arguments = ["-p", dir.path, "-c", dir.file("nginx.conf").path, "-g", "daemon off;"]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        let ready = Tools.waitFor(10) {
            (try? Tools.run(["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "\(base)/json"]).stdout) == "200"
        }
        if !ready { throw TestFailure("nginx did not start: \((try? String(contentsOfFile: "\(dir.path)/logs/error.log", encoding: .utf8)) ?? "")") }
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }

    var accessLog: [String] {
        ((try? String(contentsOfFile: "\(dir.path)/logs/access.log", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}

/// The project's sandbox server (`orchestrate-sandbox --port 0`), its URL read from stdout.
final class Sandbox: @unchecked Sendable {
    let dir = TemporaryDirectory("sandbox")
    let process = Process()
    let url: String
    static let token = "sandbox-token"

    init(arguments: [String] = []) throws {
        process.executableURL = TestPaths.productsDir.appendingPathComponent("orchestrate-sandbox")
        process.arguments = ["--port", "0", "--data-dir", dir.file("data").path] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let range = text.range(of: "http://") else { throw TestFailure("sandbox did not start: \(text)") }
        url = String(text[range.lowerBound...]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }

    func setFaults(_ json: String) throws { _ = try Tools.json("\(url)/_sandbox/faults", post: json) }
    func state() throws -> JSONValue { try Tools.json("\(url)/_sandbox/state") }
    func videos() throws -> [JSONValue] { try state()["videos"]?.arrayValue ?? [] }
    func video(_ uri: String) throws -> JSONValue? { try videos().first { $0["uri"]?.stringValue == uri } }
    func videoFile(_ uri: String) -> String { dir.file("data/videos/\(uri.split(separator: "/").last!).bin").path }
    var filesDir: String { dir.file("data/files").path }
}
