import Foundation
import OrchestrateJSON

/// Where a step talks to, for network awareness: derived from its inputs' `url`
/// (`https://host[:port]/…`) or `host` and `port`.
struct Endpoint: Hashable, Sendable, CustomStringConvertible {
    let host: String
    let port: Int

    var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    init?(inputs: JSONValue) {
        if let url = inputs["url"]?.stringValue, let components = URLComponents(string: url), let host = components.host,
           !host.isEmpty
        {
            self.host = host
            port = components.port ?? (components.scheme?.lowercased() == "http" ? 80 : 443)
        } else if let host = inputs["host"]?.stringValue, !host.isEmpty, let port = inputs["port"]?.intValue {
            self.host = host
            self.port = Int(port)
        } else {
            return nil
        }
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
