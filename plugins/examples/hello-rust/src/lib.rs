//! hello-rust — an orchestrate step plugin in Rust: the twin of `plugins/examples/hello-c`, and
//! the model for third-party plugins in Rust.
//!
//! It provides one step type, `example.hello-rust`:
//!
//! ```yaml
//! steps:
//!   greet:
//!     uses: example.hello-rust
//!     with: { name: "Ada", greeting: "Good morning", work_ms: 2000 }
//!   # later steps read ${{ steps.greet.outputs.message }}
//! ```
//!
//! Build it with nothing but cargo (no crates, so offline works):
//!
//! ```sh
//! cargo build --release --offline     # → target/release/liborchestrate_hello_rust.so
//! ```
//!
//! Files: `abi.rs` the header transcribed, `host.rs` a safe face on the callbacks, `json.rs` the
//! little JSON this step needs, and this file: the step and the plugin's description.
//!
//! Rules (plugin.h documents each function): everything the host passes is borrowed until the
//! call returns; outputs and errors go through callbacks that copy; `run` may be called on
//! several threads at once; poll for cancellation at least once a second; never log secrets or
//! the whole inputs; and never let a panic unwind into the host (see `run_hello`).
mod abi;
#[macro_use]
mod host;
mod json;

use abi::*;
use host::{borrowed_str, Host};
use json::Value;
use std::os::raw::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A NUL-terminated `'static` C string from a string literal.
macro_rules! cstr {
    ($text:expr) => {
        concat!($text, "\0").as_ptr() as *const c_char
    };
}

/// A failure the step reports: the kind decides whether the scheduler retries (ORC_ERROR_*).
struct Failure {
    kind: i32,
    code: &'static str,
    message: String,
}

impl Failure {
    fn invalid_input(code: &'static str, message: &str) -> Self {
        Failure {
            kind: ORC_ERROR_INVALID_INPUT,
            code,
            message: message.into(),
        }
    }
}

/// The step itself, in safe Rust.
fn hello(call: &OrcStepCall, host: &Host) -> Result<(), Failure> {
    // 1. Inputs. The host checked them against the schema below and filled in the defaults it
    //    declares (`greeting` "Hello", `work_ms` 0), so none is written again here. A step still
    //    checks what it relies on: an invalid-input error is never retried, and its message
    //    reaches the user.
    let inputs = unsafe { borrowed_str(call.inputs_json) }.unwrap_or("{}");
    let name = match json::top_level(inputs, "name") {
        Some(Value::Text(name)) if !name.is_empty() => name,
        _ => {
            return Err(Failure::invalid_input(
                "missing_name",
                "input 'name' must be a non-empty string",
            ))
        }
    };
    let greeting = match json::top_level(inputs, "greeting") {
        Some(Value::Text(greeting)) => greeting,
        _ => {
            return Err(Failure::invalid_input(
                "bad_greeting",
                "input 'greeting' must be a string",
            ))
        }
    };
    let work_ms = match json::top_level(inputs, "work_ms") {
        Some(Value::Integer(ms)) => ms.max(0),
        _ => {
            return Err(Failure::invalid_input(
                "bad_work_ms",
                "input 'work_ms' must be an integer",
            ))
        }
    };

    // 2. Log what the step is doing (never secrets, never the whole inputs object).
    host.log(ORC_LOG_INFO, &format!("greeting {name} (attempt {})", call.attempt));

    // 3. The "work": ten slices, progress after each, stopping at once when cancelled (sleep_ms
    //    returns early on cancel).
    for slice in 1..=10 {
        if host.sleep_ms(work_ms / 10) || host.is_cancelled() {
            return Err(Failure {
                kind: ORC_ERROR_CANCELLED,
                code: "cancelled",
                message: "example.hello-rust was cancelled".into(),
            });
        }
        host.progress(-1, -1, slice, 10); // files done / total; bytes unknown (-1)
    }

    // 4. Outputs: JSON texts, copied by the host; visible to later steps only on success.
    let message = json::string_literal(&format!("{greeting}, {name}!"));
    host.set_output("message", &message).map_err(|()| Failure {
        kind: ORC_ERROR_PERMANENT,
        code: "bad_output",
        message: "could not set output 'message'".into(),
    })
}

/// The C entry of the step. A panic is caught here and reported as a permanent error: unwinding
/// into the host's C frames would be undefined behaviour.
unsafe extern "C" fn run_hello(call: *const OrcStepCall, api: *const OrcHostApi, host: *mut OrcHost) -> i32 {
    let (call, host) = match (call.as_ref(), Host::new(api, host)) {
        (Some(call), Some(host)) => (call, host),
        _ => return ORC_RUN_FAILED,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| hello(call, &host))).unwrap_or_else(|_| {
        Err(Failure {
            kind: ORC_ERROR_PERMANENT,
            code: "panic",
            message: "example.hello-rust panicked".into(),
        })
    });
    match outcome {
        Ok(()) => ORC_RUN_OK,
        Err(failure) => {
            host.set_error(failure.kind, failure.code, &failure.message, None);
            ORC_RUN_FAILED
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The description: static data, valid for the life of the process, as the ABI requires.
// ---------------------------------------------------------------------------------------------

static HELLO_STEP: StaticDescription<OrcStepType> = StaticDescription(OrcStepType {
    struct_size: core::mem::size_of::<OrcStepType>() as u32,
    flags: 0, // not a session step, takes no items
    id: cstr!("example.hello-rust"),
    version: cstr!("1.0.0"),
    summary: cstr!("Greet someone (an example plugin written in Rust)."),
    documentation: cstr!(
        "Sets `message` to \"<greeting>, <name>!\". `work_ms` pretends to work that long, \
reporting progress and stopping promptly when cancelled."
    ),
    input_schema: cstr!(
        "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"name\"],\"properties\":{\
\"name\":{\"type\":\"string\",\"minLength\":1,\"description\":\"who to greet\"},\
\"greeting\":{\"type\":\"string\",\"default\":\"Hello\",\"description\":\"the greeting word\"},\
\"work_ms\":{\"type\":\"integer\",\"minimum\":0,\"default\":0,\"description\":\"pretend to work this long\"}}}"
    ),
    output_schema: cstr!("{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\"}}}"),
    run: Some(run_hello),
    close_session: None,
});

static STEPS: StaticDescription<[*const OrcStepType; 1]> = StaticDescription([&HELLO_STEP.0]);

static PLUGIN: StaticDescription<OrcPlugin> = StaticDescription(OrcPlugin {
    struct_size: core::mem::size_of::<OrcPlugin>() as u32,
    abi_major: ORC_ABI_VERSION_MAJOR, // the version of the header these bindings transcribe
    abi_minor: ORC_ABI_VERSION_MINOR,
    step_type_count: 1,
    name: cstr!("example-rust"),
    version: cstr!("1.0.0"),
    summary: cstr!("An example plugin in Rust."),
    step_types: &STEPS.0 as *const [*const OrcStepType; 1] as *const *const OrcStepType,
});

/// The one exported symbol. Called once, before anything else; must not call the host.
#[no_mangle]
pub extern "C" fn orchestrate_plugin_entry_v1() -> *const OrcPlugin {
    &PLUGIN.0
}
