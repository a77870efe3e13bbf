#if canImport(Glibc)
import Glibc
#endif
import CCurl
import OrchestratePluginFiles
import OrchestrateCurl
import OrchestratePluginKit

/// `if_exists` of http.download: whether the file already at the destination stays, decided
/// before anything is opened or written. `skip` keeps any regular file; `if-different` asks the
/// server with a HEAD (redirects followed as for the GET) and keeps the file when its size and
/// modification time (to the second) are the `Content-Length` and `Last-Modified` answered. A
/// HEAD that fails or lacks either header counts as different: the file is downloaded again.
/// With `sha256`, a kept file must also have that digest.
enum ExistingDownload {
    struct Kept { var size: Int64; var sha256: String }

    static func kept(_ destination: String, url: String, ifExists: IfExists, expected: String?, options: TransferOptions,
                     step: StepContext) throws(StepError) -> Kept?
    {
        guard ifExists != .overwrite, let current = try FileInfo.of(destination), current.isRegular else { return nil }
        if ifExists == .ifDifferent {
            let head = try Transfer(step: step, method: "HEAD", url: url, headers: options.headers, options: options, memoryCap: 0).perform()
            let length = head.header("content-length").flatMap { Int64($0.trimmingWhitespace) }
            let modified = head.header("last-modified").flatMap(HTTPDate.seconds)
            guard head.status == 200, let length,
                  ifExists.keeps(size: current.size, modified: current.modifiedSeconds, sourceSize: length, sourceModified: modified)
            else { return nil }
        }
        let digest = try LocalFile(reading: destination).sha256 { _ throws(StepError) in try step.checkCancellation() }.digest
        if let expected, expected != digest { return nil }
        return Kept(size: current.size, sha256: digest)
    }
}

/// HTTP dates (`Last-Modified`): the three formats of RFC 9110 §5.6.7, through libcurl's parser.
enum HTTPDate {
    /// Seconds since the epoch, or nil when `value` is not an HTTP date.
    static func seconds(_ value: String) -> Int64? {
        let when = curl_getdate(value.trimmingWhitespace, nil)
        return when > 0 ? Int64(when) : nil
    }
}

