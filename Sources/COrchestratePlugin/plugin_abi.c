/* Compile-time checks that the ABI structs keep the layout published in plugin.h.
 * A change that breaks these breaks every plugin built against an older header. */
#include "orchestrate/plugin.h"
#include <stddef.h>
#include <stdint.h>

#if UINTPTR_MAX == 0xffffffffffffffffu /* the offsets below are those of LP64 targets */

_Static_assert(offsetof(orc_host_api, log) == 16, "orc_host_api 1.0 layout changed");
_Static_assert(offsetof(orc_step_call, timeout_ms) == 64, "orc_step_call 1.0 layout changed");
_Static_assert(offsetof(orc_step_type, run) == 56, "orc_step_type 1.0 layout changed");
_Static_assert(offsetof(orc_step_type, close_session) == 64, "orc_step_type 1.1 layout changed");
_Static_assert(offsetof(orc_plugin, step_types) == 40, "orc_plugin 1.0 layout changed");
#endif

/* The header's version, for hosts that want it without including the header. */
const unsigned orc_host_abi_major = ORC_ABI_VERSION_MAJOR;
const unsigned orc_host_abi_minor = ORC_ABI_VERSION_MINOR;
