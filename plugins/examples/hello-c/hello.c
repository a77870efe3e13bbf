/*
 * hello.c — an orchestrate step plugin in plain C: the model for third-party plugins.
 *
 * It provides one step type, `example.hello`:
 *
 *     steps:
 *       greet:
 *         uses: example.hello
 *         with: { name: "Ada", greeting: "Good morning", work_ms: 2000 }
 *       # later steps read ${{ steps.greet.outputs.message }}
 *
 * and shows every duty of a step: read the inputs, validate them (invalid-input errors), log,
 * report progress, poll for cancellation and sleep through the host, set outputs as JSON, and
 * report failures with a kind the scheduler understands.
 *
 * Build it with nothing but a C compiler and the ABI header:
 *
 *     cc -shared -fPIC -I Sources/COrchestratePlugin/include -o hello.so hello.c
 *
 * and run it with `orchestrate run --plugin-path ./hello.so workflow.yaml`.
 *
 * Rules to keep in mind (plugin.h documents each function):
 *   - Everything the host passes is borrowed until the call returns; copy what you keep.
 *   - Never hand the host heap memory: outputs and errors go through callbacks that copy.
 *   - run() may be called on several threads at once: no unsynchronised globals.
 *   - Poll is_cancelled (or wait on cancel_fd) at least once a second; use sleep_ms, not sleep.
 *   - Never log secrets or the whole inputs object.
 *   - Call a callback added after ABI 1.0 only when ORC_API_HAS(api, that_callback) says the
 *     host has it (this step uses only 1.0 callbacks).
 */
#include <orchestrate/plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Reading the inputs. The host passes the `with:` object as JSON text, checked against the
 * input schema below after its expressions were evaluated, with the schema's `default`s filled
 * in for the inputs the workflow left out. A real plugin would use a JSON library (cJSON, yyjson,
 * jansson); these few lines read a top-level string or integer, which is all this step needs.
 * ------------------------------------------------------------------------------------------- */

/* Returns a pointer to the value of top-level key `key`, or NULL. Handles nested values and
 * escaped quotes while skipping; assumes the text is valid JSON (the host guarantees it). */
static const char *find_value(const char *json, const char *key) {
    size_t key_len = strlen(key);
    int depth = 0;
    for (const char *p = json; *p; p++) {
        if (*p == '{' || *p == '[') { depth++; continue; }
        if (*p == '}' || *p == ']') { depth--; continue; }
        if (*p != '"') continue;
        const char *start = ++p; /* a string: a key if it is followed by ':' at depth 1 */
        while (*p && *p != '"') p += (*p == '\\' && p[1]) ? 2 : 1;
        if (!*p) return NULL;
        const char *after = p + 1;
        while (*after == ' ' || *after == '\n' || *after == '\t' || *after == '\r') after++;
        if (depth == 1 && *after == ':' && (size_t)(p - start) == key_len && strncmp(start, key, key_len) == 0) {
            after++;
            while (*after == ' ' || *after == '\n' || *after == '\t' || *after == '\r') after++;
            return after;
        }
    }
    return NULL;
}

/* Copies the string value of `key` (unescaping \" \\ \/ \n \t; other escapes are kept as they
 * are) into out. Returns 1, or 0 when the key is absent, not a string, or too long. */
static int input_string(const char *json, const char *key, char *out, size_t size) {
    const char *p = find_value(json, key);
    size_t n = 0;
    if (!p || *p != '"') return 0;
    for (p++; *p && *p != '"'; p++) {
        char c = *p;
        if (c == '\\' && p[1]) {
            c = *++p;
            if (c == 'n') c = '\n';
            else if (c == 't') c = '\t';
            else if (c != '"' && c != '\\' && c != '/') { if (n + 1 >= size) return 0; out[n++] = '\\'; }
        }
        if (n + 1 >= size) return 0;
        out[n++] = c;
    }
    out[n] = '\0';
    return 1;
}

/* Reads the integer value of `key` into *out; returns 1, or 0 when absent or not a number. */
static int input_int(const char *json, const char *key, long long *out) {
    const char *p = find_value(json, key);
    char *end;
    if (!p) return 0;
    *out = strtoll(p, &end, 10);
    return end != p;
}

/* Writes `text` as a JSON string literal into out (which must hold 6 * strlen(text) + 3). */
static void json_string(const char *text, char *out) {
    char *o = out;
    *o++ = '"';
    for (const unsigned char *s = (const unsigned char *)text; *s; s++) {
        if (*s == '"' || *s == '\\') { *o++ = '\\'; *o++ = (char)*s; }
        else if (*s < 0x20) o += sprintf(o, "\\u%04x", *s);
        else *o++ = (char)*s;
    }
    *o++ = '"';
    *o = '\0';
}

