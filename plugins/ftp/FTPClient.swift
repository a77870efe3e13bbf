#if canImport(Glibc)
import Glibc
#endif
import CCurl
import OrchestratePluginFiles
import OrchestratePluginKit

/// One FTP control connection of a step: a libcurl easy handle, reset before each request
/// (curl_easy_reset keeps the open connection and the TLS session cache), so the files of a tree
/// go over one login. Every request is configured by `prepare`, which fixes what must hold for
/// all of them: TLS as `tls` says with the certificate and host name verified, only ftp and ftps,
/// passive mode with the PASV reply's address ignored (the data connection goes to the control
/// connection's host, never where a server points it), credentials outside the URL.
final class FTPClient {
    struct FileInfo { var size: Int64; var mtime: Int64 }

    let server: ServerOptions
    let root: RemoteRoot
    private let step: StepContext
    private let rateCap: StepRateCap?
    private let easy: UnsafeMutableRawPointer
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var commands: UnsafeMutablePointer<curl_slist>?

    // The request under way, as its callbacks see it.
    private var upload: (file: LocalFile, offset: Int64, end: Int64)?
    private var uploaded: Int64 = 0
    private var sink: ((UnsafeRawBufferPointer) throws(StepError) -> Void)?
    private var callbackError: StepError?
    private var lastProgress: UInt64 = 0
    /// Bytes this request moved so far, about every 100 ms.
    var onProgress: ((Int64) -> Void)?
    /// Asked with the progress: true stops the transfer under way (another worker failed).
    var stop: () -> Bool = { false }
    private var moved: Int64 = 0

    /// A listing bigger than this is refused (a hostile server's endless listing).
    static let listingCap = 64 << 20

    init(server: ServerOptions, root: RemoteRoot, step: StepContext, rateCap: StepRateCap?) throws(StepError) {
        FTPClient.initialiseLibcurl()
        guard let easy = curl_easy_init() else { throw .retryable("libcurl could not create a handle", code: "curl_init") }
        self.easy = easy
        self.server = server
        self.root = root
        self.step = step
        self.rateCap = rateCap
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    /// `count` more clients to the same server, each with a control connection of its own (the
    /// step's `max_rate` shared by all).
    func others(_ count: Int) throws(StepError) -> [FTPClient] {
        var clients: [FTPClient] = []
        for _ in 0 ..< max(0, count) { clients.append(try FTPClient(server: server, root: root, step: step, rateCap: rateCap)) }
        return clients
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(commands)
        errorBuffer.deallocate()
    }

    /// curl_global_init is not thread-safe: done once, before the first handle.
    private static let initialised: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        return true
    }()

    private static func initialiseLibcurl() { _ = initialised }

    /// TLS 1.2 at least. Before libcurl 8.10, an FTPS upload over TLS 1.3 can end with the data
    /// connection reset before the server read the last bytes (curl issues 6149 and 13556:
    /// vsftpd answers 426 "Failure reading network stream"), so TLS 1.3 is used from 8.10 on.
    private static let tlsVersions: Int = {
        let libcurl = Int(curl_version_info(CURLVERSION_FIRST).pointee.version_num)
        let minimum = Int(CURL_SSLVERSION_TLSv1_2)
        return libcurl < 0x08_0a_00 ? minimum | Int(CURL_SSLVERSION_MAX_TLSv1_2) : minimum
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
        var size: curl_off_t = -1, time: curl_off_t = -1
        _ = orc_curl_getinfo_off(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &size)
        _ = orc_curl_getinfo_off(easy, CURLINFO_FILETIME_T, &time)
        guard size >= 0 else { throw .permanent("\(server.described) did not tell the size of \(root.display(path)) (SIZE)", code: "no_size") }
        return FileInfo(size: Int64(size), mtime: Int64(time))
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
        upload = (file, offset, size)
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
        setCommands(after: ["RNFR \(path.last ?? "")", "RNTO \(name)"])
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
        curl_easy_reset(easy)
        upload = nil
        uploaded = 0
        sink = nil
        callbackError = nil
        moved = 0
        errorBuffer[0] = 0
        curl_slist_free_all(commands)
        commands = nil

        let me = Unmanaged.passUnretained(self).toOpaque()
        set(CURLOPT_URL, url)
        set(CURLOPT_NOSIGNAL, 1)
        _ = orc_curl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, UnsafeRawPointer(errorBuffer))
        // libcurl itself refuses every other protocol, whatever the URL (defence in depth).
        guard "ftp,ftps".withCString({ orc_curl_setopt_pointer(easy, CURLOPT_PROTOCOLS_STR, $0) }) == CURLE_OK else {
            throw .permanent("libcurl refused to restrict its protocols to ftp,ftps", code: "curl_init")
        }
        set(CURLOPT_CONNECTTIMEOUT, server.connectTimeout)
        set(CURLOPT_SERVER_RESPONSE_TIMEOUT, server.ioTimeout)
        set(CURLOPT_LOW_SPEED_LIMIT, 1)
        set(CURLOPT_LOW_SPEED_TIME, server.ioTimeout)
        // TLS for the login and every data connection, or (by name only) none at all.
        set(CURLOPT_USE_SSL, Int((server.tls == .plain ? CURLUSESSL_NONE : CURLUSESSL_ALL).rawValue))
        set(CURLOPT_FTPSSLAUTH, Int(CURLFTPAUTH_TLS.rawValue))
        set(CURLOPT_SSLVERSION, FTPClient.tlsVersions)
        set(CURLOPT_SSL_VERIFYPEER, 1)
        set(CURLOPT_SSL_VERIFYHOST, 2)
        if let ca = server.caFile { set(CURLOPT_CAINFO, ca) }
        set(CURLOPT_USERNAME, server.user)
        set(CURLOPT_PASSWORD, server.password ?? "")
        // Passive mode; the data connection goes to the control connection's peer whatever
        // address a PASV reply names (a hostile server cannot aim it at another host).
        set(CURLOPT_FTP_SKIP_PASV_IP, 1)
        set(CURLOPT_FTP_USE_EPSV, 1)
        set(CURLOPT_FTP_FILEMETHOD, Int(CURLFTPMETHOD_MULTICWD.rawValue))
        set(CURLOPT_BUFFERSIZE, 512 * 1024)
        set(CURLOPT_UPLOAD_BUFFERSIZE, 2 * 1024 * 1024)

