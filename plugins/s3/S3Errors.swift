#if canImport(Glibc)
import Glibc
#endif
import CCurl
import OrchestrateCurl
import OrchestratePluginKit

/// S3 answers as errors that say what to do. The XML error document is read (`Code`,
/// `Message`, `BucketName`, `Key`, `ServerTime`...); `SlowDown`, 500 and 503 are retryable with
/// a delay hint; the rest of 4xx is permanent. Messages name the bucket, the key and the access
/// key id, never the secret or the session token.
enum S3Errors {
    struct Context {
        var bucket: String
        var key: String?
        var accessKeyID: String
        var credentialsSource: String
        var endpoint: String
    }

    static func status(_ response: Exchange.Response, label: String, context: Context) -> StepError {
        let body = response.bodyText
        let code = XML.value("Code", in: body) ?? ""
        let message = XML.value("Message", in: body) ?? ""
        let said = message.isEmpty ? "" : ": \(message)"
        let object = context.key.map { "s3://\(context.bucket)/\($0)" } ?? "s3://\(context.bucket)"
        let errorCode = code.isEmpty ? "http_\(response.status)" : "s3_\(code)"
        switch code {
        case "NoSuchBucket":
            return .permanent("\(label): the bucket \(XML.value("BucketName", in: body) ?? context.bucket) does not exist at \(context.endpoint) "
                + "(check bucket, endpoint and region)", code: errorCode)
        case "NoSuchKey":
            return .permanent("\(label): there is no object \(object)", code: errorCode)
        case "AccessDenied", "AllAccessDisabled", "AccountProblem":
            return .permanent("\(label): access denied to \(object) for \(context.accessKeyID) (from \(context.credentialsSource))\(said); "
                + "check the key's permissions and the bucket policy", code: errorCode)
        case "InvalidAccessKeyId":
            return .permanent("\(label): the server does not know the access key \(context.accessKeyID) (from \(context.credentialsSource)); "
                + "check the credentials, and endpoint/region", code: errorCode)
        case "SignatureDoesNotMatch":
            return .permanent("\(label): the signature does not match: the secret access key for \(context.accessKeyID) "
                + "(from \(context.credentialsSource)) is wrong, or the request was altered on the way (a proxy?); also check the clock",
                code: errorCode)
        case "RequestTimeTooSkewed":
            let skew = skewSeconds(body).map { "the clock is off by \($0) s" } ?? "the clock is off by more than 15 minutes"
            return .permanent("\(label): \(skew) compared with the server; set the time right (NTP) and retry", code: errorCode)
        case "AuthorizationHeaderMalformed", "IllegalLocationConstraintException", "PermanentRedirect", "AuthorizationQueryParametersError":
            let region = XML.value("Region", in: body) ?? response.header("x-amz-bucket-region")
            return .permanent("\(label): \(code)\(said)" + (region.map { "; the bucket is in region \($0): set region: \($0)" } ?? "; check region and endpoint"),
                              code: errorCode)
        case "EntityTooSmall":
            return .permanent("\(label): a part is below the server's minimum size\(said) (part_size must be at least 5 MiB)", code: errorCode)
        case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "OperationAborted":
            return .retryable("\(label): \(code)\(said)", code: errorCode, retryAfter: retryAfter(response) ?? .seconds(2))
        default:
            break
        }
        if response.status == 301 || response.status == 307 {
            let region = response.header("x-amz-bucket-region")
            return .permanent("\(label): the server redirects (HTTP \(response.status)): " + (region.map { "the bucket is in region \($0): set region: \($0)" }
                ?? "check region and endpoint"), code: errorCode)
        }
        let text = "\(label) answered \(response.status)" + (code.isEmpty ? "" : " \(code)") + said
        if response.status == 408 || response.status == 429 || response.status >= 500 {
            return .retryable(text, code: errorCode, retryAfter: retryAfter(response) ?? .seconds(2))
        }
        if response.status == 403 {
            return .permanent("\(text); check the credentials of \(context.accessKeyID) (from \(context.credentialsSource))", code: errorCode)
        }
        return .permanent(text, code: errorCode)
    }

    /// A libcurl failure as a step error.
    static func transport(_ code: CURLcode, label: String, detail: String) -> StepError {
        CurlFailure.stepError(code, detail: detail, place: label) { text in
            "\(label): TLS certificate verification failed: \(text); trust the server's CA with ca_file"
        }
    }

    /// Server time minus request time, from a RequestTimeTooSkewed document (ISO 8601 both).
    static func skewSeconds(_ body: String) -> Int? {
        guard let server = XML.value("ServerTime", in: body).flatMap(epoch), let request = XML.value("RequestTime", in: body).flatMap(epoch)
        else { return nil }
        return request - server
    }

    /// `2013-05-24T00:00:00Z` (fractions allowed) or `20130524T000000Z` as seconds since the epoch.
    static func epoch(_ text: String) -> Int? {
        let d = text.utf8.prefix { $0 != UInt8(ascii: ".") && $0 != UInt8(ascii: "Z") && $0 != UInt8(ascii: "+") }
            .filter { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }.map { Int($0) - 48 }
        guard d.count >= 14 else { return nil }
        func n(_ from: Int, _ count: Int) -> Int { d[from ..< from + count].reduce(0) { $0 * 10 + $1 } }
        var parts = tm()
        parts.tm_year = Int32(n(0, 4) - 1900)
        parts.tm_mon = Int32(n(4, 2) - 1)
        parts.tm_mday = Int32(n(6, 2))
        parts.tm_hour = Int32(n(8, 2))
        parts.tm_min = Int32(n(10, 2))
        parts.tm_sec = Int32(n(12, 2))
        return Int(timegm(&parts))
    }

    static func retryAfter(_ response: Exchange.Response) -> Duration? {
        guard let value = response.header("retry-after"), let seconds = Int64(value) else { return nil }
        return .seconds(max(0, min(seconds, 3600)))
    }
}
