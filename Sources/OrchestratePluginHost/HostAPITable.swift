#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import COrchestratePlugin

/// The one `orc_host_api` table every run call receives (the per-call state is behind the
/// `orc_host *`, so the table itself is shared and immutable).
///
/// Each entry resolves its `CallContext` first and does nothing (or returns the "nothing
/// happened" value) when the call is not running, so a late or bogus `orc_host *` cannot crash
/// the engine. Entries never throw or trap on bad plugin input: NULL strings are ignored and
/// invalid JSON is refused with -1.
enum HostAPITable {
    nonisolated(unsafe) static let shared: UnsafePointer<orc_host_api> = {
        let table = UnsafeMutablePointer<orc_host_api>.allocate(capacity: 1)
        var api = orc_host_api()
        api.struct_size = UInt32(MemoryLayout<orc_host_api>.size)
        api.abi_major = UInt32(ORC_ABI_VERSION_MAJOR)
        api.abi_minor = UInt32(ORC_ABI_VERSION_MINOR)

        api.log = { host, level, message in
            guard let context = CallContext.resolve(host, "log"), let message else { return }
            context.log(level, String(cString: message))
        }
        api.progress = { host, bytesDone, bytesTotal, filesDone, filesTotal in
            guard let context = CallContext.resolve(host, "progress"), !context.isFinished else { return }
            context.delegate.progress(StepProgress(bytesDone: bytesDone, bytesTotal: bytesTotal,
                                                   filesDone: filesDone, filesTotal: filesTotal))
        }
        api.is_cancelled = { host in
            guard let context = CallContext.resolve(host, "is_cancelled") else { return 1 }
            return context.signal.isCancelled ? 1 : 0
        }
        api.cancel_fd = { host in
            CallContext.resolve(host, "cancel_fd")?.signal.descriptor() ?? -1
        }
        api.sleep_ms = { host, milliseconds in
            guard let context = CallContext.resolve(host, "sleep_ms") else { return 1 }
            return context.signal.wait(milliseconds: milliseconds) ? 1 : 0
        }
        api.set_output = { host, name, json in
            guard let context = CallContext.resolve(host, "set_output"), let name, let json,
                  let nameText = String(validatingCString: name), let jsonText = String(validatingCString: json)
            else { return -1 }
            return context.setOutput(name: nameText, json: jsonText) ? 0 : -1
        }
        api.save_checkpoint = { host, data, size in
            guard let context = CallContext.resolve(host, "save_checkpoint"), data != nil || size == 0 else { return -1 }
            let bytes = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
            return context.saveCheckpoint(bytes) ? 0 : -1
        }
        api.load_checkpoint = { host, size in
            guard let context = CallContext.resolve(host, "load_checkpoint") else {
                size?.pointee = 0
                return nil
            }
            let (buffer, count) = context.loadCheckpoint()
            size?.pointee = count
            return buffer?.assumingMemoryBound(to: UInt8.self)
        }
        api.set_error = { host, kind, code, message, retryAfterMs in
            guard let context = CallContext.resolve(host, "set_error") else { return }
            context.setError(.init(kind: kind, code: code.map { String(cString: $0) },
                                   message: message.map { String(cString: $0) }, retryAfterMs: retryAfterMs))
        }
        api.next_item = { host, timeoutMs, item in
            guard let context = CallContext.resolve(host, "next_item"), let item else { return Int32(ORC_ITEM_CLOSED) }
            switch context.nextItem(timeoutMs: timeoutMs) {
            case .timeout: return Int32(ORC_ITEM_TIMEOUT)
            case .closed: return Int32(ORC_ITEM_CLOSED)
            case .item(let id, let json, let checkpoint):
                let lent = context.lend(id: id, json: json, checkpoint: checkpoint)
                fill(item, id: lent.id, json: lent.json, checkpoint: lent.checkpoint, size: lent.size)
                return Int32(ORC_ITEM_READY)
            }
        }
        api.item_done = { host, id, ok, error in
            guard let context = CallContext.resolve(host, "item_done"), let id else { return }
            // Copy first: `id` may be the very string lent in orc_item, freed by itemDone.
            let idText = String(cString: id)
            let errorText = ok != 0 ? nil : (error.map { String(cString: $0) } ?? "item failed")
            context.itemDone(id: idText, error: errorText)
        }
        api.save_item_checkpoint = { host, id, data, size in
            guard let context = CallContext.resolve(host, "save_item_checkpoint"), !context.isFinished, let id,
                  data != nil || size == 0, size <= CallContext.checkpointLimit
            else { return -1 }
            let bytes = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
            return context.delegate.saveItemCheckpoint(id: String(cString: id), data: bytes) ? 0 : -1
        }
        api.item_progress = { host, id, bytesDone, bytesTotal in
            guard let context = CallContext.resolve(host, "item_progress"), !context.isFinished, let id else { return }
            context.delegate.itemProgress(id: String(cString: id), bytesDone: bytesDone, bytesTotal: bytesTotal)
        }
        api.get_extension = { _, id in
            guard let id else { return nil }
            switch String(cString: id) {
            case ORC_EXT_BANDWIDTH_V1: return UnsafeRawPointer(bandwidth)
            case ORC_EXT_ITEM_FAILURE_V1: return UnsafeRawPointer(itemFailure)
            default: return nil
            }
        }

        table.initialize(to: api)
        return UnsafePointer(table)
    }()

