// libpq, PostgreSQL's C client library, for the PostgreSQL state store.
#ifndef ORCHESTRATE_CLIBPQ_SHIM_H
#define ORCHESTRATE_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
