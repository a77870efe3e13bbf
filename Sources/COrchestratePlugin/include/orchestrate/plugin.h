/*
 * orchestrate/plugin.h — the orchestrate step-plugin ABI, version 1.2.
 *
 * History: 1.0 the first version. 1.1 adds session steps (ORC_STEP_OPENS_SESSION and
 * orc_step_type.close_session); a 1.0 plugin loads unchanged in a 1.1 host. 1.2 gives the
 * reserved field of orc_step_call its meaning, orc_step_call.flags (ORC_CALL_LAST_ATTEMPT); a
 * plugin that relies on a flag checks orc_host_api.abi_minor >= 2, since an older host sends 0.
 * Extensions (found with orc_host_api.get_extension; a host without one answers NULL):
 * "orchestrate.bandwidth.v1" (orc_bandwidth_v1), the run's and the host's bandwidth caps;
 * "orchestrate.item-failure.v1" (orc_item_failure_v1), an item's failure with its error kind.
 *
 * A plugin is a shared library that exports exactly one function:
 *
 *     const orc_plugin *orchestrate_plugin_entry_v1(void);
 *
 * It describes the plugin and its step types. The host opens the library with
 * RTLD_NOW | RTLD_LOCAL, calls the entry once, checks the description, and never unloads the
 * library. When a workflow step runs, the host calls the step type's `run` function with the
 * step's resolved inputs and a table of host callbacks (orc_host_api), in the spirit of
 * SQLite's sqlite3_api_routines: the plugin reaches the host only through that table.
 *
 * This header is plain C99 with fixed-width types and needs nothing but a C compiler:
 *
 *     cc -shared -fPIC -I path/to/include -o myplugin.so myplugin.c
 *
 * ----------------------------------------------------------------------------------------------
 * Conventions that hold for every function and struct below
 * ----------------------------------------------------------------------------------------------
 *
 * Strings      UTF-8, NUL-terminated. JSON arguments are complete JSON texts (RFC 8259).
 *
 * Ownership    Every pointer the host passes to the plugin is BORROWED: it stays valid until the
 *              call that received it returns (or for the lifetime stated at that function), and
 *              the plugin must not free it. Every pointer the plugin passes to the host is
 *              borrowed by the host for that call only: the host copies what it keeps. The
 *              plugin never hands heap memory to the host, so no allocator crosses the boundary.
 *              The orc_plugin struct and everything it points to are owned by the plugin and
 *              must stay valid and unchanged for the life of the process.
 *
 * Threads      [any-thread]   may be called from any thread.
 *              [step-thread]  may be called from the thread running orc_step_type.run or from
 *                             any thread the plugin created for that call, but only while that
 *                             run call has not returned. After run returns, the orc_host
 *                             pointer is dead: the host ignores calls through it and warns
 *                             once, naming the step type, that the plugin misbehaves.
 *              The host may call the same run function concurrently for different steps, from
 *              different threads: a plugin must keep no unsynchronised global state.
 *
 * Versions     struct_size is the first field of every extensible struct and is set by whoever
 *              fills the struct, to sizeof(the struct) as that side was compiled. A reader must
 *              not touch fields beyond struct_size. Structs and the callback table only grow at
 *              their end (append-only); a new minor version only adds. Anything else that is new
 *              comes as an extension, looked up by string id through orc_host_api.get_extension.
 *
 * Errors       A step reports failure by calling orc_host_api.set_error and returning
 *              ORC_RUN_FAILED. The error kind tells the scheduler what to do next (retry or not).
 *
 * Secrets      Secret values arrive in the inputs like any other value. The host redacts them
 *              from everything it records (logs, outputs, errors, events, checkpoints are stored
 *              as given, so never put a secret in a checkpoint), but a plugin should still never
 *              log its inputs wholesale and never pass a secret on a command line.
 */
#ifndef ORCHESTRATE_PLUGIN_H
#define ORCHESTRATE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. The host accepts a plugin whose major equals its own
 * and whose minor is no newer than its own; anything else is refused with the reason. */
