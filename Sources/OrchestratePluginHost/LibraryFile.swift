#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The checks made on a plugin file before `dlopen` runs any of its code, and the explanations
/// of a failed `dlopen`. `dlopen` executes the library's initialisers, so everything that can be
/// refused by looking at the file is refused here first.
enum LibraryFile {
    /// The resolved path of an existing regular file, or the refusal reason.
    static func resolve(_ path: String) throws(LoadProblem) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { throw LoadProblem("file not found") }
            throw LoadProblem("cannot be read: \(String(cString: strerror(errno)))")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw LoadProblem("not a regular file") }
        guard let resolved = realpath(path, nil) else {
            throw LoadProblem("cannot resolve the path: \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Refuses a plugin that anyone but root and the current user could have replaced.
    ///
    /// The rule, as OpenSSH's for key files and their directories:
    /// - the file and every directory above it, up to `/`, belong to root or to the current user;
    /// - none of them is writable by others, nor by a group other than root's (gid 0);
    /// - except a directory with the sticky bit (like /tmp) whose entry on the way (the file, or
    ///   the directory under it) belongs to root or to the current user: nobody else can
    ///   replace or rename that entry.
    static func checkPermissions(resolvedPath: String) -> String? {
        var file = stat()
        guard stat(resolvedPath, &file) == 0 else { return "cannot be read: \(String(cString: strerror(errno)))" }
        if let reason = foreignOwner(file, "the file", resolvedPath) { return reason }
        if file.st_mode & S_IWOTH != 0 {
            return "the file is writable by every user (anyone could replace its code); fix with chmod o-w \(resolvedPath)"
        }
        if file.st_mode & S_IWGRP != 0 && file.st_gid != 0 {
            return "the file is writable by group \(groupName(file.st_gid)) (its members could replace its code); "
                + "fix with chmod g-w \(resolvedPath)"
        }
        var path = resolvedPath
        var entry = file
        while path != "/" {
            let directory = parentDirectory(of: path)
            var dir = stat()
            guard stat(directory, &dir) == 0 else { return "its directory \(directory) cannot be read" }
            if let reason = foreignOwner(dir, "its directory \(directory)", directory) { return reason }
            let entryIsTrusted = entry.st_uid == 0 || entry.st_uid == geteuid()
            let sharedButSticky = dir.st_mode & S_ISVTX != 0 && entryIsTrusted
            if dir.st_mode & S_IWOTH != 0 && !sharedButSticky {
                if dir.st_mode & S_ISVTX != 0 {
                    return "it is in the world-writable directory \(directory) under \(path), owned by uid \(entry.st_uid), "
                        + "neither root nor the current user; move it to a directory only you can write"
                }
                return "it is in the world-writable directory \(directory) (anyone could replace it); "
                    + "move it, or fix with chmod o-w \(directory)"
            }
            if dir.st_mode & S_IWGRP != 0 && dir.st_gid != 0 && !sharedButSticky {
                return "it is in the directory \(directory), writable by group \(groupName(dir.st_gid)) (its members could replace it); "
                    + "move it, or fix with chmod g-w \(directory)"
            }
            path = directory
            entry = dir
        }
        return nil
    }

    /// The refusal for a file or directory on a plugin's path that belongs to neither root nor
    /// the current user (that user could replace the plugin), or nil.
    private static func foreignOwner(_ info: stat, _ what: String, _ path: String) -> String? {
        let me = geteuid()
        guard info.st_uid != 0 && info.st_uid != me else { return nil }
        return "\(what) belongs to \(userName(info.st_uid)), neither root nor the current user \(userName(me)) "
            + "(that user could replace the plugin's code); install it as root, or fix with chown \(me) \(path)"
    }

    static func userName(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid) else { return "uid \(uid)" }
        return "\(String(cString: entry.pointee.pw_name)) (uid \(uid))"
    }

    private static func groupName(_ gid: gid_t) -> String {
        guard let entry = getgrgid(gid) else { return "gid \(gid)" }
        return "\(String(cString: entry.pointee.gr_name)) (gid \(gid))"
    }

    /// Reads the first bytes and refuses anything that is not an ELF (Linux) or Mach-O (macOS)
    /// file, so a text file named `x.so` gets a clear message instead of a linker error.
    static func checkMagic(resolvedPath: String) -> String? {
        let header = readHeader(resolvedPath, count: 4)
        #if canImport(Darwin)
        let magics: [[UInt8]] = [[0xCF, 0xFA, 0xED, 0xFE], [0xCE, 0xFA, 0xED, 0xFE], [0xCA, 0xFE, 0xBA, 0xBE]]
        if !magics.contains(header) { return "not a shared library (no Mach-O header)" }
        #else
        if header != [0x7F, 0x45, 0x4C, 0x46] { return "not a shared library (no ELF header)" }
        #endif
        return nil
    }

    /// Turns a failed `dlopen` into a reason, adding what the ELF header reveals (another
    /// machine's architecture, a file cut short) in front of the linker's own text.
    static func explainOpenFailure(resolvedPath: String, dlerrorText: String) -> String {
        let header = readHeader(resolvedPath, count: 64)
        if header.count >= 20, header[0] == 0x7F, header[5] == 1 /* little-endian */ {
            let machine = UInt16(header[18]) | UInt16(header[19]) << 8
            if let host = hostMachine, machine != host {
                return "built for \(machineName(machine)), but this machine is \(machineName(host)): \(dlerrorText)"
            }
            if header.count == 64, header[4] == 2 /* 64-bit */ {
                let required = requiredSize(header)
                let size = fileSize(resolvedPath)
                if size < required {
                    return "truncated ELF file (\(size) bytes; its headers need at least \(required)): \(dlerrorText)"
                }
            }
        }
        return "cannot be loaded: \(dlerrorText)"
    }

    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    // MARK: - ELF details

    /// The smallest size the ELF64 header's own tables imply (program and section headers).
    private static func requiredSize(_ h: [UInt8]) -> Int {
        func u16(_ o: Int) -> Int { Int(h[o]) | Int(h[o + 1]) << 8 }
        func u64(_ o: Int) -> Int { (0..<8).reduce(0) { $0 | Int(h[o + $1]) << (8 * $1) } }
        let programEnd = u64(0x20) + u16(0x36) * u16(0x38)
        let sectionEnd = u64(0x28) + u16(0x3A) * u16(0x3C)
        return max(64, programEnd, sectionEnd)
    }

    private static var hostMachine: UInt16? {
        #if arch(x86_64)
        return 62
        #elseif arch(arm64)
        return 183
        #elseif arch(i386)
        return 3
        #elseif arch(arm)
        return 40
        #else
        return nil
        #endif
    }

    private static func machineName(_ machine: UInt16) -> String {
        switch machine {
        case 3: return "i386"
        case 8: return "mips"
        case 20: return "ppc"
        case 21: return "ppc64"
        case 22: return "s390x"
        case 40: return "arm"
        case 62: return "x86_64"
        case 183: return "aarch64"
        case 243: return "riscv"
        default: return "ELF machine \(machine)"
        }
    }

    private static func readHeader(_ path: String, count: Int) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, count - filled) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            filled += n
        }
        return Array(bytes[0..<filled])
    }

    private static func fileSize(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }
}
