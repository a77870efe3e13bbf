// `on.watch`, the hot-folder trigger of a workflow's `on:` block (Triggers.swift).
import OrchestrateJSON

/// `on.watch`: each file that appears in `path` (and its subfolders with `recursive`), matches
/// the filters and has not changed size or mtime for `settle` becomes work, exactly once.
///
/// ```yaml
/// on:
///   watch:
///     path: /media/outbox
///     recursive: true
///     include: ["*.mov", "*.mxf"]
///     exclude: ["*_proxy.*"]
///     settle: 30s
///     inputs: { source: "${{ file.path }}", title: "${{ file.name }}" }   # one run per file
///     after: move-to /media/sent
/// ```
public struct WatchTrigger: Sendable {
    /// What a settled file becomes.
    public enum Work: Sendable {
        /// One run per file, with these inputs (an object template over `file` and `env`).
        case runs(inputs: Template)
        /// An item `{source, destination}` of the persistent-session step `step`, in one long run
        /// started with `inputs` (over `env` only); `destination` is a template over `file`.
        case feed(step: String, inputs: Template, destination: Template)
    }

    /// What happens to a file once its work succeeded (never before; a failed one stays).
    public enum After: Sendable, Equatable {
        case keep
        case delete
        /// Moved into this folder (relative: to the watched folder), keeping its relative path.
        case moveTo(String)
    }

    /// As written; a relative path is relative to the workflow file's folder.
    public let path: String
    public let recursive: Bool
    /// Glob patterns (fnmatch): a file is picked when it matches one of `include` (all files when
    /// empty) and none of `exclude`. A pattern without `/` matches the file name, one with `/`
    /// the path relative to the watched folder.
    public let include: [String]
    public let exclude: [String]
    /// How long a file's size and mtime must stay unchanged before it is handed over.
    public let settle: Duration
    public let work: Work
    public let after: After
    /// The `watch` key.
    public let location: SourceLocation

    /// `settle` when the workflow does not say.
    public static let defaultSettle = Duration.seconds(30)
    /// The fields of `file` in `on.watch` expressions.
    public static let fileFields = ["path", "name", "relative", "dir", "size", "mtime"]
}