#define ORC_ABI_VERSION_MAJOR 1
#define ORC_ABI_VERSION_MINOR 2

/* The name of the one exported function, for dlsym. */
#define ORC_PLUGIN_ENTRY_SYMBOL "orchestrate_plugin_entry_v1"

/* Exported symbol decoration for plugin authors. */
#if defined(_WIN32)
#define ORC_EXPORT __declspec(dllexport)
#else
#define ORC_EXPORT __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------------------------
 * Enumerations (always passed as int32_t so their size is fixed)
 * ------------------------------------------------------------------------------------------- */

/* Error kinds, for orc_host_api.set_error. An unknown value is treated as ORC_ERROR_PERMANENT. */
enum {
    ORC_ERROR_RETRYABLE     = 1, /* transient: the scheduler may try again (connection reset, 503) */
    ORC_ERROR_PERMANENT     = 2, /* trying again will not help (404, a remote refusal) */
    ORC_ERROR_INVALID_INPUT = 3, /* the step's inputs are wrong; never retried */
    ORC_ERROR_TIMEOUT       = 4, /* the step gave up waiting; retried like RETRYABLE */
    ORC_ERROR_CANCELLED     = 5  /* the step stopped because is_cancelled said so */
};

/* Log levels, for orc_host_api.log. */
enum {
    ORC_LOG_DEBUG = 0,
    ORC_LOG_INFO  = 1,
    ORC_LOG_WARN  = 2,
    ORC_LOG_ERROR = 3
};

/* Return values of orc_step_type.run. */
enum {
    ORC_RUN_OK     = 0, /* the step succeeded; outputs set with set_output are its result */
    ORC_RUN_FAILED = 1  /* the step failed; the error set with set_error says why (if none was
                           set, the host records a permanent error) */
};

/* Results of orc_host_api.next_item. */
enum {
    ORC_ITEM_READY   = 1, /* *item was filled */
    ORC_ITEM_TIMEOUT = 0, /* nothing arrived within timeout_ms; call again */
    ORC_ITEM_CLOSED  = -1 /* the session was closed and every item handed out: finish and return */
};

/* Flags of orc_step_type.flags. */
enum {
    /* The step is a long-lived session that takes items (e.g. file paths) while it runs, through
     * next_item / item_done. The host routes `orchestrate add-path` to such steps only. */
    ORC_STEP_ACCEPTS_ITEMS = 1u << 0,
    /* Since 1.1. The step opens a session: its outputs name a live, process-local resource (a
     * connection, e.g. {"session": "s1"}) that later steps of the same run use. The host runs
     * the step again on resume instead of trusting outputs journaled by a dead process, and calls
     * close_session once no unfinished step needs the session (at the latest when the run ends). */
    ORC_STEP_OPENS_SESSION = 1u << 1
};

/* ---------------------------------------------------------------------------------------------
 * The host side: an opaque context per step call and the callback table
 * ------------------------------------------------------------------------------------------- */

/* One running step call. Opaque to the plugin; valid until that run call returns. */
typedef struct orc_host orc_host;

/* One item handed to a long-lived step by next_item. Filled by the host. */
typedef struct orc_item {
    uint32_t struct_size;
    /* Stable id of the item, unique within the step; pass it back to item_done. */
    const char *id;
    /* The item as a JSON object, e.g. {"source":"/a/b.mov","destination":"in/b.mov"}. */
    const char *json;
    /* Bytes of a checkpoint saved for this item by an earlier attempt (see
     * save_item_checkpoint), or NULL and 0 when there is none. */
    const uint8_t *checkpoint;
    size_t checkpoint_size;
} orc_item;
/* Lifetime of orc_item strings and checkpoint: until item_done is called for that id, or until
 * the run call returns, whichever comes first. */

/* The table of host functions handed to every run call. Append-only: a plugin compiled against
 * an older header sees a prefix of it; a plugin compiled against a newer header must check
 * struct_size with ORC_API_HAS (below) before calling anything added after 1.0. Every function
 * pointer up to struct_size is non-NULL. */
