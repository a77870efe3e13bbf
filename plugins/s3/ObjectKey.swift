import OrchestratePluginKit

/// Object keys as S3 takes them: 1 to 1024 bytes of UTF-8, no NUL.
enum ObjectKey {
    static func check(_ key: String) throws(StepError) {
        guard !key.isEmpty, key.utf8.count <= 1024, !key.utf8.contains(0) else {
            throw .invalidInput("key must be 1 to 1024 bytes without NUL", code: "bad_key")
        }
    }
}

/// What a step names in the bucket: one object (`key`) or every object under a prefix
/// (`prefix`, "" for the whole bucket, else ending with `/` so that `photos/` never takes in
/// `photos2/`). Exactly one of the two inputs.
enum ObjectTarget: Equatable {
    case key(String)
    case prefix(String)

    init(key: String?, prefix: String?) throws(StepError) {
        switch (key, prefix) {
        case (let key?, nil):
            try ObjectKey.check(key)
            self = .key(key)
        case (nil, let prefix?):
            guard prefix.isEmpty || prefix.hasSuffix("/") else {
                throw .invalidInput("prefix \"\(prefix)\" must end with \"/\" (or be \"\" for the whole bucket): "
                    + "\"\(prefix)/\" names the folder, and a prefix without it would take in \"\(prefix)-other\" too", code: "invalid_input")
            }
            guard prefix.utf8.count < 1024, !prefix.utf8.contains(0), !prefix.hasPrefix("/") else {
                throw .invalidInput("prefix must be under 1024 bytes, without NUL, and not start with \"/\"", code: "invalid_input")
            }
            self = .prefix(prefix)
        case (nil, nil):
            throw .invalidInput("give key (one object) or prefix (every object under it)", code: "invalid_input")
        case (_?, _?):
            throw .invalidInput("give key (one object) or prefix (every object under it), not both", code: "invalid_input")
        }
    }
}
