#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestratePluginFiles
import OrchestratePluginKit

/// `fs.move`: rename, or copy + fsync + unlink across filesystems.
struct Move: StepDefinition {
    static let id = "fs.move"
    static let version = "1.0.0"
    static let summary = "Move a file: an atomic rename, or a verified copy then unlink across filesystems."
    static let documentation = """
        Renames `source` to `destination`, creating parent directories. When they are on \
        different filesystems, copies like `fs.copy` (resumable, fsynced, renamed into place) \
        and then removes the source. On a retry, a source that is gone while the destination \
        exists counts as already moved.
        """
    struct Inputs: StepInputs {
        @Input(help: "file to move", minLength: 1) var source: String
        @Input(help: "new path (not a directory)", minLength: 1) var destination: String
        @Input(help: "replace an existing destination") var overwrite = false
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "the destination") var path: String
        @Output(help: "true when it crossed filesystems (copy + unlink)") var copied: Bool
        @Output(help: "when copied: SHA-256 (hex) of the content", pattern: LocalFile.sha256Pattern) var sha256: String?
        @Output(help: "when copied: bytes copied", minimum: 0) var size: Int64?
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let (source, destination, overwrite) = (inputs.source, inputs.destination, inputs.overwrite)
        let existing = try FileInfo.of(destination)
        guard let sourceInfo = try FileInfo.of(source) else {
            if existing != nil && (step.attempt > 1 || step.loadCheckpoint() != nil) {
                step.log(.info, "\(source) is gone and \(destination) exists: moved by an earlier attempt")
                return try setOutputs(step, destination)
            }
            throw StepError.permanent("source \(source) does not exist", code: "ENOENT")
        }
        guard sourceInfo.isRegular else { throw StepError.notAFile("source", source, sourceInfo) }
        if let existing {
            guard !existing.isDirectory else {
                throw StepError.invalidInput("destination \(destination) is a directory; name the file to create")
            }
            guard overwrite else {
                throw StepError.permanent("destination \(destination) exists (set overwrite: true to replace it)", code: "EEXIST")
            }
        }
        try LocalPath.makeDirectories(LocalPath.parent(of: destination))
        if try LocalPath.moveWithinFileSystem(source, to: destination) { return try setOutputs(step, destination) }

        step.log(.info, "\(source) and \(destination) are on different filesystems: copying, then removing the source")
        let copied = try FileCopier(step: step).copy(source: source, to: destination, expectedSHA256: nil)
        try LocalPath.remove(source)
        try LocalPath.syncDirectory(LocalPath.parent(of: source))
        try setOutputs(step, destination, copied: copied)
    }

    /// `copied`: what the copy across filesystems made; nil for a rename.
    private static func setOutputs(_ step: StepContext, _ destination: String, copied: FileCopier.Copied? = nil) throws(StepError) {
        var outputs = Outputs()
        outputs.path = destination
        outputs.copied = copied != nil
        outputs.sha256 = copied?.sha256
        outputs.size = copied?.size
        try step.setOutputs(outputs)
    }
}