typedef struct orc_host_api {
    uint32_t struct_size;
    uint32_t abi_major; /* the host's ABI version */
    uint32_t abi_minor;

    /* Writes one log line for the step. `message` may contain newlines; the host splits them.
     * Secret values are redacted by the host before the line is shown or stored.
     * [step-thread] */
    void (*log)(orc_host *host, int32_t level, const char *message);

    /* Reports progress. Pass -1 for any figure that is unknown. Cheap to call often: the host
     * throttles what it shows and stores. Figures are absolute, not increments.
     * [step-thread] */
    void (*progress)(orc_host *host, int64_t bytes_done, int64_t bytes_total,
                     int64_t files_done, int64_t files_total);

    /* Returns 1 once the step has been asked to stop (run cancelled, attempt timed out, engine
     * shutting down), else 0. Poll it between units of work; a transfer should notice within
     * one second. [step-thread] */
    int32_t (*is_cancelled)(orc_host *host);

    /* Returns a file descriptor that becomes readable when the step is cancelled, so a plugin
     * blocked in poll()/select() (or curl_multi_poll, or on a socket) wakes at once. Never read
     * from, write to or close it. Valid until run returns. [step-thread] */
    int32_t (*cancel_fd)(orc_host *host);

    /* Sleeps up to `milliseconds`, returning early when the step is cancelled. Returns 1 if it
     * returned because of cancellation, else 0. Use it instead of sleep() inside a step.
     * [step-thread] */
    int32_t (*sleep_ms)(orc_host *host, int64_t milliseconds);

    /* Sets output `name` (e.g. "sha256") to `json_value`, a JSON text ("\"abc\"", "42",
     * "{\"a\":1}"). Setting the same name again replaces it. Outputs become visible to later
     * steps as steps.<id>.outputs.<name> only if run returns ORC_RUN_OK.
     * Returns 0, or -1 if `json_value` is not valid JSON (nothing is set).
     * [step-thread] */
    int32_t (*set_output)(orc_host *host, const char *name, const char *json_value);

    /* Saves `size` bytes as the step's checkpoint, replacing the previous one. When it returns
     * 0 the checkpoint is durable: if the process dies, the next attempt of this step gets it
     * back from load_checkpoint (e.g. the last byte offset the server confirmed). When several
     * threads of the step save at once, the last save wins: 0 then means this save, or one made
     * after it, is durable (the host writes the newest of the saves waiting, once for all).
     * Returns 0 on success, -1 if it could not be stored (the step may go on; it just cannot
     * resume from this point). Limit: 1 MiB. [step-thread] */
    int32_t (*save_checkpoint)(orc_host *host, const uint8_t *data, size_t size);

    /* Returns the step's last saved checkpoint and sets *size, or returns NULL and sets *size
     * to 0 when there is none. The bytes are owned by the host and valid until the next call to
     * save_checkpoint or load_checkpoint, or until run returns. [step-thread] */
    const uint8_t *(*load_checkpoint)(orc_host *host, size_t *size);

    /* Records why the step failed. Call it before returning ORC_RUN_FAILED; the last call wins.
     *   kind            one of ORC_ERROR_*
     *   code            short machine-readable code ("http_503", "ENOENT"), or NULL. The code
     *                   "unreachable" (with ORC_ERROR_RETRYABLE) means the remote end could
     *                   not be reached at all (connection refused, DNS failure, connect timeout):
     *                   the host then holds the step without spending an attempt and retries it
     *                   when the endpoint (from the inputs' "url", or "host" and "port") answers.
     *   message         human-readable explanation, or NULL
     *   retry_after_ms  the server's hint (HTTP Retry-After) in milliseconds, or -1 for none;
     *                   when given, it replaces the delay the retry policy would compute.
     * [step-thread] */
    void (*set_error)(orc_host *host, int32_t kind, const char *code, const char *message,
                      int64_t retry_after_ms);

    /* For ORC_STEP_ACCEPTS_ITEMS steps: waits up to `timeout_ms` for the next item added to the
     * session (durably queued by the host, e.g. by `orchestrate add-path`). Returns
     * ORC_ITEM_READY and fills *item (whose struct_size the plugin sets before the call),
     * ORC_ITEM_TIMEOUT, or ORC_ITEM_CLOSED when the session is closing and no item is left.
     * Returns early with ORC_ITEM_TIMEOUT when the step is cancelled. Several threads of one
     * step may call it at once; each item is handed out once per attempt. [step-thread] */
    int32_t (*next_item)(orc_host *host, int64_t timeout_ms, orc_item *item);

    /* Reports that item `id` has finished: ok = 1 for success, ok = 0 for failure with a
     * human-readable `error` (may be NULL). A finished item is never handed out again, even
     * after a crash; an item not reported is handed out again on the next attempt.
     * [step-thread] */
    void (*item_done)(orc_host *host, const char *id, int32_t ok, const char *error);

    /* Saves a checkpoint for one item (e.g. a partial file's offset), like save_checkpoint.
     * Returns 0 when durable, -1 otherwise. [step-thread] */
    int32_t (*save_item_checkpoint)(orc_host *host, const char *id, const uint8_t *data,
                                    size_t size);

    /* Reports progress of one item, like progress. [step-thread] */
    void (*item_progress)(orc_host *host, const char *id, int64_t bytes_done, int64_t bytes_total);

    /* Returns the host extension with string id `extension_id` (e.g. ORC_EXT_BANDWIDTH_V1),
     * or NULL if this host does not provide it. The returned table is owned by the host and
     * valid for the life of the process. [any-thread] */
    const void *(*get_extension)(orc_host *host, const char *extension_id);
} orc_host_api;

