#if canImport(Glibc)
import Glibc
#endif
import OrchestrateExactPath
import OrchestratePluginKit

/// Object keys as local paths under a download's destination folder. A key is a name another
/// party chose: one that could leave the folder, or that a filesystem cannot hold as given, is
/// refused (skipped, with the reason), never "cleaned up" into some other path.
enum KeyPaths {
    enum Verdict: Equatable {
        /// The path's components below the destination.
        case path([String])
        /// A key ending in "/" (a console's "folder"): nothing to write.
        case folderMarker
        case refused(String)
    }

    /// What the part of a key after the prefix becomes.
    static func local(_ relative: String) -> Verdict {
        // By bytes: a "/" followed by a combining mark is a "/" to the filesystem (PathBytes).
        if relative.isEmpty || PathBytes.endsWithSlash(relative) { return .folderMarker }
        if PathBytes.contains(relative, 0) { return .refused("it holds a NUL byte") }
        if PathBytes.isAbsolute(relative) { return .refused("it starts with \"/\" (an absolute path)") }
        let components = PathBytes.components(relative)
        for component in components {
            if component.isEmpty { return .refused("it has an empty path component (\"//\")") }
            if PathBytes.isDotOrDotDot(component) { return .refused("it has a \"\(component)\" path component") }
            if component.utf8.count > 255 { return .refused("a path component is longer than 255 bytes") }
        }
        // The partial file `.NAME.part` must fit too.
        if components.last!.utf8.count > 249 { return .refused("its name is too long for its partial file (.NAME.part)") }
        return .path(components)
    }

    /// The partial file's path (relative, `/`-joined) of a relative path: `.NAME.part` beside it.
    static func partialName(of components: [String]) -> String {
        (components.dropLast() + [".\(components.last!).part"]).joined(separator: "/")
    }

    /// Of the relative paths `components` holds (`/`-joined → their components), the ones a
    /// filesystem cannot hold beside the others, with why: a name that is also a folder of other
    /// keys (`a` and `a/b`), a name that is the partial file of another key (`x` and `.x.part`).
    /// Byte for byte: names that differ only in Unicode normalization do not clash.
    static func clashes(_ components: [ExactPath: [String]]) -> [ExactPath: String] {
        var folders = Set<ExactPath>()
        for (_, parts) in components where parts.count > 1 {
            for depth in 1 ..< parts.count { folders.insert(ExactPath(parts.prefix(depth).joined(separator: "/"))) }
        }
        var out: [ExactPath: String] = [:]
        for (path, parts) in components {
            if folders.contains(path) { out[path] = "it is also the folder of other keys (\(path)/...)" }
            let partial = ExactPath(partialName(of: parts))
            if components[partial] != nil { out[partial] = "it is the name of the partial file of \(path)" }
        }
        return out
    }
}

/// The folders of a download tree, created one component at a time below the destination: an
/// existing component is used only when it is a real folder (lstat), never a symbolic link
/// someone put there, so no file lands outside the destination.
final class LocalFolders {
    private let root: String
    /// Byte for byte: a folder checked under one normalization of its name says nothing of a
    /// symbolic link planted under another.
    private var made = Set<ExactPath>()

    init(root: String) { self.root = root }

    /// Makes the folders of `components` (a file's path; the last one is the file) and returns
    /// the file's full path.
    func prepare(_ components: [String]) throws(StepError) -> String {
        var path = root
        for (depth, name) in components.dropLast().enumerated() {
            path += "/" + name
            let relative = components.prefix(depth + 1).joined(separator: "/")
            if made.contains(ExactPath(relative)) { continue }
            var info = stat()
            if lstat(path, &info) != 0 {
                guard errno == ENOENT else { throw .posix("cannot stat \(path)") }
                if mkdir(path, 0o755) != 0 && errno != EEXIST { throw .posix("cannot create folder \(path)") }
                guard lstat(path, &info) == 0 else { throw .posix("cannot stat \(path)") }
            }
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw .permanent("\(path) is not a folder (a symbolic link or a file is there): not followed, nothing written through it",
                                 code: "not_a_folder")
            }
            made.insert(ExactPath(relative))
        }
        return path + "/" + components.last!
    }
}
