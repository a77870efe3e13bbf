import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit

/// `fs.copy`: a verified, resumable, atomic file copy.
struct Copy: StepDefinition {
    static let id = "fs.copy"
    static let version = "1.0.0"
    static let summary = "Copy a file: streamed, SHA-256 checked, resumable, atomically renamed into place."
    static let documentation = """
        Copies `source` to `destination` through `destination.partial`, which is fsynced and \
        renamed into place, so the destination is either absent or complete. Parent directories \
        are created. Progress is reported in bytes.

        If the step is interrupted, the next attempt continues from the last checkpoint (every \
        8 MiB) when the partial file is still there and the source is unchanged.

        With `sha256`, the copy fails (permanent, code `sha256_mismatch`) unless the content \
        has that digest. An existing destination is an error unless `overwrite` is true — or it \
        already has the source's content (a previous attempt finished), which counts as done. \
        `if_exists` chooses instead: `overwrite`, `skip` (keep it), or `if-different` (keep it \
        when its size and modification time, to the second, are the source's). The copy gets \
        the source's modification time unless `preserve_mtime` is false.
        """
    struct Inputs: StepInputs {
        @Input(help: "file to copy", minLength: 1) var source: String
        @Input(help: "path of the copy (not a directory)", minLength: 1) var destination: String
        @Input(help: "replace an existing destination") var overwrite = false
        @Input(help: "expected SHA-256 (hex) of the content", pattern: "^[0-9a-fA-F]{64}$") var sha256: String?
        @Input(help: "an existing destination: overwrite it, skip it, or replace it if-different (size and modification time); "
            + "default: an error unless overwrite is true or it has the source's content")
        var ifExists: IfExists?
        @Input(help: "give the copy the source's modification time (cp -p)") var preserveMtime = true
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "SHA-256 (hex) of the content", pattern: LocalFile.sha256Pattern) var sha256: String
        @Output(help: "bytes copied", minimum: 0) var size: Int64
        @Output(help: "the destination") var path: String
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let (source, destination, overwrite, expected) = (inputs.source, inputs.destination, inputs.overwrite, inputs.sha256)
        if let expected, expected.count != 64 || !expected.allSatisfy(\.isHexDigit) {
            throw StepError.invalidInput("sha256 must be 64 hexadecimal digits")
        }
        if overwrite && inputs.ifExists != nil {
            throw StepError.invalidInput("give overwrite or if_exists, not both (if_exists: overwrite replaces the destination)")
        }
        if let existing = try FileInfo.of(destination) {
            guard !existing.isDirectory else {
                throw StepError.invalidInput("destination \(destination) is a directory; name the file to create")
            }
            if let ifExists = inputs.ifExists, let kept = try keptDestination(source, destination, existing, ifExists, step: step) {
                step.log(.info, "\(destination) is kept (if_exists: \(ifExists.rawValue))")
                return try setOutputs(step, kept, destination)
            }
            if !overwrite && inputs.ifExists == nil {
                // A previous attempt may have renamed the copy into place and died before its
                // success was recorded: the same content means the work is done.
                if let done = try sameContent(source, destination, size: existing.size, step: step) {
                    step.log(.info, "\(destination) already has the content of \(source)")
                    return try setOutputs(step, done, destination)
                }
                throw StepError.permanent("destination \(destination) exists (set overwrite: true to replace it)",
                                          code: "EEXIST")
            }
        }
        let copied = try FileCopier(step: step).copy(source: source, to: destination, expectedSHA256: expected,
                                                     preserveMtime: inputs.preserveMtime)
        try setOutputs(step, copied, destination)
    }

    static func setOutputs(_ step: StepContext, _ copied: FileCopier.Copied, _ destination: String) throws(StepError) {
        var outputs = Outputs()
        outputs.sha256 = copied.sha256
        outputs.size = copied.size
        outputs.path = destination
        try step.setOutputs(outputs)
    }

    /// The destination as it is, when `if_exists` keeps it (hashed for the outputs), else nil.
    private static func keptDestination(_ source: String, _ destination: String, _ existing: FileInfo, _ ifExists: IfExists,
                                        step: StepContext) throws(StepError) -> FileCopier.Copied?
    {
        guard existing.isRegular else { return nil }
        if ifExists == .ifDifferent {
            guard let sourceInfo = try FileInfo.of(source), sourceInfo.isRegular,
                  ifExists.keeps(size: existing.size, modified: existing.modifiedSeconds, sourceSize: sourceInfo.size,
                                 sourceModified: sourceInfo.modifiedSeconds) else { return nil }
        } else if ifExists == .overwrite {
            return nil
        }
        return try FileCopier.hash(destination, step: step)
    }

    private static func sameContent(_ source: String, _ destination: String, size: Int64,
                                    step: StepContext) throws(StepError) -> FileCopier.Copied?
    {
        guard let sourceInfo = try FileInfo.of(source), sourceInfo.isRegular, sourceInfo.size == size else { return nil }
        let a = try FileCopier.hash(source, step: step)
        let b = try FileCopier.hash(destination, step: step)
        return a.sha256 == b.sha256 ? b : nil
    }
}