/* ORC_STRUCT_HAS(type, pointer, field): 1 when the struct at `pointer`, filled by the other side
 * with its own struct_size, is large enough to hold `field`, else 0. Read a field, or call a
 * function pointer, that a later version appended only when this says so. `pointer` must not
 * be NULL. [any-thread]
 *
 * ORC_API_HAS(api, field): the same for the host's callback table, the check before calling
 * anything added after 1.0:
 *
 *     if (ORC_API_HAS(api, get_extension)) bw = api->get_extension(host, ORC_EXT_BANDWIDTH_V1);
 */
#define ORC_STRUCT_HAS(type, pointer, field) \
    ((size_t)(pointer)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))
#define ORC_API_HAS(api, field) ORC_STRUCT_HAS(orc_host_api, api, field)

/* ---------------------------------------------------------------------------------------------
 * Host extensions
 * ------------------------------------------------------------------------------------------- */

/* Extension "orchestrate.bandwidth.v1": the bandwidth caps of `orchestrate run|submit|serve
 * --max-rate`. A step that moves bytes over the network asks for them as they go, so one cap
 * holds across all the transfers of a run (and of a `serve`), whichever plugin does them:
 *
 *     const orc_bandwidth_v1 *bw = ORC_API_HAS(api, get_extension)
 *         ? api->get_extension(host, ORC_EXT_BANDWIDTH_V1) : NULL;
 *     if (bw && !ORC_STRUCT_HAS(orc_bandwidth_v1, bw, consume)) bw = NULL;
 *     ...for each chunk: if (bw && bw->consume(host, n) != 0) { cancelled: stop }
 *
 * Without the extension (an older host) or without a cap, consume returns 0 at once. */
#define ORC_EXT_BANDWIDTH_V1 "orchestrate.bandwidth.v1"

typedef struct orc_bandwidth_v1 {
    uint32_t struct_size;
    /* Accounts `bytes` (> 0) sent or received by this step and blocks until the caps allow
     * them: before sending a chunk, or after receiving one. Caps are token buckets with about
     * a quarter second of burst, so chunks of any size work; bytes above the burst are paid
     * for by waiting longer. Returns 0 when the bytes may go, 1 when the step was cancelled
     * while waiting (stop as after is_cancelled). Cheap when no cap is set. [step-thread] */
    int32_t (*consume)(orc_host *host, int64_t bytes);
} orc_bandwidth_v1;

