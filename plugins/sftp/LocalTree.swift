#if canImport(Glibc)
import Glibc
#endif
import OrchestrateExactPath
import OrchestratePluginFiles
import OrchestratePluginKit

extension TreeListing {
    /// The regular files under the local directory `root` (sorted relative paths, so a
    /// checkpoint can say "the first k are done") and its empty directories.
    static func walk(_ root: String) throws(StepError) -> TreeListing {
        var listing = TreeListing()
        func visit(_ dir: String, _ prefix: String) throws(StepError) {
            guard let handle = opendir(dir) else { throw .posix("cannot list \(dir)") }
            defer { closedir(handle) }
            var names: [String] = []
            while let entry = readdir(handle) {
                // Validated, not repaired: a repaired name (U+FFFD) would name another file, or
                // none, and the file would be left out while the step succeeds.
                guard let name = withUnsafeBytes(of: entry.pointee.d_name, { String(validatingCString: $0.bindMemory(to: CChar.self).baseAddress!) })
                else {
                    throw .invalidInput("a name in \(dir) is not UTF-8 (a Latin-1 name from an old file server?): rename it to upload this tree",
                                        code: "name_not_utf8")
                }
                if name != "." && name != ".." { names.append(name) }
            }
            var holdsAnything = false
            for name in names.sorted(by: PathBytes.precedes) {
                let full = dir + "/" + name, relative = prefix.isEmpty ? name : prefix + "/" + name
                guard let info = try FileInfo.of(full) else { continue }
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
