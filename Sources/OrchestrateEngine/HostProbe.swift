import Foundation
import OrchestrateJSON

/// Where a step talks to, for network awareness: derived from its inputs' `url`
/// (`https://host[:port]/…`) or `host` and `port`. A port left out is the scheme's (`WellKnownPorts`),
/// else the step type's default: ftp's 21 (990 with `tls: implicit`), else the `default` of
/// `port` in the step type's input schema (sftp's 22, a third-party plugin's).
struct Endpoint: Hashable, Sendable, CustomStringConvertible {
    let host: String
    let port: Int

    var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    init?(inputs: JSONValue, stepType: String = "", inputSchema: JSONValue = .null) {
        if let url = inputs["url"]?.stringValue, let components = URLComponents(string: url), let host = components.host,
           !host.isEmpty
        {
            guard let port = components.port ?? components.scheme.flatMap(WellKnownPorts.scheme) else { return nil }
            self.init(host: host, port: port)
        } else if let host = inputs["host"]?.stringValue, !host.isEmpty {
            let written = inputs["port"]?.intValue.map(Int.init)
            let schemaDefault = inputSchema["properties"]?["port"]?["default"]?.intValue.map(Int.init)
            guard let port = written ?? WellKnownPorts.step(stepType, inputs: inputs) ?? schemaDefault else { return nil }
            self.init(host: host, port: port)
        } else {
            return nil
        }
    }
}

/// The ports a step reaches when its inputs name none.
enum WellKnownPorts {
    static func scheme(_ scheme: String) -> Int? {
        ["http": 80, "https": 443, "ftp": 21, "ftps": 990, "sftp": 22][scheme.lowercased()]
    }

    /// A built-in plugin's default that its schema cannot state: ftp's port follows `tls`.
    static func step(_ stepType: String, inputs: JSONValue) -> Int? {
        guard stepType.hasPrefix("ftp.") else { return nil }
        return inputs["tls"]?.stringValue == "implicit" ? 990 : 21
    }
}

/// Checks whether an endpoint answers: a TCP connection within `timeout`, nothing sent.
enum HostProbe {
    /// Nil when the endpoint accepted a connection, else why not, in words for the operator
    /// ("files.example does not resolve: Name or service not known", "connection refused").
    static func failure(_ endpoint: Endpoint, timeout: Double = 2) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(endpoint.host, String(endpoint.port), &hints, &list)
        guard resolved == 0, let first = list else {
            return "\(endpoint.host) does not resolve: \(String(cString: gai_strerror(resolved)))"
        }
        defer { freeaddrinfo(list) }
        var why = "no address of \(endpoint.host) to connect to"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry {
            entry = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            if connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return nil }
            guard errno == EINPROGRESS else {
                why = describe(errno)
                continue
            }
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            guard poll(&poller, 1, Int32(timeout * 1000)) == 1 else {
                why = "no answer within \(Int(timeout)) s"
                continue
            }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0 { return nil }
            why = describe(error)
        }
        return why
    }

    private static func describe(_ error: Int32) -> String {
        String(cString: strerror(error)).lowercased()
    }
}