/* Extension "orchestrate.item-failure.v1": an item of a long-lived step failed, with the error
 * kind and code set_error takes, so the host can tell a failure worth trying again (the server
 * was down) from one a person must look at (no such file). Call it instead of item_done(ok = 0):
 *
 *     const orc_item_failure_v1 *items = ORC_API_HAS(api, get_extension)
 *         ? api->get_extension(host, ORC_EXT_ITEM_FAILURE_V1) : NULL;
 *     if (items && !ORC_STRUCT_HAS(orc_item_failure_v1, items, item_failed)) items = NULL;
 *     if (items) items->item_failed(host, id, ORC_ERROR_RETRYABLE, "unreachable", "connection refused", -1);
 *     else api->item_done(host, id, 0, "connection refused");
 *
 * What the host does with it: a permanent or invalid-input failure (or a kind or code the step's
 * `retry: non_retryable` lists) finishes the item failed, as item_done(ok = 0) does, and it is
 * never handed out again. A retryable or timeout failure hands the item out again later, per the
 * step's `retry:` policy (its max_attempts count this item's attempts; retry_after_ms >= 0 wins
 * over the computed delay) and, with the code "unreachable", only once the step's host answers
 * again (no attempt spent; at most the step's `hold_timeout`). An item whose tries ran out is
 * finished failed. Without the extension (an older host), use item_done. */
#define ORC_EXT_ITEM_FAILURE_V1 "orchestrate.item-failure.v1"

typedef struct orc_item_failure_v1 {
    uint32_t struct_size;
    /* Item `id` failed. `kind` is an ORC_ERROR_* value (unknown means permanent); `code` and
     * `message` may be NULL; `retry_after_ms` is the server's hint or -1. [step-thread] */
    void (*item_failed)(orc_host *host, const char *id, int32_t kind, const char *code, const char *message,
                        int64_t retry_after_ms);
} orc_item_failure_v1;

/* ---------------------------------------------------------------------------------------------
 * The plugin side: the step call, step types, and the plugin description
 * ------------------------------------------------------------------------------------------- */

/* Everything the host knows about one step attempt. Filled by the host; borrowed by the plugin
 * until run returns. */
typedef struct orc_step_call {
    uint32_t struct_size;
    /* The step type being run, e.g. "fs.copy" (one plugin function may serve several types). */
    const char *step_type;
    /* The run's id and the step's id within the workflow (for for_each: "upload[3]"). */
    const char *run_id;
    const char *step_id;
    /* The step's `with:` block, resolved, as a JSON object text. What the host guarantees, at
     * every attempt, after the block's expressions were evaluated and before run is called:
     * - every top-level input the workflow left out (or that resolved to null where the
     *   property's `type` does not allow null) holds the property's `default`, when the schema
     *   declares one: a plugin never writes its defaults a second time;
     * - the object satisfies the input schema (the subset listed at input_schema). A resolved
     *   value that does not (`${{ steps.x.outputs.y }}` giving a string where an integer is
     *   required) fails the attempt as ORC_ERROR_INVALID_INPUT, naming the step and the input,
     *   and run is not called.
     * Checks beyond the schema (a file that must exist, two inputs that exclude each other
     * without an if/then) remain the plugin's. */
    const char *inputs_json;
    /* The step's idempotency key, evaluated once and persisted, or NULL when it has none. A step
     * whose effect must happen once sends it to the server (e.g. HTTP Idempotency-Key). */
    const char *idempotency_key;
    /* A directory private to this run, for temporary files. Exists when run is called. */
    const char *run_dir;
    /* 1 for the first attempt, then 2, 3, ... (counts across resumes). */
    uint32_t attempt;
    /* Since 1.2. ORC_CALL_* facts about this attempt. A host older than 1.2 leaves it 0 (the
     * field was reserved), so a flag's absence must be the safe reading. */
    uint32_t flags;
    /* The attempt's time limit in milliseconds, or -1 for none. The host cancels the step when
     * it expires (is_cancelled turns 1); this figure is informational. */
    int64_t timeout_ms;
} orc_step_call;

