#if canImport(Glibc)
import Glibc
#endif
import OrchestrateExactPath
import OrchestratePluginKit

/// The regular files under a local folder, as an upload tree sees them: relative paths with
/// `/`, sorted (so the processing order, and the checkpoint's "first k done", is stable).
/// Symbolic links are not followed: skipped with a warning, like sockets, FIFOs and devices
/// (a link could take the upload outside the folder, or loop). A name that is not UTF-8
/// cannot be a key: skipped with a warning too. Empty folders have no object to become.
enum LocalTree {
    struct Entry {
        var relative: String
        var size: Int64
    }

    static func walk(_ root: String, step: StepContext) throws(StepError) -> (files: [Entry], skipped: Int) {
        var files: [Entry] = []
        var skipped = 0
        func visit(_ dir: String, _ prefix: String) throws(StepError) {
            guard let handle = opendir(dir) else { throw .posix("cannot list \(dir)") }
            defer { closedir(handle) }
            var names: [String] = []
            while let entry = readdir(handle) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw -> String? in
                    String(validatingCString: raw.bindMemory(to: CChar.self).baseAddress!)
                }
                guard let name else {
                    step.log(.warn, "skipping a name in \(dir) that is not UTF-8 (an object key is UTF-8)")
                    skipped += 1
                    continue
                }
                if name != "." && name != ".." { names.append(name) }
            }
            for name in names.sorted(by: PathBytes.precedes) {
                let full = dir + "/" + name, relative = prefix + name
                var info = stat()
                guard lstat(full, &info) == 0 else {
                    if errno == ENOENT { continue }  // gone since the listing
                    throw .posix("cannot stat \(full)")
                }
                switch info.st_mode & S_IFMT {
                case S_IFDIR:
                    try visit(full, relative + "/")
                case S_IFREG:
                    files.append(Entry(relative: relative, size: Int64(info.st_size)))
                case S_IFLNK:
                    step.log(.warn, "skipping \(full): a symbolic link (a tree upload follows none)")
                    skipped += 1
                default:
                    step.log(.warn, "skipping \(full): neither a regular file nor a folder")
                    skipped += 1
                }
            }
        }
        try visit(root, "")
        return (files, skipped)
    }
}
