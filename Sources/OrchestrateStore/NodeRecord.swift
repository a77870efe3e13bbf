// What the store can tell about the nodes sharing it (`StateStore.nodes()`, the API's
// `/api/nodes`). There is no node table: a node is known by the runs its processes hold (their
// leases are renewed by each run's heartbeat) and by the `worker.started` / `worker.stopped`
// events its `serve` processes journal.
import OrchestrateJSON

public struct NodeRecord: Sendable, Equatable {
    /// A `serve` process of the node that has started and not (cleanly) stopped.
    public struct Worker: Sendable, Equatable {
        public var pid: Int32
        public var startedAt: Double
        public var queues: [String]
        /// On the calling process's node: the process exists. On another node, which cannot be
        /// looked at from here: none of the runs it holds has let its lease run out (an idle
        /// worker on another node renews nothing, so its crash cannot be seen until it held a run).
        public var live: Bool
    }

    public var name: String
    /// A worker is live or one of its runs is held by a live owner.
    public var live: Bool
    /// Runs held by a live owner on this node.
    public var runsHeld: Int
    /// The latest lease end among the runs it holds (each heartbeat pushes it forward), by the
    /// store's clock; nil when it holds none.
    public var leaseUntil: Double?
    /// The latest `worker.started`/`worker.stopped` event of the node.
    public var lastWorkerEvent: Double?
    /// Workers started and not stopped, newest first (a crashed one stays here, not live).
    public var workers: [Worker]

    /// Builds the records from the two things the store keeps: the owners of owned runs (with
    /// the store's verdict on each) and the worker events, in seq order. Nodes sorted by name.
    /// Shared by both stores, so they answer alike.
    static func summarize(owners: [(owner: OwnerIdentity, leaseUntil: Double?, live: Bool)],
                          workerEvents: [EventRecord]) -> [NodeRecord]
    {
        struct Key: Hashable { let node: String, pid: Int32 }
        var nodes: [String: NodeRecord] = [:]
        func touch(_ name: String) {
            if nodes[name] == nil {
                nodes[name] = NodeRecord(name: name, live: false, runsHeld: 0, leaseUntil: nil, lastWorkerEvent: nil, workers: [])
            }
        }
        var started: [Key: (event: EventRecord, startTime: Int64)] = [:]
        for event in workerEvents {
            guard let node = event.data["node"]?.stringValue, let pid = event.data["pid"]?.intValue else { continue }
            touch(node)
            nodes[node]!.lastWorkerEvent = max(nodes[node]!.lastWorkerEvent ?? event.time, event.time)
            let key = Key(node: node, pid: Int32(truncatingIfNeeded: pid))
            if event.type == .workerStarted {
                started[key] = (event, event.data["start_time"]?.intValue ?? 0)
            } else if event.type == .workerStopped {
                started.removeValue(forKey: key)
            }
        }
        var expiredPids: Set<Key> = []
        for entry in owners {
            touch(entry.owner.node)
            if entry.live {
                nodes[entry.owner.node]!.runsHeld += 1
                if let until = entry.leaseUntil {
                    nodes[entry.owner.node]!.leaseUntil = max(nodes[entry.owner.node]!.leaseUntil ?? until, until)
                }
            } else {
                expiredPids.insert(Key(node: entry.owner.node, pid: entry.owner.pid))
            }
        }
        for (key, start) in started {
            let live = key.node == NodeName.current
                ? OwnerIdentity(node: key.node, pid: key.pid, startTime: start.startTime).isAliveOnThisNode
                : !expiredPids.contains(key)
            let queues = start.event.data["queues"]?.arrayValue?.compactMap(\.stringValue) ?? []
            nodes[key.node]!.workers.append(Worker(pid: key.pid, startedAt: start.event.time, queues: queues, live: live))
        }
        return nodes.keys.sorted().map { name in
            var node = nodes[name]!
            node.workers.sort { $0.startedAt > $1.startedAt }
            node.live = node.runsHeld > 0 || node.workers.contains(where: \.live)
            return node
        }
    }
}
