import OrchestrateExactPath

/// A tree upload sends each file as `NAME.partial` and renames it into place. A tree that holds
/// both `X` and `X.partial` would have two transfers write one remote name at once, and `X`
/// could end up holding `X.partial`'s bytes while the step succeeds. Such an `X.partial` (most
/// often what an interrupted download left beside `X`) is left out, with a warning.
public enum PartialNameClash {
    /// The indices of `relatives` (a tree's relative paths) that are another one's path followed
    /// by `suffix`, compared byte for byte.
    public static func clashing(_ relatives: [String], suffix: String = ".partial") -> Set<Int> {
        let all = Set(relatives.map(ExactPath.init))
        var out = Set<Int>()
        for (index, path) in relatives.enumerated() where path.utf8.count > suffix.utf8.count && PathBytes.hasSuffix(path, suffix) {
            let base = String(decoding: path.utf8.dropLast(suffix.utf8.count), as: UTF8.self)
            if all.contains(ExactPath(base)) { out.insert(index) }
        }
        return out
    }
}