/* Flags of orc_step_call.flags. */
enum {
    /* A retryable failure of this attempt will not be retried: the step's `retry:` attempts
     * are used up. A step that keeps something for a later attempt when it fails retryably
     * (an open multipart upload, a remote partial file) cleans it up instead, as after a
     * permanent failure. Not set when the host cannot tell (a retry: non_retryable list may
     * still end the step). */
    ORC_CALL_LAST_ATTEMPT = 1u << 0
};

/* Runs one attempt of a step. Blocks until the step finishes, fails, or notices cancellation.
 * Returns ORC_RUN_OK or ORC_RUN_FAILED. Called on a host worker thread, possibly concurrently
 * with other calls to the same function. `call`, `api` and `host` are borrowed until return. */
typedef int32_t (*orc_step_run_fn)(const orc_step_call *call, const orc_host_api *api,
                                   orc_host *host);

/* Since 1.1. Closes a session opened by a successful run of an ORC_STEP_OPENS_SESSION step.
 * `step_type` is the step type's id; `outputs_json` the outputs object that run set. Called
 * once per session, never concurrently with a run call that uses the same session. Must not
 * call back into the host. [any-thread] Both strings borrowed for the call. */
typedef void (*orc_session_close_fn)(const char *step_type, const char *outputs_json);

/* One step type a plugin provides. */
typedef struct orc_step_type {
    uint32_t struct_size;
    uint32_t flags;             /* ORC_STEP_* */
    const char *id;             /* "plugin.step": lower-case, dot-separated, globally unique */
    const char *version;        /* semantic version of this step type, e.g. "1.0.0" */
    const char *summary;        /* one line for `orchestrate plugins list` */
    const char *documentation;  /* longer text for `plugins inspect` (Markdown), or NULL */
    /* JSON Schema (draft 2020-12 subset: type, properties, required, additionalProperties,
     * items, enum, const, minimum, maximum, minLength, allOf, if/then/else, description, default)
     * of the `with:` object, checked by `orchestrate validate` as written and by the host on the
     * resolved object before each attempt (see orc_step_call.inputs_json); top-level `default`s
     * are filled in. A then/else schema's description is added to its errors: say there why the
     * inputs go together and what to change. */
    const char *input_schema;
    /* JSON Schema of the outputs object the step sets, or NULL. */
    const char *output_schema;
    orc_step_run_fn run;
    /* Since 1.1 (present when struct_size covers it). Required for ORC_STEP_OPENS_SESSION
     * steps, NULL otherwise. */
    orc_session_close_fn close_session;
} orc_step_type;

/* What orchestrate_plugin_entry_v1 returns. */
typedef struct orc_plugin {
    uint32_t struct_size;
    uint32_t abi_major;         /* ORC_ABI_VERSION_MAJOR the plugin was built with */
    uint32_t abi_minor;         /* ORC_ABI_VERSION_MINOR the plugin was built with */
    uint32_t step_type_count;   /* number of entries in step_types (at most 1024) */
    const char *name;           /* short plugin name, e.g. "fs" */
    const char *version;        /* plugin version, e.g. "1.2.0" */
    const char *summary;        /* one line */
    /* step_type_count pointers to step types (pointers, so orc_step_type can grow). */
    const orc_step_type *const *step_types;
} orc_plugin;

/* The entry point. Called once, on the thread loading the plugin, before anything else. Must
 * return a pointer to a description that stays valid for the life of the process, or NULL to
 * refuse to load (the host reports it). Must not call back into the host. */
typedef const orc_plugin *(*orc_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* ORCHESTRATE_PLUGIN_H */
