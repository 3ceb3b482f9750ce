// Path helpers of the engine: a path's directory and last component as strings, and whether a
// path names something. One home for what compaction, the shard catalog and segment GC each
// used to write for themselves.
#pragma once

#include <cstdint>
#include <string>

namespace tracedb::engine {

// The directory part of `path`: "." when it has no '/', "/" when its only '/' is the first.
std::string DirOf(const std::string& path);

// The last component of `path` (all of it when it has no '/').
std::string BaseOf(const std::string& path);

// The size of what `path` names (stat(2), a link followed), or -1 when stat fails.
int64_t PathSize(const std::string& path);

// Whether stat(2) succeeds on `path` (a link is followed).
bool PathExists(const std::string& path);

// Whether `path` names something of size > 0: an empty file, such as the one a writer lock
// creates before anything is written (engine/compact/output_lock.h), counts as absent.
bool NonEmptyPathExists(const std::string& path);

}  // namespace tracedb::engine
