// Includes SQLite's API for the build at hand: <sqlite3.h> when linked with libsqlite3, or
// <sqlite3ext.h> routed through the host's API table when built into the loadable extension
// (TRACEDB_SQLITE_EXTENSION defined; see query/views/extension.cc).
#pragma once

#ifdef TRACEDB_SQLITE_EXTENSION
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3
#else
#include <sqlite3.h>
#endif