/* ---------------------------------------------------------------------------------------------
 * The step
 * ------------------------------------------------------------------------------------------- */

/* Reports a failure: the kind decides whether the scheduler retries (see ORC_ERROR_*). */
static int32_t fail(const orc_host_api *api, orc_host *host, int32_t kind, const char *code, const char *message) {
    api->set_error(host, kind, code, message, -1 /* no retry-after hint */);
    return ORC_RUN_FAILED;
}

static int32_t run_hello(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char name[256], greeting[256], line[600], json[6 * 600 + 3];
    long long work_ms;

    /* 1. Inputs. The host has checked them against the schema, and filled in the defaults the
     *    schema declares (`greeting` is "Hello", `work_ms` 0, unless the workflow says otherwise),
     *    so no default is written twice here. A step still checks what it relies on beyond the
     *    schema: an invalid-input error is never retried, and its message reaches the user. */
    if (!input_string(call->inputs_json, "name", name, sizeof name) || name[0] == '\0')
        return fail(api, host, ORC_ERROR_INVALID_INPUT, "missing_name", "input 'name' must be a non-empty string");
    if (!input_string(call->inputs_json, "greeting", greeting, sizeof greeting))
        return fail(api, host, ORC_ERROR_INVALID_INPUT, "bad_greeting", "input 'greeting' must be a string (at most 255 bytes)");
    if (!input_int(call->inputs_json, "work_ms", &work_ms))
        return fail(api, host, ORC_ERROR_INVALID_INPUT, "bad_work_ms", "input 'work_ms' must be an integer");

    /* 2. Log what the step is doing (never secrets, never the whole inputs object). */
    snprintf(line, sizeof line, "greeting %s (attempt %u)", name, (unsigned)call->attempt);
    api->log(host, ORC_LOG_INFO, line);

    /* 3. The "work": ten slices, with progress after each and a cancellation check. sleep_ms
     *    returns 1 as soon as the step is cancelled, so cancel reaches us at once. */
    for (int slice = 1; slice <= 10; slice++) {
        if (api->sleep_ms(host, work_ms / 10) || api->is_cancelled(host))
            return fail(api, host, ORC_ERROR_CANCELLED, "cancelled", "example.hello was cancelled");
        api->progress(host, -1, -1, slice, 10); /* files done / total; bytes unknown (-1) */
    }

    /* 4. Outputs: JSON texts, copied by the host. Visible to later steps only on success. */
    snprintf(line, sizeof line, "%s, %s!", greeting, name);
    json_string(line, json);
    if (api->set_output(host, "message", json) != 0)
        return fail(api, host, ORC_ERROR_PERMANENT, "bad_output", "could not set output 'message'");
    return ORC_RUN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The description: static data, valid for the life of the process, as the ABI requires.
 * ------------------------------------------------------------------------------------------- */

/* Designated initializers: fields a newer header appends (the structs only grow at their end)
 * are left zero (NULL), which is what "not provided" means for every optional field. */
static const orc_step_type hello_step = {
    .struct_size = sizeof(orc_step_type),
    .flags = 0, /* not a long-lived session step */
    .id = "example.hello",
    .version = "1.0.0",
    .summary = "Greet someone (an example plugin written in plain C).",
    .documentation = "Sets `message` to \"<greeting>, <name>!\". `work_ms` pretends to work that long, "
                     "reporting progress and stopping promptly when cancelled.",
    .input_schema =
        "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"name\"],\"properties\":{"
        "\"name\":{\"type\":\"string\",\"minLength\":1,\"description\":\"who to greet\"},"
        "\"greeting\":{\"type\":\"string\",\"default\":\"Hello\",\"description\":\"the greeting word\"},"
        "\"work_ms\":{\"type\":\"integer\",\"minimum\":0,\"default\":0,\"description\":\"pretend to work this long\"}}}",
    .output_schema = "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\"}}}",
    .run = run_hello,
};

static const orc_step_type *const steps[] = {&hello_step};

static const orc_plugin plugin = {
    .struct_size = sizeof(orc_plugin),
    .abi_major = ORC_ABI_VERSION_MAJOR, /* the version of the header this was compiled with */
    .abi_minor = ORC_ABI_VERSION_MINOR,
    .step_type_count = sizeof steps / sizeof steps[0],
    .name = "example",
    .version = "1.0.0",
    .summary = "An example plugin in plain C.",
    .step_types = steps,
};

/* The one exported symbol. Called once, before anything else; must not call the host. */
ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
