#if canImport(Glibc)
import Glibc
#endif
import CCurl
import OrchestrateCurl
import OrchestratePluginFiles
import OrchestratePluginKit

/// One FTP control connection of a step: a libcurl easy handle (OrchestrateCurl), reset before
/// each request (its connection and TLS session stay), run by a multi handle of its own, so the
/// files a worker moves go over one login and a cancel is noticed at once. Every request is
/// configured by `prepare`, which fixes what must hold for all of them: TLS as `tls` says with
/// the certificate and host name verified, only ftp and ftps, passive mode with the PASV reply's
/// address ignored (the data connection goes to the control connection's host, never where a
/// server points it), credentials outside the URL.
final class FTPClient: CurlCallbacks {
    struct FileInfo { var size: Int64; var mtime: Int64 }

    let server: ServerOptions
    let root: RemoteRoot
    private let step: StepContext
    private let rateCap: StepRateCap?
    private let pacer: CurlPacer
    private let curl: CurlEasy
    private let multi: CurlMulti

    // The request under way, as its callbacks see it.
    private var upload: CurlBodyReader?
    private var sink: ((UnsafeRawBufferPointer) throws(StepError) -> Void)?
    private var callbackError: StepError?
    private var ticker = ProgressTicker()
    /// Bytes this request moved so far, about every 100 ms.
    var onProgress: ((Int64) -> Void)?
    /// Asked with the progress: true stops the transfer under way (another worker failed).
    var stop: () -> Bool = { false }
    private var moved: Int64 = 0

    /// A listing bigger than this is refused (a hostile server's endless listing).
    static let listingCap = 64 << 20

    init(server: ServerOptions, root: RemoteRoot, step: StepContext, rateCap: StepRateCap?) throws(StepError) {
        curl = try CurlEasy()
        multi = try CurlMulti()
        self.server = server
        self.root = root
        self.step = step
        self.rateCap = rateCap
        pacer = CurlPacer(step: step, rateCap: rateCap)
        curl.install(self)
    }

    /// `count` more clients to the same server, each with a control connection of its own (the
    /// step's `max_rate` shared by all).
    func others(_ count: Int) throws(StepError) -> [FTPClient] {
        var clients: [FTPClient] = []
        for _ in 0 ..< max(0, count) { clients.append(try FTPClient(server: server, root: root, step: step, rateCap: rateCap)) }
        return clients
    }

    /// TLS 1.2 at least. Before libcurl 8.10, an FTPS upload over TLS 1.3 can end with the data
    /// connection reset before the server read the last bytes (curl issues 6149 and 13556:
    /// vsftpd answers 426 "Failure reading network stream"), so TLS 1.3 is used from 8.10 on.
    private static let tlsVersions: Int = {
        let minimum = Int(CURL_SSLVERSION_TLSv1_2)
        return Curl.versionNumber < 0x08_0a_00 ? minimum | Int(CURL_SSLVERSION_MAX_TLSv1_2) : minimum
    }()

    // MARK: - Requests

    /// The size and modification time of a regular file; nil when there is none by that name
    /// (or it is a folder: SIZE is refused for one).
    func stat(_ path: [String]) throws(StepError) -> FileInfo? {
        try prepare(root.url(server.origin, path))
        set(CURLOPT_NOBODY, 1)
        set(CURLOPT_FILETIME, 1)
        do { try perform("SIZE \(root.display(path))") } catch where error.code == "ENOENT" || error.code == "access_denied" {
            return nil
        }
        let size = curl.infoOff(CURLINFO_CONTENT_LENGTH_DOWNLOAD_T), time = curl.infoOff(CURLINFO_FILETIME_T)
        guard size >= 0 else { throw .permanent("\(server.described) did not tell the size of \(root.display(path)) (SIZE)", code: "no_size") }
        return FileInfo(size: size, mtime: time)
    }

    /// Whether the folder exists (the server lets us change into it); with `create`, makes it and
    /// the folders on the way to it.
    func folder(_ path: [String], create: Bool) throws(StepError) -> Bool {
        try prepare(root.url(server.origin, path, directory: true))
        set(CURLOPT_NOBODY, 1)
        if create { set(CURLOPT_FTP_CREATE_MISSING_DIRS, Int(CURLFTP_CREATE_DIR_RETRY.rawValue)) }
        do { try perform("CWD \(root.display(path))") } catch where !create && (error.code == "access_denied" || error.code == "ENOENT") {
            return false
        }
        return true
    }

    /// The folder's entries: MLSD (machine-readable, with `type=` facts), or LIST in the Unix
    /// `ls -l` format from a server without MLSD.
    func list(_ path: [String]) throws(StepError) -> [Listing.Entry] {
        var entries: [Listing.Entry] = []
        for command in ["MLSD", "LIST"] {
            var lines = Listing.LineSplitter(cap: FTPClient.listingCap)
            var collected: [String] = []
            try prepare(root.url(server.origin, path, directory: true))
            set(CURLOPT_CUSTOMREQUEST, command)
            sink = { bytes throws(StepError) in try lines.feed(bytes) { collected.append($0) } }
            do {
                try perform("\(command) \(root.display(path))")
            } catch where command == "MLSD" && error.code == "curl_\(CURLE_FTP_COULDNT_RETR_FILE.rawValue)" {
                continue  // no MLSD (vsftpd): LIST
            }
            try lines.finish { collected.append($0) }
            for line in collected {
                let entry = try command == "MLSD" ? Listing.mlsd(line, folder: root.display(path)) : Listing.unixLS(line, folder: root.display(path))
                if let entry { entries.append(entry) }
            }
            break
        }
        return entries
    }

