// The validated workflow: what the engine plans and runs. Built only by `WorkflowLoader`, so a
// `Workflow` value has passed every check in the language (see docs/design.md, "Workflow language v1").
import OrchestrateJSON

/// A validated workflow file.
///
///     let wf = try WorkflowLoader.load(path: "upload.yaml", catalog: host)
///     for step in wf.steps where step.needs.isEmpty { ... }   // the roots, in file order
public struct Workflow: Sendable {
    public let file: String
    /// The file's full text, so a run can be resumed without the file.
    public let source: String
    public let name: String
    public let description: String?
    /// In file order.
    public let inputs: [InputDeclaration]
    public let secrets: [SecretDeclaration]
    public let defaults: StepDefaults
    /// Keyed limits that apply to every step of the run.
    public let concurrency: [ConcurrencyLimit]
    /// In file order.
    public let steps: [Step]
    /// In file order. Evaluated after the run, with every step visible.
    public let outputs: [(name: String, value: Template)]
    /// Notifications run after the run ended (`on_finish:`), in file order.
    public let onFinish: [FinishHook]
    /// What starts runs without a `submit` (`on:`): schedules and watch folders.
    public let triggers: WorkflowTriggers
    /// How long its finished runs are kept (`retention:`), in seconds; `.infinity` for `off`;
    /// nil for the queue's or the store's period.
    public internal(set) var retention: Double?

    let stepIndex: [String: Int]

    init(file: String, source: String, name: String, description: String?, inputs: [InputDeclaration],
         secrets: [SecretDeclaration], defaults: StepDefaults, concurrency: [ConcurrencyLimit], steps: [Step],
         outputs: [(name: String, value: Template)], onFinish: [FinishHook] = [],
         triggers: WorkflowTriggers = WorkflowTriggers())
    {
        self.onFinish = onFinish
        self.triggers = triggers
        self.file = file
        self.source = source
        self.name = name
        self.description = description
        self.inputs = inputs
        self.secrets = secrets
        self.defaults = defaults
        self.concurrency = concurrency
        self.steps = steps
        self.outputs = outputs
        self.stepIndex = Dictionary(steps.enumerated().map { ($1.id, $0) }, uniquingKeysWith: { a, _ in a })
    }

    public func step(_ id: String) -> Step? { stepIndex[id].map { steps[$0] } }

    public func input(_ name: String) -> InputDeclaration? { inputs.first { $0.name == name } }

    /// Steps in an order where every step comes after all of its `needs` (file order among
    /// independent steps). Validation guarantees there is no cycle.
    public var stepsInDependencyOrder: [Step] {
        var done: Set<String> = []
        var out: [Step] = []
        func visit(_ step: Step) {
            guard done.insert(step.id).inserted else { return }
            for need in step.needs { if let s = self.step(need) { visit(s) } }
            out.append(step)
        }
        steps.forEach(visit)
        return out
    }

    /// The ids of the steps that list `id` in their `needs`, in file order.
    public func dependents(of id: String) -> [String] {
        steps.filter { $0.needs.contains(id) }.map(\.id)
    }
}

/// One entry of `inputs:`.
public struct InputDeclaration: Sendable {
    public let name: String
    public let type: InputType
    public let required: Bool
    /// Already checked against `type`.
    public let defaultValue: JSONValue?
    public let description: String?
    public let location: SourceLocation

    public init(name: String, type: InputType, required: Bool = false, defaultValue: JSONValue? = nil,
                description: String? = nil, location: SourceLocation)
    {
        self.name = name
        self.type = type
        self.required = required
        self.defaultValue = defaultValue
        self.description = description
        self.location = location
    }
}

/// The types an input can declare. `path` is a string made absolute when inputs are resolved.
public enum InputType: String, Sendable, CaseIterable {
    case string, number, integer, boolean, path, object, array
}

/// One entry of `secrets:`: a name expressions use (`secrets.token`) and where it is read from at
/// every attempt: an environment variable, or a file. A remote's `{ env: }` and `{ file: }`
/// fields become secrets too (`origin` says which).
public struct SecretDeclaration: Sendable {
    public enum Source: Sendable, Equatable {
        case environment(String)
        case file(String)
    }

    public let name: String
    public let source: Source
    public let location: SourceLocation
    /// For a remote's field: "remote 'media' (secret_access_key)"; nil for `secrets:` entries.
    public let origin: String?

    public init(name: String, env: String, location: SourceLocation) {
        self.init(name: name, source: .environment(env), location: location)
    }

    public init(name: String, source: Source, location: SourceLocation, origin: String? = nil) {
        self.name = name
        self.source = source
        self.location = location
        self.origin = origin
    }

    /// The environment variable it is read from, if any.
    public var env: String? {
        if case .environment(let name) = source { return name }
        return nil
    }

