import OrchestrateJSON

/// The OpenAPI 3.1 description of the API, served at `/api/openapi.json`. Hand-written: when a
/// route changes, change its entry here (the API tests check every path listed is served).
enum OpenAPIDocument {
    static let json: JSONValue = {
        do { return withBusyAnswers(try JSONValue(parsing: text)) } catch { fatalError("OpenAPIDocument.text is not JSON: \(error)") }
    }()

    /// Every operation may answer 503 when the server is busy (`RequestAdmission`; event streams
    /// when too many are open): added here rather than repeated in each entry.
    static func withBusyAnswers(_ document: JSONValue) -> JSONValue {
        guard var root = document.objectValue, var paths = root["paths"]?.objectValue else { return document }
        let methods: Set<String> = ["get", "post", "put", "delete"]
        for (path, item) in paths {
            guard var operations = item.objectValue else { continue }
            for (method, operation) in operations where methods.contains(method) {
                guard var object = operation.objectValue, var responses = object["responses"]?.objectValue else { continue }
                responses["503"] = ["$ref": "#/components/responses/Busy"]
                object["responses"] = .object(responses)
                operations[method] = .object(object)
            }
            paths[path] = .object(operations)
        }
        root["paths"] = .object(paths)
        return .object(root)
    }

    static let text = #"""
    {
      "openapi": "3.1.0",
      "info": {"title": "orchestrate", "version": "1",
               "description": "The API of `orchestrate serve --http`. Every request needs `Authorization: Bearer TOKEN`; the two event streams (GET /api/events and GET /api/runs/{id}/events) also take `?token=` (EventSource cannot set headers); a token in a cookie, or in the URL of anything else, is ignored. HEAD answers every GET operation without its body; a known path asked with a method it does not take is 405 with `Allow`. Errors are RFC 9457 problem documents. A server started with `--api-workflows DIR` starts only the workflows of DIR, by name (`workflow`), and answers 403 to `workflow_path` and `workflow_yaml`."},
      "security": [{"bearer": []}],
      "paths": {
        "/api/runs": {
          "get": {"summary": "List runs, oldest first (the newest `limit`)", "operationId": "listRuns",
                  "parameters": [
                    {"name": "status", "in": "query", "schema": {"type": "array", "items": {"$ref": "#/components/schemas/RunStatus"}}, "explode": true},
                    {"name": "label", "in": "query", "description": "KEY=VALUE", "schema": {"type": "array", "items": {"type": "string", "pattern": "^[^=]+=.*$"}}, "explode": true},
                    {"name": "queue", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}, "explode": true},
                    {"name": "workflow", "in": "query", "schema": {"type": "string"}},
                    {"name": "text", "in": "query", "schema": {"type": "string"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}}],
                  "responses": {"200": {"description": "Runs", "content": {"application/json": {"schema": {
                                  "type": "object", "required": ["runs"], "properties": {"runs": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}}}}}}},
                                "400": {"$ref": "#/components/responses/Problem"}, "401": {"$ref": "#/components/responses/Problem"}}},
          "post": {"summary": "Submit a run to the queue", "operationId": "submitRun",
                   "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Submission"}}}},
                   "responses": {"201": {"description": "Queued", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunDetail"}}},
                                         "links": {"GetRun": {"operationId": "getRun", "parameters": {"id": "$response.body#/id"}},
                                                   "ControlRun": {"operationId": "controlRun", "parameters": {"id": "$response.body#/id"}},
                                                   "DeleteRun": {"operationId": "deleteRun", "parameters": {"id": "$response.body#/id"}}}},
                                 "400": {"$ref": "#/components/responses/Problem"}, "401": {"$ref": "#/components/responses/Problem"},
                                 "403": {"$ref": "#/components/responses/Problem"}, "409": {"$ref": "#/components/responses/Problem"},
                                 "413": {"$ref": "#/components/responses/Problem"}, "422": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/runs/{id}": {
          "parameters": [{"$ref": "#/components/parameters/RunID"}],
          "get": {"summary": "A run with its steps, a page of its session items and transfer figures", "operationId": "getRun",
                  "parameters": [
                    {"name": "items_limit", "in": "query", "description": "items in the page", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
                    {"name": "items_after", "in": "query", "description": "the page after this cursor (items_next of the page before)", "schema": {"type": "string", "pattern": "^[0-9]+:.+$"}},
                    {"name": "items_last", "in": "query", "description": "true: the last items_limit items instead of the first", "schema": {"type": "boolean", "default": false}}],
                  "responses": {"200": {"description": "The run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunDetail"}}}},
                                "400": {"$ref": "#/components/responses/Problem"}, "401": {"$ref": "#/components/responses/Problem"}, "404": {"$ref": "#/components/responses/Problem"}}},
          "delete": {"summary": "Delete a finished run", "operationId": "deleteRun",
                     "responses": {"200": {"$ref": "#/components/responses/VerbDone"}, "400": {"$ref": "#/components/responses/Problem"}, "401": {"$ref": "#/components/responses/Problem"},
                                   "403": {"$ref": "#/components/responses/Problem"}, "404": {"$ref": "#/components/responses/Problem"},
                                   "409": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/runs/{id}/{verb}": {
          "parameters": [{"$ref": "#/components/parameters/RunID"},
                         {"name": "verb", "in": "path", "required": true,
                          "schema": {"type": "string", "enum": ["cancel", "stop", "pause", "unpause", "run-now", "retry", "close"]}}],
          "post": {"summary": "Apply a control verb (as the CLI's verb commands do)", "operationId": "controlRun",
                   "responses": {"200": {"$ref": "#/components/responses/VerbDone"}, "400": {"$ref": "#/components/responses/Problem"}, "401": {"$ref": "#/components/responses/Problem"},
                                 "403": {"$ref": "#/components/responses/Problem"}, "404": {"$ref": "#/components/responses/Problem"},
                                 "409": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/runs/{id}/paths": {
          "parameters": [{"$ref": "#/components/parameters/RunID"}],
          "post": {"summary": "Add files to a running persistent session (add-path)", "operationId": "addPaths",
                   "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "properties": {
                     "step": {"type": "string"}, "source": {"type": "string"}, "destination": {"type": "string"},
                     "paths": {"type": "array", "items": {"type": "object", "required": ["source", "destination"],
                               "properties": {"source": {"type": "string", "description": "absolute, on the node holding the run"}, "destination": {"type": "string"}}}}}}}}},
                   "responses": {"201": {"description": "Added", "content": {"application/json": {"schema": {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object"}}}}}}},
                                 "400": {"$ref": "#/components/responses/Problem"}, "401": {"$ref": "#/components/responses/Problem"},
                                 "403": {"$ref": "#/components/responses/Problem"}, "404": {"$ref": "#/components/responses/Problem"},
                                 "409": {"$ref": "#/components/responses/Problem"}, "422": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/runs/{id}/events": {
          "parameters": [{"$ref": "#/components/parameters/RunID"}, {"$ref": "#/components/parameters/After"}, {"$ref": "#/components/parameters/LastEventID"}, {"$ref": "#/components/parameters/QueryToken"}],
          "get": {"summary": "The run's events as Server-Sent Events", "operationId": "runEvents",
                  "responses": {"200": {"$ref": "#/components/responses/EventStream"}, "401": {"$ref": "#/components/responses/Problem"},
                                "404": {"$ref": "#/components/responses/Problem"}, "503": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/events": {
          "parameters": [{"$ref": "#/components/parameters/After"}, {"$ref": "#/components/parameters/LastEventID"}, {"$ref": "#/components/parameters/QueryToken"}],
          "get": {"summary": "Every event (all runs and the queue) as Server-Sent Events", "operationId": "allEvents",
                  "responses": {"200": {"$ref": "#/components/responses/EventStream"}, "401": {"$ref": "#/components/responses/Problem"},
                                "503": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/journal": {
          "get": {"summary": "A page of the journal as JSON (the `events --json` form), for clients that page rather than follow a stream", "operationId": "journal",
                  "parameters": [
                    {"name": "after", "in": "query", "description": "events with a seq above this", "schema": {"type": "integer", "minimum": 0, "default": 0}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1000}},
                    {"name": "run", "in": "query", "description": "only this run's events (none for a run that does not exist)", "schema": {"type": "string"}}],
                  "responses": {"200": {"description": "Events in seq order", "content": {"application/json": {"schema": {"type": "object", "required": ["events"], "properties": {
                                  "events": {"type": "array", "items": {"$ref": "#/components/schemas/Event"}},
                                  "pruned_through": {"type": "integer", "description": "the highest seq removed by retention (0: none); reading after a lower seq, events of pruned runs are gone and the runs.pruned events name them"}}}}}},
                                "400": {"$ref": "#/components/responses/Problem"}, "401": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/schedules": {
          "get": {"summary": "The registered schedule entries (as `orchestrate schedules --json`)", "operationId": "listSchedules",
                  "responses": {"200": {"description": "Entries by name then entry", "content": {"application/json": {"schema": {"type": "object", "required": ["schedules"], "properties": {
                                  "schedules": {"type": "array", "items": {"$ref": "#/components/schemas/Schedule"}}}}}}},
                                "401": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/schedules/{name}/{action}": {
          "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                         {"name": "action", "in": "path", "required": true, "schema": {"type": "string", "enum": ["pause", "resume"]}}],
          "post": {"summary": "Pause or resume every entry of a schedule (resuming skips the times that passed while paused)", "operationId": "setSchedulePaused",
                   "responses": {"200": {"description": "Done", "content": {"application/json": {"schema": {"type": "object", "required": ["name", "paused"], "properties": {
                                   "name": {"type": "string"}, "paused": {"type": "boolean"}}}}}},
                                 "401": {"$ref": "#/components/responses/Problem"}, "403": {"$ref": "#/components/responses/Problem"},
                                 "404": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/queues": {
          "get": {"summary": "Run counts per named queue and status; whether the store (passive) or each named queue is passive", "operationId": "listQueues",
                  "responses": {"200": {"description": "Queues", "content": {"application/json": {"schema": {"type": "object", "required": ["passive", "queues"], "properties": {
                                  "passive": {"type": "boolean"}, "max_rate": {"type": ["string", "null"], "description": "the store's queue rate, if set"},
                                  "queues": {"type": "array", "description": "queues with runs, and queues stopped by name", "items": {"type": "object", "required": ["name", "runs", "passive"], "properties": {"name": {"type": "string"}, "runs": {"type": "object", "additionalProperties": {"type": "integer"}},
                                    "passive": {"type": "boolean", "description": "stopped by name (queue stop --queue NAME); the store-wide switch is the top-level passive"}}}}}}}}},
                                "401": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/queues/{action}": {
          "parameters": [{"name": "action", "in": "path", "required": true, "schema": {"type": "string", "enum": ["stop", "start"]}}],
          "post": {"summary": "Make every serve on the store passive (stop) or active (start)", "operationId": "setQueuePassive",
                   "responses": {"200": {"description": "Done", "content": {"application/json": {"schema": {"type": "object", "properties": {"passive": {"type": "boolean"}}}}}},
                                 "401": {"$ref": "#/components/responses/Problem"}, "403": {"$ref": "#/components/responses/Problem"}, "404": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/queues/{name}/{action}": {
          "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*$"}},
                         {"name": "action", "in": "path", "required": true, "schema": {"type": "string", "enum": ["stop", "start"]}}],
          "post": {"summary": "Make one named queue passive (stop) or active again (start) on every serve; its other queues go on", "operationId": "setNamedQueuePassive",
                   "responses": {"200": {"description": "Done", "content": {"application/json": {"schema": {"type": "object", "required": ["queue", "passive"], "properties": {"queue": {"type": "string"}, "passive": {"type": "boolean"}}}}}},
                                 "400": {"$ref": "#/components/responses/Problem"}, "401": {"$ref": "#/components/responses/Problem"}, "403": {"$ref": "#/components/responses/Problem"}, "404": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/queues/rate": {
          "put": {"summary": "Replace every serve's --max-rate, live (a rate or a timetable); null gives each its own back", "operationId": "setQueueRate",
                  "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["max_rate"], "properties": {"max_rate": {"type": ["string", "null"]}}}}}},
                  "responses": {"200": {"description": "Done", "content": {"application/json": {"schema": {"type": "object", "properties": {"max_rate": {"type": ["string", "null"]}}}}}},
                                "400": {"$ref": "#/components/responses/Problem"}, "401": {"$ref": "#/components/responses/Problem"}, "403": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/nodes": {
          "get": {"summary": "The nodes sharing the store: those whose serve processes hold runs or have started", "operationId": "listNodes",
                  "responses": {"200": {"description": "Nodes, sorted by name", "content": {"application/json": {"schema": {"type": "object", "required": ["this_node", "nodes"], "properties": {
                                  "this_node": {"type": "string", "description": "the node of the serve answering"},
                                  "nodes": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}},
                                "401": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/plugins": {
          "get": {"summary": "Loaded plugins and their step types", "operationId": "listPlugins",
                  "responses": {"200": {"description": "Plugins", "content": {"application/json": {"schema": {"type": "object", "properties": {
                                  "plugins": {"type": "array", "items": {"type": "object"}}, "step_types": {"type": "array", "items": {"$ref": "#/components/schemas/StepType"}}}}}}},
                                "401": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/plugins/{id}": {
          "parameters": [{"name": "id", "in": "path", "required": true, "description": "a step type (http.request) or plugin name (http)", "schema": {"type": "string"}}],
          "get": {"summary": "A step type, or a plugin's step types, with their schemas", "operationId": "getPlugin",
                  "responses": {"200": {"description": "Step types", "content": {"application/json": {"schema": {"type": "object", "properties": {
                                  "step_types": {"type": "array", "items": {"$ref": "#/components/schemas/StepType"}}}}}}},
                                "401": {"$ref": "#/components/responses/Problem"}, "404": {"$ref": "#/components/responses/Problem"}}}
        },
        "/metrics": {
          "get": {"summary": "Prometheus metrics (docs/metrics.md)", "operationId": "metrics",
                  "responses": {"200": {"description": "The Prometheus text exposition format", "content": {"text/plain": {"schema": {"type": "string"}}}},
                                "401": {"$ref": "#/components/responses/Problem"}}}
        },
        "/api/openapi.json": {
          "get": {"summary": "This document", "operationId": "openapi",
                  "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}},
                                "401": {"$ref": "#/components/responses/Problem"}}}
        }
      },
      "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "parameters": {
          "RunID": {"name": "id", "in": "path", "required": true, "description": "a run id: 1 to 64 letters, digits, '.', '_' or '-', not dots alone (anything else is a 400)", "schema": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*$"}},
          "After": {"name": "after", "in": "query", "description": "resume after this event seq; `end` (GET /api/events only): only events from now on", "schema": {"anyOf": [{"type": "integer", "minimum": 0}, {"const": "end"}]}},
          "LastEventID": {"name": "Last-Event-ID", "in": "header", "description": "resume after this event seq (sent by EventSource on reconnecting)", "schema": {"type": "integer", "minimum": 0}},
          "QueryToken": {"name": "token", "in": "query", "description": "the bearer token, for EventSource only", "schema": {"type": "string"}}
        },
        "responses": {
          "Problem": {"description": "An RFC 9457 problem document", "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}},
          "Busy": {"description": "The server is busy: try again after Retry-After seconds (an RFC 9457 problem document)",
                   "headers": {"Retry-After": {"schema": {"type": "integer"}}},
                   "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}},
          "VerbDone": {"description": "What happened", "content": {"application/json": {"schema": {"type": "object", "required": ["id", "verb", "message"], "properties": {
                         "id": {"type": "string"}, "verb": {"type": "string"}, "message": {"type": "string"}}}}}},
          "EventStream": {"description": "`id: SEQ` and `data: EVENT` per event; `: keep-alive` comments when idle; first, when resuming after a seq below the highest one retention removed, an `event: pruned` message (no id) whose data says so (`after`, `pruned_through`, `continue_after`)", "content": {"text/event-stream": {"schema": {"type": "string"}}}}
        },
        "schemas": {
          "Problem": {"type": "object", "required": ["type", "title", "status", "detail"], "properties": {
            "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"}, "detail": {"type": "string"},
            "errors": {"type": "array", "description": "422: each problem; workflow errors carry file, line, column", "items": {"type": "object", "properties": {
              "file": {"type": "string"}, "line": {"type": "integer"}, "column": {"type": "integer"}, "message": {"type": "string"}, "text": {"type": "string"}}}}}},
          "Run": {"type": "object", "required": ["id", "workflow", "file", "status", "created_at", "inputs", "labels", "priority", "queue"], "properties": {
            "id": {"type": "string"}, "workflow": {"type": "string"}, "file": {"type": "string"},
            "status": {"$ref": "#/components/schemas/RunStatus"},
            "created_at": {"type": "number"}, "started_at": {"type": "number"}, "finished_at": {"type": "number"},
            "inputs": {}, "labels": {"type": "object", "additionalProperties": {"type": "string"}}, "priority": {"type": "integer"},
            "queue": {"type": "string"}, "node": {"type": "string"}, "error": {"type": "string"}, "outputs": {}, "max_rate": {"type": "integer"}, "max_rate_timetable": {"type": "string"},
            "owner": {"type": "object"}, "transfer": {"$ref": "#/components/schemas/Transfer"}}},
          "RunStatus": {"type": "string", "enum": ["queued", "running", "paused", "compensating", "succeeded", "failed", "cancelled", "interrupted"]},
          "RunDetail": {"allOf": [{"$ref": "#/components/schemas/Run"}, {"type": "object", "required": ["steps", "transfer"], "properties": {
            "steps": {"type": "array", "items": {"type": "object", "required": ["id", "status", "attempt", "kind"], "properties": {
              "id": {"type": "string"}, "status": {"type": "string"}, "attempt": {"type": "integer"}, "kind": {"type": "string"},
              "error_kind": {"type": "string"}, "error": {"type": "string"}, "outputs": {}, "idempotency_key": {"type": "string"},
              "started_at": {"type": "number"}, "finished_at": {"type": "number"}, "node": {"type": "string"}}}},
            "items": {"type": "array", "description": "one page of the items, by step then in the order added (items_limit, items_after, items_last)", "items": {"type": "object", "properties": {"id": {"type": "string"}, "step": {"type": "string"}, "status": {"type": "string"}, "item": {}, "error": {"type": "string"}}}},
            "items_next": {"type": "string", "description": "the cursor of the next page (items_after), when more items follow this one"},
            "items_total": {"type": "integer", "description": "all the run's items"},
            "item_counts": {"type": "object", "description": "per step, how many items are queued, running, done and failed", "additionalProperties": {"type": "object", "additionalProperties": {"type": "integer"}}},
            "progress": {"type": "array", "description": "the latest step.progress event of each step that reported progress", "items": {"$ref": "#/components/schemas/Event"}},
            "graph": {"type": "array", "description": "the declared steps (from the workflow stored with the run) and what each needs",
                      "items": {"type": "object", "required": ["id", "uses", "needs", "for_each"], "properties": {
                        "id": {"type": "string"}, "uses": {"type": "string"}, "needs": {"type": "array", "items": {"type": "string"}}, "for_each": {"type": "boolean"}}}}}}]},
          "Event": {"type": "object", "required": ["seq", "time", "type"], "properties": {
            "seq": {"type": "integer"}, "time": {"type": "number"}, "type": {"type": "string"}, "run": {"type": "string"}, "step": {"type": "string"}, "data": {"type": "object"}}},
          "Schedule": {"type": "object", "required": ["name", "entry", "cron", "timezone", "overlap", "paused", "workflow", "file", "queue"], "properties": {
            "name": {"type": "string"}, "entry": {"type": "integer", "description": "the entry's position in on.schedule, from 1"}, "cron": {"type": "string"},
            "timezone": {"type": "string"}, "overlap": {"type": "string"}, "paused": {"type": "boolean"}, "workflow": {"type": "string"}, "file": {"type": "string"},
            "queue": {"type": "string"}, "inputs": {}, "catchup_seconds": {"type": "number"}, "last_run": {"type": "string"},
            "next": {"type": "string", "description": "the next due time (ISO 8601, UTC); absent while paused"}}},
          "Transfer": {"type": "object", "properties": {"bytes_done": {"type": "integer"}, "bytes_total": {"type": "integer"}, "elapsed_s": {"type": "number"},
                       "average_rate": {"type": "number"}, "remaining_s": {"type": "number"}}},
          "Submission": {"type": "object", "additionalProperties": false, "description": "A member that is null counts as not given. One of workflow (a server with --api-workflows) or workflow_path or workflow_yaml (any other server).", "properties": {
            "workflow": {"type": ["string", "null"], "pattern": "^[^./][^/]*$", "description": "a workflow of the server's --api-workflows directory: NAME.yaml or NAME.yml there (no '/', not starting with '.', not leading out of it through a symbolic link)"},
            "workflow_path": {"type": ["string", "null"], "description": "absolute path of a workflow file on the server"},
            "workflow_yaml": {"type": ["string", "null"], "description": "the workflow itself"},
            "file_name": {"type": ["string", "null"], "description": "the name workflow_yaml's diagnostics use"},
            "inputs": {"type": ["object", "null"]}, "labels": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            "queue": {"type": ["string", "null"], "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*$"}, "priority": {"type": ["integer", "null"]},
            "id": {"type": ["string", "null"], "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*$"},
            "max_rate": {"type": ["integer", "string", "null"], "minimum": 1, "description": "bytes per second, or as --max-rate: 10M, \"Mon-Fri 08:00,10M 19:00,off\""}},
            "oneOf": [{"required": ["workflow"], "properties": {"workflow": {"type": "string"}}},
                      {"required": ["workflow_path"], "properties": {"workflow_path": {"type": "string"}}},
                      {"required": ["workflow_yaml"], "properties": {"workflow_yaml": {"type": "string"}}}],
            "example": {"workflow_yaml": "version: 1\nname: hello\nsteps:\n  greet: { uses: exec, with: { command: [echo, hello] } }\n", "queue": "examples", "labels": {"team": "media"}}},
          "Node": {"type": "object", "required": ["name", "live", "runs_held", "workers"], "properties": {
            "name": {"type": "string"},
            "live": {"type": "boolean", "description": "a worker of it is live or a live owner on it holds a run"},
            "runs_held": {"type": "integer", "description": "runs held by a live owner on this node"},
            "lease_until": {"type": "number", "description": "the latest lease end of the runs it holds (each heartbeat pushes it forward), store clock"},
            "last_worker_event": {"type": "number", "description": "when a serve of it last started or stopped"},
            "workers": {"type": "array", "description": "serve processes started and not stopped, newest first", "items": {"type": "object", "required": ["pid", "started_at", "live", "queues"], "properties": {
              "pid": {"type": "integer"}, "started_at": {"type": "number"}, "queues": {"type": "array", "items": {"type": "string"}},
              "live": {"type": "boolean", "description": "on the answering node: the process exists; elsewhere: none of its runs let its lease run out"}}}}}},
          "StepType": {"type": "object", "properties": {"id": {"type": "string"}, "version": {"type": "string"}, "summary": {"type": "string"},
                       "plugin": {"type": "string"}, "path": {"type": "string"}, "accepts_items": {"type": "boolean"},
                       "documentation": {"type": ["string", "null"]}, "input_schema": {}, "output_schema": {}}}
        }
      }
    }
    """#
}