        typealias IOCallback = @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int
        let write: IOCallback = { data, size, count, me in
            Unmanaged<FTPClient>.fromOpaque(me!).takeUnretainedValue().received(UnsafeRawBufferPointer(start: data, count: size * count))
        }
        let read: IOCallback = { data, size, count, me in
            Unmanaged<FTPClient>.fromOpaque(me!).takeUnretainedValue().fill(UnsafeMutableRawBufferPointer(start: data, count: size * count))
        }
        let progress: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> Int32 = {
            me, _, _, _, _ in
            Unmanaged<FTPClient>.fromOpaque(me!).takeUnretainedValue().progressed()
        }
        _ = orc_curl_setopt_write_callback(easy, CURLOPT_WRITEFUNCTION, write)
        _ = orc_curl_setopt_pointer(easy, CURLOPT_WRITEDATA, me)
        _ = orc_curl_setopt_read_callback(easy, CURLOPT_READFUNCTION, read)
        _ = orc_curl_setopt_pointer(easy, CURLOPT_READDATA, me)
        _ = orc_curl_setopt_xferinfo_callback(easy, CURLOPT_XFERINFOFUNCTION, progress)
        _ = orc_curl_setopt_pointer(easy, CURLOPT_XFERINFODATA, me)
        set(CURLOPT_NOPROGRESS, 0)
    }

    /// Commands sent after the transfer, in the file's folder, only if it succeeded.
    private func setCommands(after lines: [String]) {
        for line in lines { commands = curl_slist_append(commands, line) }
        _ = orc_curl_setopt_pointer(easy, CURLOPT_POSTQUOTE, UnsafeRawPointer(commands))
    }

    private func set(_ option: CURLoption, _ value: Int) {
        // Options numbered in the curl_off_t range take a curl_off_t, the others a long.
        if Int(option.rawValue) >= Int(CURLOPTTYPE_OFF_T) && Int(option.rawValue) < Int(CURLOPTTYPE_BLOB) {
            _ = orc_curl_setopt_off(easy, option, curl_off_t(value))
        } else {
            _ = orc_curl_setopt_long(easy, option, value)
        }
    }

    /// String options are copied by libcurl.
    private func set(_ option: CURLoption, _ value: String) {
        _ = value.withCString { orc_curl_setopt_pointer(easy, option, $0) }
    }

    private func perform(_ what: String) throws(StepError) {
        let code = curl_easy_perform(easy)
        if let callbackError { throw callbackError }
        if code == CURLE_ABORTED_BY_CALLBACK && step.isCancelled { throw .cancelled("the FTP transfer was cancelled") }
        if code != CURLE_OK {
            var reply = 0
            _ = orc_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &reply)
            throw FTPErrors.transport(code, detail: String(cString: errorBuffer), server: server, what: what, answered: reply > 0)
        }
    }

    // MARK: - Callbacks (inside curl_easy_perform, on the step's thread)

    private func received(_ bytes: UnsafeRawBufferPointer) -> Int {
        // Without a sink (SIZE and MDTM of a NOBODY request come as header text): discarded.
        guard let sink else { return bytes.count }
        if throttle(bytes.count) { return 0 }
        do { try sink(bytes) } catch {
            callbackError = error
            return 0
        }
        moved += Int64(bytes.count)
        return bytes.count
    }

    private func fill(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let upload else { return 0 }
        let position = upload.offset + uploaded
        let wanted = Int(min(Int64(buffer.count), upload.end - position))
        guard wanted > 0 else { return 0 }
        if throttle(wanted) { return Int(CURL_READFUNC_ABORT) }
        do {
            let n = try upload.file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0 ..< wanted]), at: position)
            if n == 0 {
                callbackError = .permanent("\(upload.file.path) shrank while it was sent", code: "file_changed")
                return Int(CURL_READFUNC_ABORT)
            }
            uploaded += Int64(n)
            moved += Int64(n)
            return n
        } catch {
            callbackError = error
            return Int(CURL_READFUNC_ABORT)
        }
    }

    /// The step's `max_rate`, and the run's and host's --max-rate; true when cancelled waiting.
    private func throttle(_ count: Int) -> Bool {
        if step.consumeBandwidth(count) { return true }
        return rateCap?.consume(count, step: step) == true
    }

    private func progressed() -> Int32 {
        if step.isCancelled || stop() { return 1 }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let ms = UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
        if ms - lastProgress >= 100 {
            lastProgress = ms
            onProgress?(moved)
        }
        return 0
    }
}
