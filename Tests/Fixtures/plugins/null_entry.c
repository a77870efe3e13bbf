/* null_entry.c — a plugin whose entry declines to load by returning NULL (as a plugin would when
 * a dependency it needs at run time is missing). */
#include <orchestrate/plugin.h>

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return NULL; }
