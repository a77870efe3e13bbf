// `Lock` is part of the kit's API (plugins share state between the threads of a step with it);
// it lives in OrchestrateLock, which the host and the token bucket use too.
@_exported import class OrchestrateLock.Lock
