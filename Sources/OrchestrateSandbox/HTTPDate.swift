#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Dates as HTTP headers write them (RFC 9110 IMF-fixdate): `Sun, 06 Nov 1994 08:49:37 GMT`,
/// for Last-Modified and a Retry-After given as a date.
enum HTTPDate {
    static func format(_ seconds: Int) -> String {
        var t = time_t(seconds)
        var fields = tm()
        gmtime_r(&t, &fields)
        var buffer = [CChar](repeating: 0, count: 64)
        let length = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &fields)
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