    /// How messages name it: "secret 'token'", or the remote field it stands for.
    public var displayName: String { origin ?? "secret '\(name)'" }
}

/// `defaults:`: applied to every step that does not say otherwise.
public struct StepDefaults: Sendable {
    /// Per attempt; nil means no timeout.
    public let timeout: Duration?
    /// Already merged over `RetryPolicy.default`.
    public let retry: RetryPolicy
    /// `defaults.hold_timeout`, else `Step.defaultHoldTimeout`.
    public let holdTimeout: Duration

    public init(timeout: Duration? = nil, retry: RetryPolicy = .default, holdTimeout: Duration = Step.defaultHoldTimeout) {
        self.timeout = timeout
        self.retry = retry
        self.holdTimeout = holdTimeout
    }
}

/// A keyed concurrency limit: at most `limit` steps holding the same evaluated `key` run at once,
/// across every run sharing the state store.
public struct ConcurrencyLimit: Sendable {
    public let key: Template
    public let limit: Int
    public let location: SourceLocation

    public init(key: Template, limit: Int, location: SourceLocation) {
        self.key = key
        self.limit = limit
        self.location = location
    }
}

/// One step of the graph.
public struct Step: Sendable {
    public let id: String
    /// The step id key in the file.
    public let location: SourceLocation
    /// The plugin step type, e.g. `http.request`.
    public let uses: String
    public let usesLocation: SourceLocation
    /// Always an object template (`{}` when absent).
    public let with: Template
    /// Ids of the steps that must finish first, in the order written, without repeats.
    public let needs: [String]
    /// `if:`; the step is skipped when it evaluates falsy. Evaluated once per step (not per item).
    public let condition: Expression?
    /// The step's `retry:` merged field by field over the workflow defaults.
    public let retry: RetryPolicy
    /// The step's own, else `defaults.timeout`.
    public let timeout: Duration?
    /// The step's own keyed limits (the workflow-level ones apply too; see `Workflow.concurrency`).
    public let concurrency: [ConcurrencyLimit]
    public let idempotencyKey: Template?
    public let compensate: Compensation?
    /// Must evaluate to an array at run time; the step runs once per element, as `item`.
    public let forEach: Template?
    /// Only with `forEach`: how many elements run at once (nil: no limit of its own).
    public let maxParallel: Int?
    /// When true a failure of this step does not fail the run; dependents still run.
    public let continueOnError: Bool
    /// Where the plugin runs (`isolation:`); nil: the engine's default.
    public internal(set) var isolation: StepIsolation? = nil
    /// How long the step (or one of its session's items) may be held while its host does not
    /// answer before it fails with the code `unreachable`: its own `hold_timeout:`, else
    /// `defaults.hold_timeout`, else `defaultHoldTimeout`.
    public internal(set) var holdTimeout: Duration = Step.defaultHoldTimeout

    /// One hour: a restarted server, a re-plugged switch or a short maintenance window is
    /// ridden out unattended, while a night job whose host is really gone (down, a typo in its
    /// name) still fails, fires its `on_finish` hooks and alerts someone early enough in the night
    /// for the job to be run again before morning.
    public static let defaultHoldTimeout: Duration = .seconds(3600)
}

/// `isolation: process` runs a step's plugin in a child process (a crash fails the step, not the
/// engine); `in-process` calls it directly (fastest).
public enum StepIsolation: String, Sendable, CaseIterable {
    case inProcess = "in-process"
    case process
}

/// `compensate:`: the step that undoes a finished step when the run fails or is cancelled later.
/// It may read any step's outputs, including its own step's.
public struct Compensation: Sendable {
    public let uses: String
    public let usesLocation: SourceLocation
    public let with: Template
    /// Merged over the workflow defaults.
    public let retry: RetryPolicy
    /// Its own, else `defaults.timeout`.
    public let timeout: Duration?
    /// The `compensate` key in the file.
    public let location: SourceLocation
    /// `defaults.hold_timeout` (see `Step.holdTimeout`).
    public internal(set) var holdTimeout: Duration = Step.defaultHoldTimeout
}

/// One `on_finish:` entry: a plugin call (`exec` to run a command, `http.request` to POST the
/// outcome somewhere) made once the run has ended with one of the statuses in `when`.
///
/// ```yaml
/// on_finish:
///   - when: [failed, cancelled]
///     uses: exec
///     with: { command: [notify-send, "upload ${{ run.status }}: ${{ run.error }}"] }
/// ```
public struct FinishHook: Sendable {
    public let uses: String
    public let usesLocation: SourceLocation
    public let with: Template
    /// Run statuses that trigger it: "succeeded", "failed", "cancelled" (all three by default).
    public let when: Set<String>
    public let timeout: Duration?
    public let location: SourceLocation
}
