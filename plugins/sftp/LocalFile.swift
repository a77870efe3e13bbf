#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginKit

/// A local file used with explicit offsets (pread/pwrite), so several ranges can be read or
/// written at once and a resume can start anywhere.
final class LocalFile: @unchecked Sendable {
    let fd: Int32
    let path: String

    init(reading path: String) throws(StepError) {
        self.path = path
        fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw .posix("cannot open \(path)") }
    }

    init(writing path: String, truncate: Bool) throws(StepError) {
        self.path = path
        fd = Glibc.open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0o644)
        if fd < 0 { throw .posix("cannot create \(path)") }
    }

    deinit {
        writeBack.withLock { writeBackThread }?.join()
        close(fd)
    }

    // Early write-back: every 64 MiB written, an fdatasync on a thread of its own (one at a
    // time), so the fsync before a download's rename waits for the last few MiB, not the file.
    private static let writeBackStep: Int64 = 64 << 20
    private let writeBack = Lock()
    private var unsynced: Int64 = 0
    private var writeBackThread: Worker?
    private let writeBackBusy = WriteBackFlag()

    private func noteWritten(_ count: Int) {
        let start = writeBack.withLock { () -> (Worker?)? in
            unsynced += Int64(count)
            guard unsynced >= Self.writeBackStep, writeBackBusy.claim() else { return nil }
            unsynced = 0
            return .some(writeBackThread)
        }
        guard let start else { return }
        start?.join()  // finished: it released the flag
        let worker = Worker { [fd, writeBackBusy] in
            _ = fdatasync(fd)
            writeBackBusy.release()
        }
        writeBack.withLock { writeBackThread = worker }
    }

    var size: Int64 {
        var st = Glibc.stat()
        fstat(fd, &st)
        return Int64(st.st_size)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(StepError) -> Int {
        while true {
            let n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw .posix("cannot read \(path)") }
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(StepError) {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 { if errno == EINTR { continue }; throw .posix("cannot write \(path)") }
            done += n
        }
        noteWritten(bytes.count)
    }

    func truncate(_ length: Int64) { _ = ftruncate(fd, off_t(length)) }

    func sync() throws(StepError) { if fsync(fd) != 0 { throw .posix("cannot sync \(path)") } }

    static func info(_ path: String) -> (size: Int64, isDirectory: Bool, isRegular: Bool)? {
        var st = Glibc.stat()
        // stat(2) that follows symlinks: Swift cannot call Glibc's stat function (the struct hides it).
        let fd = Glibc.open(path, 0o10000000 | O_CLOEXEC) // O_PATH
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard fstat(fd, &st) == 0 else { return nil }
        let type = st.st_mode & S_IFMT
        return (Int64(st.st_size), type == S_IFDIR, type == S_IFREG)
    }

    /// `mkdir -p`, for an absolute path or one relative to the current directory.
    static func makeDirectories(_ path: String) throws(StepError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o755) != 0 && errno != EEXIST { throw .posix("cannot create \(current)") }
        }
    }

    static func rename(_ from: String, _ to: String) throws(StepError) {
        if Glibc.rename(from, to) != 0 { throw .posix("cannot rename \(from) to \(to)") }
    }

    /// The regular files under `root` (sorted relative paths, so a checkpoint can say "the first
    /// k are done") and its empty directories.
    static func walk(_ root: String) throws(StepError) -> TreeListing {
        var listing = TreeListing()
        func visit(_ dir: String, _ prefix: String) throws(StepError) {
            guard let handle = opendir(dir) else { throw .posix("cannot list \(dir)") }
            defer { closedir(handle) }
            var names: [String] = []
            while let entry = readdir(handle) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
                if name != "." && name != ".." { names.append(name) }
            }
            var holdsAnything = false
            for name in names.sorted() {
                let full = dir + "/" + name, relative = prefix.isEmpty ? name : prefix + "/" + name
                guard let info = info(full) else { continue }
                if info.isDirectory {
                    try visit(full, relative)
                    holdsAnything = true
                } else if info.isRegular {
                    listing.files.append(.init(relative: relative, size: info.size))
                    holdsAnything = true
                }
            }
            if !holdsAnything { listing.emptyDirectories.append(prefix) }
        }
        try visit(root, "")
        return listing
    }
}

/// Whether a write-back is running (shared with its thread, which does not keep the file alive).
private final class WriteBackFlag: @unchecked Sendable {
    private let lock = Lock()
    private var busy = false

    /// True if it was free and is now taken.
    func claim() -> Bool { lock.withLock { busy ? false : { busy = true; return true }() } }
    func release() { lock.withLock { busy = false } }
}

/// Runs `body` on a new thread; `join` waits for it. (No Foundation in plugins: it is heavy to load.)
final class Worker: @unchecked Sendable {
    private var thread = pthread_t()
    private let body: () -> Void

    init(_ body: @escaping () -> Void) {
        self.body = body
        let box = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { raw in
            let worker = Unmanaged<Worker>.fromOpaque(raw!).takeRetainedValue()
            worker.body()
            return nil
        }, box)
    }

    func join() { pthread_join(thread, nil) }
}
