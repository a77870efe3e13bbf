import Foundation
import OrchestrateModel

/// Resolves a workflow's secrets from the environment. Done again at every attempt, so a
/// rotated token is picked up; the values are never written anywhere.
public enum SecretResolver {
    public struct Resolution: Sendable {
        public var values: [String: String]
        public var missing: [SecretDeclaration]
    }

    public static func resolve(_ declarations: [SecretDeclaration], environment: [String: String]) -> Resolution {
        var values: [String: String] = [:]
        var missing: [SecretDeclaration] = []
        for declaration in declarations {
            if let value = environment[declaration.env], !value.isEmpty {
                values[declaration.name] = value
            } else {
                missing.append(declaration)
            }
        }
        return Resolution(values: values, missing: missing)
    }
}