    /// The `orchestrate.bandwidth.v1` extension table, for the life of the process.
    nonisolated(unsafe) static let bandwidth: UnsafePointer<orc_bandwidth_v1> = {
        let table = UnsafeMutablePointer<orc_bandwidth_v1>.allocate(capacity: 1)
        var extensionTable = orc_bandwidth_v1()
        extensionTable.struct_size = UInt32(MemoryLayout<orc_bandwidth_v1>.size)
        extensionTable.consume = { host, bytes in
            guard let context = CallContext.resolve(host, "orchestrate.bandwidth.v1 consume") else { return 1 }
            return context.consumeBandwidth(bytes) ? 1 : 0
        }
        table.initialize(to: extensionTable)
        return UnsafePointer(table)
    }()

    /// The `orchestrate.item-failure.v1` extension table, for the life of the process.
    nonisolated(unsafe) static let itemFailure: UnsafePointer<orc_item_failure_v1> = {
        let table = UnsafeMutablePointer<orc_item_failure_v1>.allocate(capacity: 1)
        var extensionTable = orc_item_failure_v1()
        extensionTable.struct_size = UInt32(MemoryLayout<orc_item_failure_v1>.size)
        extensionTable.item_failed = { host, id, kind, code, message, retryAfterMs in
            guard let context = CallContext.resolve(host, "orchestrate.item-failure.v1 item_failed"), let id else { return }
            // Copy first: `id` may be the very string lent in orc_item, freed by itemFailed.
            let failure = StepFailure(kind: ErrorKind(abiValue: kind), code: code.map { String(cString: $0) },
                                      message: message.map { String(cString: $0) } ?? "item failed",
                                      retryAfter: retryAfterMs >= 0 ? .milliseconds(retryAfterMs) : nil)
            context.itemFailed(id: String(cString: id), failure: failure)
        }
        table.initialize(to: extensionTable)
        return UnsafePointer(table)
    }()

    /// Fills the fields of `item` that fit in the struct_size the plugin set (a plugin built
    /// against an older header may have a shorter orc_item).
    private static func fill(_ item: UnsafeMutablePointer<orc_item>, id: UnsafePointer<CChar>,
                             json: UnsafePointer<CChar>, checkpoint: UnsafePointer<UInt8>?, size: Int)
    {
        let available = Int(item.pointee.struct_size)
        let raw = UnsafeMutableRawPointer(item)
        func store<T>(_ value: T, at field: PartialKeyPath<orc_item>) {
            guard let offset = MemoryLayout<orc_item>.offset(of: field),
                  offset + MemoryLayout<T>.size <= available else { return }
            raw.storeBytes(of: value, toByteOffset: offset, as: T.self)
        }
        store(Optional(id), at: \orc_item.id)
        store(Optional(json), at: \orc_item.json)
        store(checkpoint, at: \orc_item.checkpoint)
        store(size, at: \orc_item.checkpoint_size)
    }
}
