/// How much of a server's listing a tree download takes in before it gives up.
///
/// A listing is the server's word: a hostile or broken one can list a folder inside every folder
/// without end, answer READDIR forever, or page a bucket with ever new continuation tokens. A
/// tree step holds what it listed in memory and walks folders by recursion, so without a bound
/// it would grow until the process (`serve`, with every run in it) died. Each remote tree walk
/// counts its entries here and checks each folder's depth:
///
/// ```swift
/// var bounds = ListingBounds(maxEntries: inputs.maxFiles)
/// try bounds.enter(depth: prefix.count + 1, folder: shownPath)
/// try bounds.count(entries.count, in: shownPath)
/// ```
public struct ListingBounds: Sendable {
    /// Folders below the tree's root deeper than this are refused: far beyond any real tree (a
    /// Linux path holds at most 4,096 bytes), and within what a walk by recursion may take on an
    /// attempt's 1 MiB stack.
    public static let maxDepth = 200

    /// The default of the tree steps' `max_files` input: five times a feature film's image
    /// sequence of 200,000 frames.
    public static let defaultMaxEntries = 1_000_000

    public let maxEntries: Int
    public private(set) var entries = 0

    public init(maxEntries: Int = ListingBounds.defaultMaxEntries) {
        self.maxEntries = maxEntries
    }

    /// How many more entries the listing may take.
    public var remaining: Int { max(0, maxEntries - entries) }

    /// Counts `n` more entries of the listing of `what`; fails once there are more than
    /// `maxEntries` in all (permanent: the same server would list the same again).
    public mutating func count(_ n: Int, in what: String) throws(StepError) {
        entries += n
        guard entries > maxEntries else { return }
        throw ListingBounds.tooLarge(maxEntries, in: what)
    }

    public static func tooLarge(_ maxEntries: Int, in what: String) -> StepError {
        .permanent("the listing of \(what) passed \(maxEntries) entries (max_files): a server that lists without end, "
                   + "or a tree bigger than expected (raise max_files)", code: "listing_too_large")
    }

    /// Checks a folder `depth` levels below the tree's root before it is entered.
    public func enter(depth: Int, folder: String) throws(StepError) {
        guard depth > ListingBounds.maxDepth else { return }
        throw StepError.permanent("\(folder) lies \(depth) folders deep, more than \(ListingBounds.maxDepth): a server that lists a "
                                  + "folder inside every folder, or a tree no file system here could hold", code: "tree_too_deep")
    }
}