    /// Sends `file` from `offset` to `path`: STOR, or APPE after what the server holds when
    /// `append`; missing folders are made.
    func send(_ file: LocalFile, from offset: Int64, to path: [String], append: Bool) throws(StepError) {
        try prepare(root.url(server.origin, path))
        let size = file.size
        upload = CurlBodyReader(.file(file, offset: offset, length: size - offset))
        set(CURLOPT_UPLOAD, 1)
        set(CURLOPT_INFILESIZE_LARGE, Int(size - offset))
        if append { set(CURLOPT_APPEND, 1) }
        set(CURLOPT_FTP_CREATE_MISSING_DIRS, Int(CURLFTP_CREATE_DIR_RETRY.rawValue))
        try perform("\(append ? "APPE" : "STOR") \(root.display(path))")
    }

    /// Renames `path` to `name` in the same folder (RNFR, RNTO after changing into it).
    func rename(_ path: [String], to name: String) throws(StepError) {
        try prepare(root.url(server.origin, path))
        set(CURLOPT_NOBODY, 1)
        // Sent after the transfer, in the file's folder, only if it succeeded.
        curl.set(CURLOPT_POSTQUOTE, lines: ["RNFR \(path.last ?? "")", "RNTO \(name)"])
        try perform("RNFR \(root.display(path))")
    }

    /// Receives `path` from `offset` (REST) into `target` at the same offset.
    func receive(_ path: [String], from offset: Int64, into target: PartialFile) throws(StepError) {
        try prepare(root.url(server.origin, path))
        if offset > 0 { set(CURLOPT_RESUME_FROM_LARGE, Int(offset)) }
        var position = offset
        sink = { bytes throws(StepError) in
            try target.write(bytes, at: position)
            position += Int64(bytes.count)
        }
        try perform("RETR \(root.display(path))")
    }

    // MARK: - Configuration

    private func prepare(_ url: String) throws(StepError) {
        curl.reset()
        upload = nil
        sink = nil
        callbackError = nil
        moved = 0
        set(CURLOPT_URL, url)
        try curl.restrictProtocols("ftp,ftps")
        set(CURLOPT_CONNECTTIMEOUT, server.connectTimeout)
        set(CURLOPT_SERVER_RESPONSE_TIMEOUT, server.ioTimeout)
        curl.stallTimeout(server.ioTimeout)
        // TLS for the login and every data connection, or (by name only) none at all.
        set(CURLOPT_USE_SSL, Int((server.tls == .plain ? CURLUSESSL_NONE : CURLUSESSL_ALL).rawValue))
        set(CURLOPT_FTPSSLAUTH, Int(CURLFTPAUTH_TLS.rawValue))
        set(CURLOPT_SSLVERSION, FTPClient.tlsVersions)
        curl.verifyPeer(caFile: server.caFile)
        curl.set(CURLOPT_USERNAME, server.user)
        curl.set(CURLOPT_PASSWORD, server.password ?? "")
        // Passive mode; the data connection goes to the control connection's peer whatever
        // address a PASV reply names (a hostile server cannot aim it at another host).
        set(CURLOPT_FTP_SKIP_PASV_IP, 1)
        set(CURLOPT_FTP_USE_EPSV, 1)
        set(CURLOPT_FTP_FILEMETHOD, Int(CURLFTPMETHOD_MULTICWD.rawValue))
        curl.largeBuffers()
    }

    private func set(_ option: CURLoption, _ value: Int) { curl.set(option, value) }

    private func set(_ option: CURLoption, _ value: String) { curl.set(option, value) }

    private func perform(_ what: String) throws(StepError) {
        let code = try multi.perform(curl, step: step)
        if let callbackError { throw callbackError }
        if code == CURLE_ABORTED_BY_CALLBACK && step.isCancelled { throw .cancelled("the FTP transfer was cancelled") }
        if code != CURLE_OK {
            throw FTPErrors.transport(code, detail: curl.errorDetail, server: server, what: what, answered: curl.responseCode > 0)
        }
    }

    // MARK: - Callbacks (inside libcurl, on the worker's thread)

    func curlReceived(_ bytes: UnsafeRawBufferPointer) -> Int {
        // Without a sink (SIZE and MDTM of a NOBODY request): discarded.
        guard let sink else { return bytes.count }
        if pacer.wait(bytes.count) { return 0 }
        do { try sink(bytes) } catch {
            callbackError = error
            return 0
        }
        moved += Int64(bytes.count)
        return bytes.count
    }

    func curlFill(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard var reader = upload else { return 0 }
        let before = reader.position
        let n = reader.fill(buffer, pacer: pacer, error: &callbackError)
        upload = reader
        moved += reader.position - before
        return n
    }

    func curlProgress(_ progress: CurlProgress) -> Bool {
        if step.isCancelled || stop() { return true }
        if ticker.due() { onProgress?(moved) }
        return false
    }
}
