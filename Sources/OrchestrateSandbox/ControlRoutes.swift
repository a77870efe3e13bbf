import Hummingbird
import OrchestrateJSON

/// The sandbox's own control surface (loopback only, no token): what it holds and received,
/// and the fault switches. Tests and the demo read and set these.
enum ControlRoutes {
    static func add(to router: Router<SandboxContext>, state: SandboxState) {
        router.get("/_sandbox/state") { _, _ in
            let base = await state.base
            let videos = await state.allVideos().map { $0.json(base: base) }
            return Responses.json(["videos": .array(videos), "faults": await state.faults.json])
        }

        router.post("/_sandbox/faults") { request, context in
            let faults = Faults(json: await request.json(context))
            await state.setFaults(faults)
            return Responses.json(await state.faults.json)
        }
    }
}
