/* no_entry.c — a perfectly good shared library that is not an orchestrate plugin: it exports
 * something, but not orchestrate_plugin_entry_v1. */
#include <orchestrate/plugin.h>

ORC_EXPORT int some_other_function(void) { return 42; }
