import Foundation
import OrchestrateTestSupport

/// A self-signed certificate for 127.0.0.1 (what the FTPS peers present).
struct SelfSignedCertificate {
    let cert: String
    let key: String

    init(in dir: TemporaryDirectory, name: String = "ftps") throws {
        cert = dir.file("\(name)-cert.pem").path
        key = dir.file("\(name)-key.pem").path
        let made = try Tools.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                                  "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert])
        guard made.status == 0 else { throw TestFailure("openssl: \(made.stderr)") }
    }
}

/// tools/ftps_server.py (pyftpdlib, from the test venv) in the foreground on a free loopback
/// port: explicit FTPS with its own self-signed certificate, or plain FTP; its log names every
/// command and transfer (`APPE /path completed=1 bytes=N`).
final class PyFTPServer: @unchecked Sendable {
    let dir = TemporaryDirectory("ftps")
    let user = "tester"
    let password = "pw-\(UUID().uuidString)"
    let certificate: SelfSignedCertificate
    let port: Int
    private let child: SpawnedChild
    var root: String { dir.file("root").path }
    var log: String { dir.file("server.log").path }

    init(plain: Bool = false, arguments: [String] = []) throws {
        certificate = try SelfSignedCertificate(in: dir)
        try FileManager.default.createDirectory(atPath: dir.file("root").path, withIntermediateDirectories: true)
        let out = dir.file("stdout").path
        var args = [try PythonVenv.python().path, TestPaths.packageRoot.appendingPathComponent("tools/ftps_server.py").path,
                    "--root", dir.file("root").path, "--user", user, "--password", password, "--log", dir.file("server.log").path]
        args += plain ? ["--plain"] : ["--cert", certificate.cert, "--key", certificate.key]
        child = try SpawnedChild(args + arguments, stdout: out, stderr: dir.file("stderr").path)
        var found: Int?
        _ = Tools.waitFor(30) {
            let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            found = text.split(separator: "\n").first { $0.hasPrefix("ftps_server listening on ") }.flatMap { Int($0.split(separator: " ").last ?? "") }
            return found != nil
        }
        guard let found else {
            kill(child.pid, SIGKILL)
            _ = child.wait(timeout: 5)
            throw TestFailure("ftps_server did not start: \((try? String(contentsOfFile: dir.file("stderr").path, encoding: .utf8)) ?? "")")
        }
        port = found
    }

    deinit {
        kill(child.pid, SIGKILL)
        _ = child.wait(timeout: 5)
    }

    /// The server log's transfer lines for `command` (STOR, APPE, RETR) on paths ending in
    /// `suffix`: (completed, bytes) each.
    func transfers(_ command: String, endingWith suffix: String) -> [(completed: Bool, bytes: Int64)] {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            guard let at = words.firstIndex(of: Substring(command)), at + 3 < words.count, words[at + 1].hasSuffix(suffix),
                  let completed = words.first(where: { $0.hasPrefix("completed=") }),
                  let bytes = words.first(where: { $0.hasPrefix("bytes=") }).flatMap({ Int64($0.dropFirst(6)) })
            else { return nil }
            return (completed == "completed=1", bytes)
        }
    }
}

/// Debian's vsftpd in the foreground (`background=NO`) on a free loopback port with a
/// configuration of the test's own: anonymous login forced onto TLS (explicit, or implicit with
/// `implicit_ssl`), uploads, folders and renames allowed under `/pub`. Needs root (vsftpd
/// chroots the anonymous user) and the vsftpd package (scripts/install-deps.sh).
final class Vsftpd: @unchecked Sendable {
    let dir = TemporaryDirectory("vsftpd")
    let certificate: SelfSignedCertificate
    let port = Tools.freePort()
    private let child: SpawnedChild
    /// The anonymous user's chroot; `pub` in it is writable.
    var anonRoot: String { dir.file("anon").path }
    var pub: String { dir.file("anon/pub").path }

    static var available: Bool { getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/vsftpd") }

    init(implicit: Bool = false) throws {
        certificate = try SelfSignedCertificate(in: dir)
        for sub in ["anon/pub", "empty"] {
            try FileManager.default.createDirectory(atPath: dir.file(sub).path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o755])
        }
        // The chroot must not be writable by the anonymous user; its pub folder is.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.path)
        _ = try Tools.run(["chown", "ftp:ftp", dir.file("anon/pub").path])
        let conf = """
            listen=YES
            listen_ipv6=NO
            background=NO
            listen_address=127.0.0.1
            listen_port=\(port)
            anonymous_enable=YES
            local_enable=NO
            write_enable=YES
            anon_root=\(dir.file("anon").path)
            anon_upload_enable=YES
            anon_mkdir_write_enable=YES
            anon_other_write_enable=YES
            anon_umask=022
            no_anon_password=YES
            ssl_enable=YES
            implicit_ssl=\(implicit ? "YES" : "NO")
            allow_anon_ssl=YES
            force_anon_logins_ssl=YES
            force_anon_data_ssl=YES
            rsa_cert_file=\(certificate.cert)
            rsa_private_key_file=\(certificate.key)
            pasv_enable=YES
            pasv_address=127.0.0.1
            secure_chroot_dir=\(dir.file("empty").path)
            seccomp_sandbox=NO
            xferlog_enable=YES
            xferlog_std_format=NO
            vsftpd_log_file=\(dir.file("vsftpd.log").path)
            log_ftp_protocol=YES

            """
        let confFile = dir.write("vsftpd.conf", conf).path
        child = try SpawnedChild(["/usr/sbin/vsftpd", confFile], stdout: dir.file("stdout").path, stderr: dir.file("stderr").path)
        let up = Tools.waitFor(10) {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
        }
        guard up else {
            kill(child.pid, SIGKILL)
            _ = child.wait(timeout: 5)
            throw TestFailure("vsftpd did not start: \((try? String(contentsOfFile: dir.file("stdout").path, encoding: .utf8)) ?? "")")
        }
    }

    deinit {
        kill(child.pid, SIGKILL)
        _ = child.wait(timeout: 5)
    }

    /// The protocol log (every command and reply).
    var log: String { (try? String(contentsOfFile: dir.file("vsftpd.log").path, encoding: .utf8)) ?? "" }
}

/// Files compared byte for byte, and trees as their relative paths with contents.
enum Trees {
    static func sameBytes(_ a: String, _ b: String) -> Bool {
        guard let x = FileManager.default.contents(atPath: a), let y = FileManager.default.contents(atPath: b) else { return false }
        return x == y
    }

    static func files(_ root: String) -> [String: Data] {
        var out: [String: Data] = [:]
        guard let walker = FileManager.default.enumerator(atPath: root) else { return out }
        while let relative = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let full = root + "/" + relative
            if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue {
                out[relative] = FileManager.default.contents(atPath: full)
            }
        }
        return out
    }

    /// A small tree: nested folders, an empty file, a name with a space, and `big` bytes in `a/big.bin`.
    static func make(_ root: String, big: Int) throws {
        for sub in ["a/b", "c"] { try FileManager.default.createDirectory(atPath: root + "/" + sub, withIntermediateDirectories: true) }
        try Tools.randomFile(root + "/a/big.bin", bytes: big)
        try Tools.randomFile(root + "/a/b/small one.txt", bytes: 1000)
        try Tools.randomFile(root + "/c/second.bin", bytes: big / 2)
        _ = FileManager.default.createFile(atPath: root + "/empty.txt", contents: Data())
    }
}
