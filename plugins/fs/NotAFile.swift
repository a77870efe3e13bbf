import OrchestratePluginFiles
import OrchestratePluginKit

extension StepError {
    /// The error for an input that names something other than a regular file: the fs steps move
    /// one file at a time.
    static func notAFile(_ input: String, _ path: String, _ info: FileInfo) -> StepError {
        guard info.isDirectory else { return .invalidInput("\(input) \(path) is not a regular file") }
        return .invalidInput("\(input) \(path) is a directory: the fs steps move one file; "
            + "name a file in \(input), or copy the tree with sftp.upload/sftp.download or exec [cp, -r, …]", code: "EISDIR")
    }
}
